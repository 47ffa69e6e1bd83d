//! Where audit lines go: the bounded queue and the one thread that
//! empties it ([`QueuedWriter`], batched, or synced for `--audit-sync`),
//! and the files it writes (appended, or rotated at a size), each opened
//! only when it is a regular file.

use super::{AuditLine, AuditSink, AuditSyncError, Synced};
use crate::limits::{AUDIT_BATCH_WAIT, AUDIT_FLUSH_WAIT, AUDIT_QUEUE_EVENTS};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// Where a [`QueuedWriter`]'s thread writes its lines.
pub trait LineOut: Send {
    /// Writes `lines` in order, each whole with its newline.
    fn write_lines(&mut self, lines: &[String]) -> std::io::Result<()>;

    /// Makes what was written durable (`fdatasync`), for a
    /// [synced](QueuedWriter::synced) writer. Nothing by default: a stream
    /// (stderr) has nothing to sync.
    fn sync(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// `lines`, each followed by a newline, as one buffer.
fn joined(lines: &[String]) -> Vec<u8> {
    let mut buf = Vec::with_capacity(lines.iter().map(|l| l.len() + 1).sum());
    for line in lines {
        buf.extend_from_slice(line.as_bytes());
        buf.push(b'\n');
    }
    buf
}

/// Lines into any writer (stderr), flushed after each.
pub struct Plain<W: Write + Send>(pub W);

impl<W: Write + Send> LineOut for Plain<W> {
    fn write_lines(&mut self, lines: &[String]) -> std::io::Result<()> {
        // One write per line and its newline, so a line is never
        // interleaved with another writer's (a log line on stderr).
        for line in lines {
            self.0.write_all(&joined(std::slice::from_ref(line)))?;
            self.0.flush()?;
        }
        Ok(())
    }
}

/// Why a path cannot be an audit file.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum AuditFileError {
    /// Not a regular file: a FIFO (whose open waits for a reader), a
    /// device, a socket, a directory or a symbolic link.
    #[error("not a regular file ({0}): an audit file must be one")]
    NotRegular(&'static str),
}

/// What kind of file this is, for [`AuditFileError::NotRegular`]; `None`
/// for a regular file.
pub fn not_regular(kind: &std::fs::FileType) -> Option<&'static str> {
    use std::os::unix::fs::FileTypeExt;
    Some(if kind.is_file() {
        return None;
    } else if kind.is_fifo() {
        "a fifo"
    } else if kind.is_dir() {
        "a directory"
    } else if kind.is_symlink() {
        "a symbolic link"
    } else if kind.is_socket() {
        "a socket"
    } else if kind.is_char_device() {
        "a character device"
    } else if kind.is_block_device() {
        "a block device"
    } else {
        "not a file"
    })
}

fn refuse_unless_regular(kind: &std::fs::FileType) -> std::io::Result<()> {
    match not_regular(kind) {
        None => Ok(()),
        Some(what) => Err(std::io::Error::new(
            std::io::ErrorKind::InvalidInput,
            AuditFileError::NotRegular(what),
        )),
    }
}

/// Opens `path` for appending audit lines: created 0600 if missing, never
/// through a symbolic link, and only a regular file (a Tick granted the
/// directory cannot turn it into a link to something else). It never
/// blocks: a path that is not a regular file is refused before it is
/// opened (a FIFO's open would wait for a reader, with signals unheard
/// meanwhile; a device's open may act), and checked again on what was
/// opened, non-blocking, so swapping the path between the two is no way
/// around it.
pub fn open_append(path: &Path) -> std::io::Result<std::fs::File> {
    use std::os::unix::fs::OpenOptionsExt;
    use std::os::unix::io::AsRawFd;
    match std::fs::symlink_metadata(path) {
        Ok(meta) => refuse_unless_regular(&meta.file_type())?,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
        Err(e) => return Err(e),
    }
    let file = std::fs::OpenOptions::new()
        .append(true)
        .create(true)
        .mode(0o600)
        .custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC | libc::O_NONBLOCK | libc::O_NOCTTY)
        .open(path)?;
    refuse_unless_regular(&file.metadata()?.file_type())?;
    // O_NONBLOCK was for the open; a regular file's writes ignore it, but
    // the descriptor says what it is.
    // SAFETY: fcntl on a descriptor this function owns, with int flags.
    let fd = file.as_raw_fd();
    let flags = unsafe { libc::fcntl(fd, libc::F_GETFL) };
    if flags >= 0 {
        // SAFETY: as above.
        unsafe { libc::fcntl(fd, libc::F_SETFL, flags & !libc::O_NONBLOCK) };
    }
    Ok(file)
}

/// Lines appended to one file ([`open_append`]), a batch in one write.
pub struct AppendFile(std::fs::File);

impl AppendFile {
    /// Opens `path` ([`open_append`]).
    pub fn open(path: &Path) -> std::io::Result<AppendFile> {
        open_append(path).map(AppendFile)
    }
}

impl LineOut for AppendFile {
    fn write_lines(&mut self, lines: &[String]) -> std::io::Result<()> {
        // O_APPEND: one write lands whole at the end, even beside another
        // process appending to the same file.
        self.0.write_all(&joined(lines))
    }

    fn sync(&mut self) -> std::io::Result<()> {
        self.0.sync_data()
    }
}

/// Lines appended to a file that is rotated when the next line would take
/// it past `max` bytes: `FILE` becomes `FILE.1`, `FILE.1` becomes
/// `FILE.2`, … up to `keep` files; the oldest goes.
///
/// The size is the file's own (`fstat` before each batch), not a count of
/// what this process wrote, so processes appending to one file in turn
/// (one `tickbox call` after another) keep it within its bound together;
/// and a file another process rotated away is left for the new one at the
/// path.
pub struct RotatingFile {
    path: PathBuf,
    max: u64,
    keep: usize,
    file: std::fs::File,
    /// The directory's entries changed (the file made, a rotation): a
    /// sync also syncs the directory, once.
    dir_changed: bool,
}

impl RotatingFile {
    /// Opens (or continues) `path`, rotated at `max` bytes with `keep`
    /// old files.
    pub fn open(path: &Path, max: u64, keep: usize) -> std::io::Result<RotatingFile> {
        let file = open_append(path)?;
        Ok(RotatingFile {
            path: path.to_path_buf(),
            max,
            keep,
            file,
            dir_changed: true,
        })
    }

    fn numbered(&self, n: usize) -> PathBuf {
        let mut name = self.path.clone().into_os_string();
        name.push(format!(".{n}"));
        PathBuf::from(name)
    }

    /// The size of the file at the path, reopened first when the one held
    /// is no longer there (another process rotated it).
    fn size(&mut self) -> std::io::Result<u64> {
        use std::os::unix::fs::MetadataExt;
        let held = self.file.metadata()?;
        let here = std::fs::symlink_metadata(&self.path).ok();
        if here.is_none_or(|m| m.ino() != held.ino() || m.dev() != held.dev()) {
            self.file = open_append(&self.path)?;
            self.dir_changed = true;
            return Ok(self.file.metadata()?.len());
        }
        Ok(held.len())
    }

    fn rotate(&mut self) -> std::io::Result<()> {
        if self.keep == 0 {
            let _ = std::fs::remove_file(&self.path);
        } else {
            for n in (1..self.keep).rev() {
                let from = self.numbered(n);
                if from.exists() {
                    std::fs::rename(&from, self.numbered(n + 1))?;
                }
            }
            std::fs::rename(&self.path, self.numbered(1))?;
        }
        self.file = open_append(&self.path)?;
        self.dir_changed = true;
        Ok(())
    }
}

impl LineOut for RotatingFile {
    fn write_lines(&mut self, lines: &[String]) -> std::io::Result<()> {
        // As many lines per write as fit before the next rotation.
        let mut size = self.size()?;
        let mut rest = lines;
        while !rest.is_empty() {
            let mut fit = 0;
            let mut bytes = 0;
            for line in rest {
                let len = line.len() as u64 + 1;
                if size + bytes + len > self.max && (size + bytes) > 0 {
                    break;
                }
                bytes += len;
                fit += 1;
            }
            if fit == 0 {
                self.rotate()?;
                size = 0;
                continue;
            }
            self.file.write_all(&joined(&rest[..fit]))?;
            size += bytes;
            rest = &rest[fit..];
        }
        Ok(())
    }

    fn sync(&mut self) -> std::io::Result<()> {
        self.file.sync_data()?;
        if std::mem::take(&mut self.dir_changed) {
            // The file's entry too: after a crash, a synced line in a file
            // whose name was never synced would be as lost.
            let dir = match self.path.parent() {
                Some(p) if !p.as_os_str().is_empty() => p,
                _ => Path::new("."),
            };
            std::fs::File::open(dir)?.sync_all()?;
        }
        Ok(())
    }
}

/// An [`AuditSink`] that queues events (at most [`AUDIT_QUEUE_EVENTS`])
/// for one writer thread; events offered to a full queue are counted and
/// the count is written as `"lost": N` on the next line.
///
/// Offering an event is a short lock and a push: the event is encoded on
/// the writer's thread ([`AuditLine::into_line`]), and the writer is woken
/// only when it sleeps on an empty queue. Once woken it gathers for
/// [`AUDIT_BATCH_WAIT`] and writes what came as one batch, so a stream of
/// calls costs one wake and one write per batch, not per line.
pub struct QueuedWriter {
    shared: Arc<Queue>,
    done: Mutex<Option<std::sync::mpsc::Receiver<()>>>,
}

struct Queue {
    state: Mutex<Pending>,
    wake: std::sync::Condvar,
    cap: usize,
    lost: AtomicU64,
    /// Each batch is synced, and written as soon as it is woken.
    sync: bool,
}

/// Told once a synced event's line is written and synced, or why not.
type SyncedTx = tokio::sync::oneshot::Sender<Result<(), AuditSyncError>>;

#[derive(Default)]
struct Pending {
    events: Vec<(AuditLine, Option<SyncedTx>)>,
    /// The writer sleeps until told (an offer must wake it).
    idle: bool,
    /// No more events are taken; the writer writes what is left and ends.
    closed: bool,
}

impl QueuedWriter {
    /// Starts the writer thread over `out`.
    pub fn spawn(out: Box<dyn LineOut>) -> std::io::Result<Arc<QueuedWriter>> {
        QueuedWriter::with_queue(out, AUDIT_QUEUE_EVENTS)
    }

    /// Starts a writer thread over `out` that syncs every batch it writes
    /// ([`LineOut::sync`]) and writes as soon as it is woken, without
    /// gathering for [`AUDIT_BATCH_WAIT`]: what a [synced](super::Audit::synced)
    /// handle's calls wait for ([`AuditSink::offer_synced`]). Calls that
    /// come while a batch is being synced go out together in the next,
    /// one sync for all of them.
    pub fn synced(out: Box<dyn LineOut>) -> std::io::Result<Arc<QueuedWriter>> {
        QueuedWriter::start(out, AUDIT_QUEUE_EVENTS, true)
    }

    /// [`spawn`](Self::spawn) with a queue of `events` events (tests).
    pub fn with_queue(out: Box<dyn LineOut>, events: usize) -> std::io::Result<Arc<QueuedWriter>> {
        QueuedWriter::start(out, events, false)
    }

    fn start(
        mut out: Box<dyn LineOut>,
        events: usize,
        sync: bool,
    ) -> std::io::Result<Arc<QueuedWriter>> {
        let (done_tx, done_rx) = std::sync::mpsc::channel();
        let shared = Arc::new(Queue {
            state: Mutex::new(Pending::default()),
            wake: std::sync::Condvar::new(),
            cap: events,
            lost: AtomicU64::new(0),
            sync,
        });
        let queue = shared.clone();
        std::thread::Builder::new()
            .name("tickbox-audit".into())
            .spawn(move || {
                let mut failed = false;
                while let Some(batch) = queue.next_batch() {
                    let mut waiting = Vec::new();
                    let mut lines = Vec::with_capacity(batch.len());
                    for (event, tx) in batch {
                        lines.push(event.into_line());
                        waiting.extend(tx);
                    }
                    let n = queue.lost.swap(0, Ordering::Relaxed);
                    if let Some(first) = lines.first_mut().filter(|_| n > 0) {
                        if first.ends_with('}') {
                            first.pop();
                            first.push_str(&format!(",\"lost\":{n}}}"));
                        }
                    }
                    let mut written = out.write_lines(&lines);
                    if queue.sync {
                        written = written.and_then(|()| out.sync());
                    }
                    if let Err(e) = &written {
                        // Once, not per line: a full disk would flood the log.
                        if !failed {
                            tracing::warn!(error = %e, "cannot write the audit stream");
                            failed = true;
                        }
                    }
                    let told = written.map_err(|e| AuditSyncError::Failed(e.to_string().into()));
                    for tx in waiting {
                        let _ = tx.send(told.clone());
                    }
                }
                let _ = done_tx.send(());
            })?;
        Ok(Arc::new(QueuedWriter {
            shared,
            done: Mutex::new(Some(done_rx)),
        }))
    }

    /// Closes the queue and waits at most [`AUDIT_FLUSH_WAIT`] for what is
    /// in it to be written. Events offered afterwards are dropped.
    pub fn finish(&self) {
        self.finish_within(AUDIT_FLUSH_WAIT)
    }

    /// [`finish`](Self::finish) with its own wait.
    pub fn finish_within(&self, wait: Duration) {
        crate::util::lock(&self.shared.state).closed = true;
        self.shared.wake.notify_all();
        if let Some(done) = crate::util::lock(&self.done).take() {
            let _ = done.recv_timeout(wait);
        }
    }
}

impl Queue {
    /// The writer's next batch: waits for a first event, then gathers
    /// for [`AUDIT_BATCH_WAIT`] (cut short by closing); `None` once closed
    /// and empty.
    fn next_batch(&self) -> Option<Vec<(AuditLine, Option<SyncedTx>)>> {
        let mut state = crate::util::lock(&self.state);
        while state.events.is_empty() && !state.closed {
            state.idle = true;
            state = self
                .wake
                .wait(state)
                .unwrap_or_else(std::sync::PoisonError::into_inner);
        }
        state.idle = false;
        if state.events.is_empty() {
            return None;
        }
        // A synced writer does not gather: a call is waiting for its line.
        if !state.closed && !self.sync {
            state = self
                .wake
                .wait_timeout_while(state, AUDIT_BATCH_WAIT, |s| !s.closed)
                .unwrap_or_else(std::sync::PoisonError::into_inner)
                .0;
        }
        Some(std::mem::take(&mut state.events))
    }
}

impl QueuedWriter {
    /// Queues `event` (with whom to tell once it is synced): refused when
    /// closed, and, unless someone waits for it, when the queue is full.
    fn push(&self, event: AuditLine, tx: Option<SyncedTx>) -> Result<(), Option<SyncedTx>> {
        let q = &self.shared;
        let mut state = crate::util::lock(&q.state);
        if state.closed {
            return Err(tx);
        }
        if state.events.len() >= q.cap && tx.is_none() {
            q.lost.fetch_add(1, Ordering::Relaxed);
            return Err(None);
        }
        state.events.push((event, tx));
        if std::mem::take(&mut state.idle) {
            drop(state);
            q.wake.notify_one();
        }
        Ok(())
    }
}

impl AuditSink for QueuedWriter {
    fn offer(&self, event: AuditLine) -> bool {
        self.push(event, None).is_ok()
    }

    fn offer_synced(&self, event: AuditLine) -> Option<Synced> {
        if !self.shared.sync {
            self.offer(event);
            return None;
        }
        // Past the queue's bound too: each such event is held by a call
        // that waits for it, so calls in flight bound them.
        let (tx, rx) = tokio::sync::oneshot::channel();
        match self.push(event, Some(tx)) {
            Ok(()) => Some(Synced(rx)),
            Err(_) => Some(Synced::failed(AuditSyncError::Closed)),
        }
    }
}
