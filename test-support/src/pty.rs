//! A process on a terminal of its own (a real PTY), for the tests of
//! what a person sees and types: everything it shows is kept, keys are
//! typed, the terminal resized and its mode read.

use crate::eventually;
use portable_pty::{native_pty_system, CommandBuilder, MasterPty, PtySize};
use std::io::{Read, Write};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// How long a terminal is watched for what a test waits for.
pub const WAIT: Duration = Duration::from_secs(20);

/// A process on its own terminal.
pub struct Pty {
    master: Box<dyn MasterPty + Send>,
    writer: Box<dyn Write + Send>,
    child: Box<dyn portable_pty::Child + Send + Sync>,
    pub seen: Arc<Mutex<Vec<u8>>>,
    /// Set once the reader has seen the terminal close.
    drained: Arc<AtomicBool>,
}

impl Pty {
    /// Spawns `cmd` on a fresh terminal of this size, with `keys` typed
    /// on it before the process starts: they wait in its input queue, as
    /// keys a person or a script typed ahead would.
    pub fn spawn(cmd: CommandBuilder, cols: u16, rows: u16, keys: &[u8]) -> Pty {
        let pair = native_pty_system()
            .openpty(PtySize {
                rows,
                cols,
                pixel_width: 0,
                pixel_height: 0,
            })
            .unwrap();
        let mut writer = pair.master.take_writer().unwrap();
        if !keys.is_empty() {
            // Written while no process reads the terminal: the line
            // discipline queues them (and echoes them) until one does.
            writer.write_all(keys).unwrap();
            writer.flush().unwrap();
        }
        let child = pair.slave.spawn_command(cmd).unwrap();
        drop(pair.slave);
        let mut reader = pair.master.try_clone_reader().unwrap();
        let seen = Arc::new(Mutex::new(Vec::new()));
        let drained = Arc::new(AtomicBool::new(false));
        let (sink, done) = (seen.clone(), drained.clone());
        std::thread::spawn(move || {
            let mut buf = [0u8; 8192];
            while let Ok(n) = reader.read(&mut buf) {
                if n == 0 {
                    break;
                }
                sink.lock().unwrap().extend_from_slice(&buf[..n]);
            }
            // EOF or EIO: every process on the terminal has closed it.
            done.store(true, Ordering::SeqCst);
        });
        Pty {
            master: pair.master,
            writer,
            child,
            seen,
            drained,
        }
    }

    pub fn text(&self) -> String {
        String::from_utf8_lossy(&self.seen.lock().unwrap()).into_owned()
    }

    /// How many bytes it has shown so far (to look only at what comes next).
    pub fn mark(&self) -> usize {
        self.seen.lock().unwrap().len()
    }

    pub fn since(&self, mark: usize) -> String {
        String::from_utf8_lossy(&self.seen.lock().unwrap()[mark..]).into_owned()
    }

    pub fn expect_since(&self, mark: usize, needle: &str) {
        assert!(
            eventually(WAIT, || self.since(mark).contains(needle)),
            "{needle:?} never appeared; the terminal showed: {:?}",
            self.since(mark)
        );
    }

    pub fn type_keys(&mut self, keys: &[u8]) {
        self.writer.write_all(keys).unwrap();
        self.writer.flush().unwrap();
    }

    pub fn resize(&self, cols: u16, rows: u16) {
        self.master
            .resize(PtySize {
                rows,
                cols,
                pixel_width: 0,
                pixel_height: 0,
            })
            .unwrap();
    }

    /// Whether the terminal is in cooked mode (canonical input and echo).
    pub fn cooked(&self) -> bool {
        let fd = self.master.as_raw_fd().expect("a PTY fd");
        // SAFETY: tcgetattr fills the struct we pass for an fd we hold.
        let mut t: libc::termios = unsafe { std::mem::zeroed() };
        assert_eq!(unsafe { libc::tcgetattr(fd, &mut t) }, 0);
        t.c_lflag & libc::ICANON != 0 && t.c_lflag & libc::ECHO != 0
    }

    pub fn signal(&self, sig: i32) {
        let pid = self.child.process_id().expect("a pid") as i32;
        // SAFETY: kill has no memory-safety preconditions.
        assert_eq!(unsafe { libc::kill(pid, sig) }, 0);
    }

    /// Waits for the process to exit and returns its exit code.
    pub fn wait(&mut self) -> u32 {
        let mut code = None;
        assert!(
            eventually(WAIT, || {
                code = self.child.try_wait().unwrap().map(|s| s.exit_code());
                code.is_some()
            }),
            "the process did not exit; it showed {:?}",
            self.text()
        );
        // What it wrote last may still be on its way through the PTY.
        eventually(WAIT, || self.drained.load(Ordering::SeqCst));
        code.unwrap()
    }
}

impl Drop for Pty {
    fn drop(&mut self) {
        let _ = self.child.kill();
    }
}
