//! What reaches a person's terminal from a hostile Tick.
//!
//! `tests/ticks/rogue.py` (native) and the hostile guest's `draw_*` tools
//! (wasm) send every sequence that can take over a terminal, and put escape
//! sequences, C1 controls and bidi overrides in their titles, descriptions
//! and errors. These tests look at the bytes tickbox writes: views may
//! contain only the renderer's sequences, one-shot commands only escaped
//! text and valid JSON.

use crate::live::{rendered, World, WAIT};
use crate::util::*;
use serde_json::{json, Value};
use std::time::{Duration, Instant};

/// Characters that must never reach a terminal raw (written out here, not
/// taken from the library under test).
fn forbidden(c: char) -> bool {
    (c < ' ' && c != '\n')
        || ('\u{7f}'..='\u{9f}').contains(&c)
        || matches!(c, '\u{200e}' | '\u{200f}' | '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}')
}

/// Asserts `text` (one-shot command output) holds no control, C1 or bidi
/// character besides newlines.
fn assert_inert(what: &str, text: &str) {
    if let Some(c) = text.chars().find(|&c| forbidden(c)) {
        panic!("{what} contains {c:?}: {text:?}");
    }
}

/// Asserts a view's output holds only the sequences tickbox generates:
/// CSI cursor positions, SGR, erase, cursor visibility, and the alternate
/// screen switch exactly once each way. Returns the number of sequences.
fn assert_only_view_sequences(bytes: &[u8]) -> usize {
    let text = String::from_utf8(bytes.to_vec()).expect("a view writes UTF-8");
    let b = text.as_bytes();
    let (mut i, mut n, mut enter, mut leave) = (0, 0, 0, 0);
    while i < b.len() {
        match b[i] {
            0x1b => {
                assert_eq!(
                    b.get(i + 1),
                    Some(&b'['),
                    "a non-CSI escape at {i}: {:?}",
                    &text[i..(i + 20).min(b.len())]
                );
                let start = i;
                i += 2;
                while i < b.len() && !(0x40..=0x7e).contains(&b[i]) {
                    i += 1;
                }
                let seq = &text[start..=i.min(b.len() - 1)];
                let fin = seq.as_bytes()[seq.len() - 1];
                let params = &seq[2..seq.len() - 1];
                match (params, fin) {
                    ("?1049", b'h') => enter += 1,
                    ("?1049", b'l') => leave += 1,
                    ("?25", b'h' | b'l') => {}
                    (p, b'H' | b'm' | b'K' | b'J')
                        if p.bytes().all(|c| c.is_ascii_digit() || c == b';') => {}
                    _ => panic!("a sequence tickbox does not generate: {seq:?}"),
                }
                n += 1;
            }
            b'\r' | b'\n' => {}
            c if c < 0x20 || c == 0x7f => panic!("a raw control byte {c:#04x} at {i}"),
            _ => {}
        }
        i += 1;
    }
    assert!(
        !text.chars().any(forbidden_printable),
        "C1 or bidi in {text:?}"
    );
    assert_eq!(
        (enter, leave),
        (1, 1),
        "one alternate-screen switch each way"
    );
    n
}

fn forbidden_printable(c: char) -> bool {
    forbidden(c) && c >= ' '
}

/// The terminal state after `bytes`: no mode a Tick asked for may be on.
fn assert_terminal_restored(bytes: &[u8], cols: u16, rows: u16) {
    let nz = |n| std::num::NonZeroU16::new(n).unwrap();
    let mut p = vt100::Parser::new(nz(rows), nz(cols), 0);
    p.process(bytes);
    let s = p.screen();
    assert!(!s.alternate_screen(), "left on the alternate screen");
    assert!(!s.hide_cursor(), "cursor left hidden");
    assert!(!s.bracketed_paste() && !s.application_cursor() && !s.application_keypad());
    assert_eq!(s.mouse_protocol_mode(), vt100::MouseProtocolMode::None);
}

#[test]
fn one_shot_commands_print_a_hostile_ticks_text_escaped() {
    let rogue = tick("rogue.py");
    let with = |args: &[&str]| {
        let mut v: Vec<String> = args.iter().map(|s| s.to_string()).collect();
        v.extend(["--".into(), "python3".into(), rogue.clone()]);
        tickbox(&v)
    };
    // JSON stays the same value, its unsafe characters as \u escapes.
    let out = with(&["describe"]);
    assert_eq!(out.code, 0, "{out:#?}");
    assert_inert("describe", &out.stdout);
    let d = out.json();
    assert!(d["title"]
        .as_str()
        .unwrap()
        .contains("\u{1b}]0;pwned-title\u{7}\u{1b}[2K\u{202e}"));
    assert!(out.stdout.contains("\\u001b]0;pwned-title\\u0007") && out.stdout.contains("\\u202e"));
    for cmd in ["read", "info"] {
        let out = with(&[cmd]);
        assert_eq!(out.code, 0, "{out:#?}");
        assert_inert(cmd, &out.stdout);
        out.json();
    }
    let out = with(&["call", "echo", r#"{"x":"\u009b\u202e"}"#]);
    assert_eq!(out.code, 0, "{out:#?}");
    assert_inert("call result", &out.stdout);
    assert_eq!(out.json()["args"], json!({"x": "\u{9b}\u{202e}"}));

    // The approval prompt: the description is set apart, line by line, as
    // the Tick's words; its fake `tool:` line cannot pass for tickbox's.
    let out = with(&["call", "wipe"]);
    out.expect(2, "approval required");
    assert_inert("approval prompt", &out.stderr);
    let lines: Vec<&str> = out.stderr.lines().collect();
    assert_eq!(
        lines.iter().filter(|l| l.starts_with("tool:")).count(),
        1,
        "{lines:#?}"
    );
    assert!(out
        .stderr
        .contains("the Tick describes this tool as (its words, not tickbox's):"));
    assert!(
        lines.contains(&"  | Harmless.\\r\\x1b[2K\\x1b[1Atool:        echo")
            && lines.contains(&"  | approved by tickbox \\u{202e}\\u{2066}\\x9b31m\\x85"),
        "{lines:#?}"
    );

    // A tool error: stdout is its JSON, stderr one escaped line.
    let out = with(&["call", "fail"]);
    assert_eq!(out.code, 1, "{out:#?}");
    assert_inert("tool error (stdout)", &out.stdout);
    assert_inert("tool error (stderr)", &out.stderr);
    assert_eq!(out.stderr.lines().count(), 1, "{out:#?}");
    assert!(
        out.stderr.contains("denied\\x1b]52;c;cm0gLXJmIH4=\\x07"),
        "{out:#?}"
    );

    // The screen: what the Tick drew, as escaped text.
    let out = with(&["screen"]);
    assert_eq!(out.code, 0, "{out:#?}");
    assert_inert("screen", &out.stdout);
    assert!(out.stdout.contains("ROGUE-READY"), "{out:#?}");
    assert!(out.stdout.contains("\\u{202e}exe.txt"), "{out:#?}");

    // Last words of a Tick that fails to start: escaped too.
    let out = tickbox(&["describe", "--", "python3", &rogue, "init_fail"]);
    out.expect(3, "fatal: config missing");
    assert_inert("init error", &out.stderr);
    let lines: Vec<&str> = out.stderr.lines().collect();
    assert!(
        lines[0].starts_with("tickbox: initialization failed"),
        "{lines:#?}"
    );
    assert_eq!(
        &lines[1..],
        [
            "  the Tick's last words (the end of its screen):",
            "  | starting rogue",
            "  | fatal: config missing\\u{202e}",
        ],
        "{lines:#?}"
    );
}

#[test]
fn ls_on_a_terminal_escapes_titles() {
    let w = World::new("views-ls");
    let rogue = tick("rogue.py");
    let _host = w.pty(&["run", "--name", "r", "--", "python3", &rogue], 80, 24);
    w.wait_for("r");
    let mut ls = w.pty(&["ls"], 250, 10);
    assert_eq!(ls.wait(), 0, "{}", ls.text());
    let text = ls.text();
    assert_inert("ls table", &text.replace('\r', ""));
    assert!(
        text.contains("Rogue\\x1b]0;pwned-title\\x07\\x1b[2K\\u{202e}eliF"),
        "{text}"
    );
    let out = w.tickbox(&["ls", "--json"]);
    assert_inert("ls --json", &out.stdout);
    assert_eq!(
        serde_json::from_str::<Value>(out.stdout.lines().next().unwrap()).unwrap()["title"],
        json!("Rogue\u{1b}]0;pwned-title\u{7}\u{1b}[2K\u{202e}eliF")
    );
}

#[test]
fn views_of_a_hostile_native_tick_carry_only_tickbox_sequences() {
    let w = World::new("views-native");
    let rogue = tick("rogue.py");
    let mut host = w.pty(&["run", "--name", "r", "--", "python3", &rogue], 80, 24);
    assert!(
        eventually(WAIT, || rendered(&host.text()).contains("ROGUE-READY")),
        "{}",
        rendered(&host.text())
    );
    let mut view = w.pty(&["attach", "r", "--detach-key", "ctrl-b"], 100, 30);
    // The status bar names the instance, the backend, the Tick's size (the
    // smallest view's rows minus its bar) and the chosen detach key.
    assert!(
        eventually(WAIT, || {
            let shown = rendered(&view.text());
            shown.contains("ROGUE-READY")
                && shown.contains(" r | native | 80x23 | 2 view(s) | Ctrl-B detach ")
        }),
        "{}",
        rendered(&view.text())
    );
    // Ctrl-] is only a key now: it reaches the Tick, whose terminal (in
    // cooked mode: the Tick never reads it) echoes it as `^]`, which this
    // view shows; a view that detached at Ctrl-] would never show it.
    view.type_keys(&[0x1d]);
    assert!(
        eventually(WAIT, || rendered(&view.text()).contains("^]")),
        "Ctrl-] did not reach the Tick: {}",
        rendered(&view.text())
    );
    assert_eq!(w.wait_for("r")["views"], 2, "Ctrl-] did not detach");
    // The host's own view counts the new one too, though the Tick drew
    // nothing since (the status line is not only redrawn with the screen).
    assert!(
        eventually(WAIT, || rendered(&host.text()).contains("| 2 view(s) |")),
        "{}",
        rendered(&host.text())
    );
    // Ctrl-B detaches.
    view.type_keys(&[0x02]);
    assert_eq!(view.wait(), 0, "{}", view.text());
    assert!(
        eventually(WAIT, || rendered(&host.text()).contains("| 1 view(s) |")),
        "{}",
        rendered(&host.text())
    );
    host.type_keys(&[0x1d]);
    assert_eq!(host.wait(), 0, "{}", host.text());
    for (who, pty, cols, rows) in [("run", &host, 80, 24), ("attach", &view, 100, 30)] {
        let bytes = pty.seen.lock().unwrap().clone();
        let n = assert_only_view_sequences(&bytes);
        assert!(n > 10, "{who} drew with {n} sequences");
        assert_terminal_restored(&bytes, cols, rows);
    }
    assert_eq!(w.tickbox(&["stop", "r"]).code, 0);
}

#[test]
fn views_of_a_hostile_wasm_tick_carry_only_tickbox_sequences() {
    let w = World::new("views-wasm");
    let wasm = hostile();
    let mut host = w.pty(&["run", "--name", "h", "--no-status", &wasm], 90, 20);
    w.wait_for("h");
    let out = w.tickbox(&["call", "@h", "draw_takeover"]);
    assert_eq!(out.code, 0, "{out:#?}");
    assert!(
        eventually(WAIT, || rendered(&host.text()).contains("TAKEOVER-DONE")),
        "{}",
        rendered(&host.text())
    );
    // Its queries were answered from the model, as keys: device attributes
    // and the cursor position (row 2: "hostile ready" came first); never
    // the clipboard, colors or DECRQSS.
    let keys = w.tickbox(&["call", "@h", "read_keys"]);
    assert_eq!(
        keys.json()["keys"],
        json!("\u{1b}[?1;2c\u{1b}[>0;0;0c\u{1b}[2;11R"),
        "{keys:#?}"
    );
    // No status bar: the Tick gets every row.
    assert_eq!(w.tickbox(&["call", "@h", "term"]).json()["rows"], 20);
    host.type_keys(&[0x1d]);
    assert_eq!(host.wait(), 0, "{}", host.text());
    let bytes = host.seen.lock().unwrap().clone();
    assert_only_view_sequences(&bytes);
    assert_terminal_restored(&bytes, 90, 20);
    assert_eq!(w.tickbox(&["stop", "h"]).code, 0);
}

#[test]
fn a_run_host_ends_promptly_on_sigterm_during_a_flood() {
    let w = World::new("views-sigterm");
    let wasm = hostile();
    let view = w.pty(&["run", "--name", "h", &wasm], 80, 24);
    let pid = w.wait_for("h")["pid"].as_i64().unwrap() as i32;
    assert!(
        eventually(WAIT, || rendered(&view.text()).contains("hostile ready")),
        "{}",
        rendered(&view.text())
    );
    let mut flood = w
        .command("call", &["@h", "draw_flood", r#"{"mb":20}"#])
        .stdout(std::process::Stdio::null())
        .spawn()
        .unwrap();
    // The flood is full resets: once the first is parsed the screen the run
    // host draws is blank, and the host is mid-flood.
    assert!(
        eventually(WAIT, || !rendered(&view.text()).contains("hostile ready")),
        "the flood never reached the screen: {}",
        rendered(&view.text())
    );
    let t = Instant::now();
    // SAFETY: kill has no memory-safety preconditions.
    assert_eq!(unsafe { libc::kill(pid, libc::SIGTERM) }, 0);
    assert!(eventually(WAIT, || !alive(pid)), "the host ignored SIGTERM");
    let took = t.elapsed();
    eprintln!("the run host exited {took:?} after SIGTERM during a flood");
    // What this guards: a host that ends only once the flood is parsed
    // (20 MB of resets: about two minutes here, CPU-budgeted) or never.
    // It takes its 0.5 s grace when idle; 10 s leaves a loaded machine room.
    assert!(took < Duration::from_secs(10), "{took:?}");
    let code = flood.wait().unwrap().code();
    assert!(
        matches!(code, Some(3 | 4)),
        "the flood call ended: {code:?}"
    );
}

/// A private tmux server (its own socket) with `set-clipboard on`, so an
/// OSC 52 that reaches a pane becomes a paste buffer; killed on drop.
struct Tmux {
    socket: String,
    env: Vec<(String, String)>,
}

impl Tmux {
    fn start(world: &World, tag: &str, first: &[&str]) -> Tmux {
        let tmux = Tmux {
            socket: format!("tickbox-{tag}-{}", std::process::id()),
            env: vec![
                ("XDG_RUNTIME_DIR".into(), world.xdg.clone()),
                (
                    "TICKBOX_CACHE_DIR".into(),
                    wasm_cache().to_string_lossy().into(),
                ),
            ],
        };
        let mut args = vec![
            "start-server",
            ";",
            "set",
            "-g",
            "set-clipboard",
            "on",
            ";",
            "new-session",
            "-d",
            "-s",
            "t",
            "-x",
            "100",
            "-y",
            "30",
        ];
        args.extend_from_slice(first);
        tmux.run(&args);
        tmux
    }

    fn run(&self, args: &[&str]) -> String {
        let out = std::process::Command::new("tmux")
            .args(["-L", &self.socket, "-f", "/dev/null"])
            .args(args)
            .envs(self.env.iter().map(|(k, v)| (k, v)))
            .env_remove("TMUX")
            .env_remove("RUST_LOG")
            .output()
            .expect("tmux is installed (.ci/run installs it)");
        if !out.status.success() && args != ["kill-server"] {
            eprintln!("tmux {args:?}: {}", String::from_utf8_lossy(&out.stderr));
        }
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    fn show(&self, target: &str, format: &str) -> String {
        self.run(&["display-message", "-p", "-t", target, format])
            .trim_end()
            .to_string()
    }

    fn screen(&self, target: &str) -> String {
        self.run(&["capture-pane", "-p", "-t", target])
    }

    /// Pane title, alternate screen, mouse and keypad modes, as tmux sees them.
    fn modes(&self, target: &str) -> String {
        self.show(
            target,
            "title=#{pane_title} alt=#{alternate_on} mouse=#{mouse_any_flag}#{mouse_all_flag}#{mouse_sgr_flag} keypad=#{keypad_flag}#{keypad_cursor_flag}",
        )
    }
}

impl Drop for Tmux {
    fn drop(&mut self) {
        self.run(&["kill-server"]);
    }
}

#[test]
fn through_tmux_a_hostile_tick_changes_no_title_clipboard_or_mode() {
    let w = World::new("views-tmux");
    let rogue = tick("rogue.py");
    let tickbox_bin = env!("CARGO_BIN_EXE_tickbox");
    let run = format!("{tickbox_bin} run --name r -- python3 {rogue}; sleep 600");
    let tmux = Tmux::start(&w, "view", &[&run]);
    assert!(
        eventually(WAIT, || tmux.screen("t").contains("ROGUE-READY")),
        "{}",
        tmux.screen("t")
    );
    let untouched = |modes: &str, alt: &str| {
        assert!(
            !modes.contains("pwned") && !modes.contains("apc"),
            "{modes}"
        );
        assert!(
            modes.contains(&format!("alt={alt} mouse=000 keypad=00")),
            "{modes}"
        );
        assert_eq!(
            tmux.run(&["list-buffers"]),
            "",
            "a clipboard write got through"
        );
    };
    // While viewing: the alternate screen is tickbox's own, nothing else.
    untouched(&tmux.modes("t"), "1");
    let screen = tmux.screen("t");
    assert!(screen.contains(" r | native | 100x29 |"), "{screen}");
    assert!(!screen.contains("\u{202e}"), "{screen:?}");
    // A second view in another window, then detach both.
    tmux.run(&[
        "new-window",
        "-d",
        "-t",
        "t:1",
        &format!("{tickbox_bin} attach r; sleep 600"),
    ]);
    assert!(
        eventually(WAIT, || tmux.screen("t:1").contains("ROGUE-READY")),
        "{}\nwindows: {}",
        tmux.screen("t:1"),
        tmux.run(&["list-windows", "-a"])
    );
    untouched(&tmux.modes("t:1"), "1");
    for target in ["t:1", "t:0"] {
        tmux.run(&["send-keys", "-t", target, "C-]"]);
        assert!(
            eventually(WAIT, || tmux.screen(target).contains("detached")),
            "{target}: {}",
            tmux.screen(target)
        );
        // After detach: the shell's screen, no mode, title or buffer left.
        untouched(&tmux.modes(target), "0");
    }
    assert_eq!(w.tickbox(&["stop", "r"]).code, 0);

    // The positive control: the same Tick straight on a pane takes it over,
    // so the checks above can see a takeover.
    let raw = Tmux::start(&w, "raw", &[&format!("python3 {rogue}")]);
    assert!(
        eventually(WAIT, || raw.screen("t").contains("ROGUE-READY")),
        "{}",
        raw.screen("t")
    );
    let modes = raw.modes("t");
    assert!(modes.contains("alt=1 mouse=111 keypad=11"), "{modes}");
    assert!(raw.run(&["list-buffers"]).contains("rm -rf ~"));
}

#[test]
fn ended_instances_keep_their_status_and_last_words() {
    let w = World::new("views-ended");
    let rogue = tick("rogue.py");
    let mut host = w.pty(&["run", "--name", "r", "--", "python3", &rogue], 80, 24);
    w.wait_for("r");
    // While live, `logs` is its screen, escaped (once the Tick has drawn it:
    // live means answering, not drawn yet).
    let mut out = w.tickbox(&["logs", "r"]);
    assert!(
        eventually(WAIT, || {
            out = w.tickbox(&["logs", "r"]);
            out.stdout.contains("ROGUE-READY")
        }),
        "{out:#?}"
    );
    assert_eq!(out.code, 0, "{out:#?}");
    assert_inert("logs (live)", &out.stdout);
    assert!(
        out.stdout.contains("31mROGUE-READY \\u{202e}exe.txt"),
        "{out:#?}"
    );
    assert_eq!(w.tickbox(&["stop", "r"]).code, 0);
    assert_eq!(host.wait(), 0, "{}", host.text());

    // A Tick that dies on its own: its exit status is kept.
    let faulty = tick("faulty.py");
    let _f = w.pty(
        &[
            "run",
            "--name",
            "f",
            "--",
            "python3",
            &faulty,
            "exit_mid_call",
        ],
        80,
        24,
    );
    w.wait_for("f");
    w.tickbox(&["call", "@f", "misbehave"])
        .expect(4, "unknown outcome");
    assert!(eventually(WAIT, || w.ls().is_empty()), "{:?}", w.ls());

    let out = w.tickbox(&["ls", "-a", "--json"]);
    assert_eq!(out.code, 0, "{out:#?}");
    assert_inert("ls -a", &out.stdout);
    let gone: Vec<Value> = out
        .stdout
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let status = |name: &str| {
        gone.iter()
            .find(|g| g["name"] == name)
            .unwrap_or_else(|| panic!("{name} not listed: {gone:?}"))["status"]
            .clone()
    };
    assert_eq!(status("r"), json!("the host ended the session"));
    assert_eq!(status("f"), json!("the Tick ended: exit status 7"));
    assert!(gone
        .iter()
        .all(|g| g.get("last_lines").is_none() && g["views"] == 0));
    assert!(
        w.ls().is_empty(),
        "without -a only live instances are listed"
    );

    let out = w.tickbox(&["logs", "r"]);
    assert_eq!(out.code, 0, "{out:#?}");
    assert_inert("logs (ended)", &out.stdout);
    assert_inert("logs (ended, stderr)", &out.stderr);
    assert!(
        out.stdout.contains("31mROGUE-READY \\u{202e}exe.txt"),
        "{out:#?}"
    );
    assert!(
        out.stderr.contains("the host ended the session"),
        "{out:#?}"
    );
    w.tickbox(&["logs", "nope"])
        .expect(3, "no live instance named `nope`");
    // The table shows them with their status.
    let mut table = w.pty(&["ls", "-a"], 250, 10);
    assert_eq!(table.wait(), 0);
    assert!(table.text().contains("ended "), "{}", table.text());
    assert!(table.text().contains("exit status 7"), "{}", table.text());
}

#[test]
fn keys_typed_while_a_tick_starts_reach_it_and_ctrl_c_is_a_key() {
    let w = World::new("views-keys");
    let mut host = w.pty(&["run", "--name", "h", &hostile()], 80, 24);
    // Typed at once, long before the wasm Tick is up and the view is raw.
    host.type_keys(b"ab");
    w.wait_for("h");
    assert!(eventually(WAIT, || !host.cooked()), "the view is raw");
    host.type_keys(b"\x03c");
    let mut keys = String::new();
    assert!(
        eventually(WAIT, || {
            keys += w.query("@h", "read_keys")["keys"].as_str().unwrap();
            keys == "ab\u{3}c"
        }),
        "{keys:?}"
    );
    assert_eq!(w.wait_for("h")["views"], 1, "Ctrl-C did not end the view");
}

#[test]
fn a_view_shows_a_crashed_ticks_last_words_after_leaving_its_screen() {
    let w = World::new("views-crash");
    let rogue = tick("rogue.py");
    let mut host = w.pty(&["run", "--name", "d", "--", "python3", &rogue], 80, 24);
    w.wait_for("d");
    w.tickbox(&["call", "@d", "die"]).expect(4, "exit status 9");
    assert_eq!(host.wait(), 0, "{}", host.text());
    let text = host.text();
    let after = &text[text
        .rfind("\x1b[?1049l")
        .expect("left the alternate screen")..];
    assert!(
        after.contains("tickbox: the Tick ended: exit status 9"),
        "{after:?}"
    );
    assert!(
        after.contains("  the Tick's last words (the end of its screen):\r\n")
            && after.contains("  | 31mROGUE-READY \\u{202e}exe.txt\r\n")
            // The answers to its queries came back as input, and its own
            // (cooked) terminal echoed them: still only text here.
            && after.contains("rogue: giving up\\u{202e}\r\n"),
        "{after:?}"
    );
    assert_only_view_sequences(text.as_bytes());
}
