//! Live instances and views: `tickbox run` and `tickbox attach` driven
//! through real PTYs, `@NAME` clients, `ls`, `watch`, and the socket's
//! guards. Every test has its own `XDG_RUNTIME_DIR`.

use crate::util::*;
use portable_pty::CommandBuilder;
use serde_json::{json, Value};
use std::os::unix::fs::PermissionsExt;
use std::sync::{Arc, Mutex};
use std::time::Duration;
pub(crate) use tickbox_test_support::pty::Pty;

pub(crate) use tickbox_test_support::pty::WAIT;

/// A per-test live-instance world: its own runtime dir.
pub(crate) struct World {
    pub(crate) dir: TempDir,
    pub(crate) xdg: String,
}

impl World {
    pub(crate) fn new(tag: &str) -> World {
        let dir = TempDir::new(tag);
        let xdg = dir.0.to_string_lossy().into_owned();
        World { dir, xdg }
    }

    pub(crate) fn env(&self) -> [(&str, &str); 1] {
        [("XDG_RUNTIME_DIR", self.xdg.as_str())]
    }

    pub(crate) fn tickbox(&self, args: &[&str]) -> Output {
        tickbox_env(args, &self.env())
    }

    /// `tickbox SUBCOMMAND ARGS` in this world, stderr discarded, to spawn.
    pub(crate) fn command(&self, subcommand: &str, args: &[&str]) -> std::process::Command {
        let mut cmd = std::process::Command::new(env!("CARGO_BIN_EXE_tickbox"));
        cmd.arg(subcommand)
            .args(args)
            .env("XDG_RUNTIME_DIR", &self.xdg)
            .env("TICKBOX_CACHE_DIR", wasm_cache())
            .env_remove("RUST_LOG")
            .stderr(std::process::Stdio::null());
        cmd
    }

    /// The result of calling the query `tool` of the live instance `target`.
    pub(crate) fn query(&self, target: &str, tool: &str) -> Value {
        let out = self.tickbox(&["call", target, tool]);
        assert_eq!(out.code, 0, "{out:#?}");
        out.json()
    }

    /// `tickbox ls --json`, parsed.
    pub(crate) fn ls(&self) -> Vec<Value> {
        let out = self.tickbox(&["ls", "--json"]);
        assert_eq!(out.code, 0, "{out:#?}");
        out.stdout
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect()
    }

    /// Waits until an instance called `name` is listed, and returns it.
    pub(crate) fn wait_for(&self, name: &str) -> Value {
        let mut found = None;
        assert!(
            eventually(WAIT, || {
                found = self.ls().into_iter().find(|i| i["name"] == name);
                found.is_some()
            }),
            "`{name}` never appeared in ls"
        );
        found.unwrap()
    }

    /// `tickbox <args>` on a fresh PTY of this size.
    pub(crate) fn pty(&self, args: &[&str], cols: u16, rows: u16) -> Pty {
        self.pty_env(args, cols, rows, &[])
    }

    /// [`World::pty`] with more environment (overriding the world's).
    pub(crate) fn pty_env(&self, args: &[&str], cols: u16, rows: u16, env: &[(&str, &str)]) -> Pty {
        self.pty_typed_ahead(args, cols, rows, env, b"")
    }

    /// [`World::pty_env`] with `keys` typed on the terminal before
    /// tickbox starts: they wait in its input queue, as keys a person or a
    /// script typed ahead would.
    pub(crate) fn pty_typed_ahead(
        &self,
        args: &[&str],
        cols: u16,
        rows: u16,
        env: &[(&str, &str)],
        keys: &[u8],
    ) -> Pty {
        let mut cmd = CommandBuilder::new(env!("CARGO_BIN_EXE_tickbox"));
        cmd.args(args);
        cmd.env("XDG_RUNTIME_DIR", &self.xdg);
        cmd.env("TICKBOX_CACHE_DIR", wasm_cache());
        cmd.env("TICKBOX_TRUST_DIR", target_dir().join("test-trust-none"));
        cmd.env_remove("RUST_LOG");
        for (k, v) in env {
            cmd.env(k, v);
        }
        cmd.cwd(root());
        Pty::spawn(cmd, cols, rows, keys)
    }
}

impl Drop for World {
    /// Hosts outlive their views by design, so every instance this test
    /// left running is stopped here, and killed if it does not stop.
    fn drop(&mut self) {
        let Ok(out) = std::panic::catch_unwind(|| self.tickbox(&["ls", "--json"])) else {
            return;
        };
        for info in out
            .stdout
            .lines()
            .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        {
            let id = info["id"].as_str().unwrap_or_default();
            let _ = self.tickbox(&["stop", id]);
            let pid = info["pid"].as_i64().unwrap_or(0) as i32;
            if pid > 0 && !eventually(Duration::from_secs(5), || !alive(pid)) {
                // SAFETY: kill has no memory-safety preconditions.
                unsafe { libc::kill(pid, libc::SIGKILL) };
            }
        }
    }
}

/// `tickbox watch` as a child whose JSON lines are collected.
struct Watch {
    child: std::process::Child,
    lines: Arc<Mutex<Vec<Value>>>,
}

impl Watch {
    fn start(world: &World, args: &[&str]) -> Watch {
        let mut child = world
            .command("watch", args)
            .stdin(std::process::Stdio::null())
            .stdout(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        let out = child.stdout.take().unwrap();
        let lines = Arc::new(Mutex::new(Vec::new()));
        let sink = lines.clone();
        std::thread::spawn(move || {
            use std::io::BufRead;
            for line in std::io::BufReader::new(out).lines() {
                let Ok(line) = line else { break };
                sink.lock()
                    .unwrap()
                    .push(serde_json::from_str(&line).unwrap());
            }
        });
        Watch { child, lines }
    }

    fn lines(&self) -> Vec<Value> {
        self.lines.lock().unwrap().clone()
    }

    fn merged(&self) -> u64 {
        self.lines()
            .iter()
            .map(|d| d["merged"].as_u64().unwrap())
            .sum()
    }

    /// Waits for a delivery whose data satisfies `cond`.
    pub(crate) fn wait_for(&self, what: &str, cond: impl Fn(&Value) -> bool) {
        assert!(
            eventually(WAIT, || self.lines().iter().any(|d| cond(&d["data"]))),
            "no delivery with {what}; got {:?}",
            self.lines()
        );
    }
}

impl Drop for Watch {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn counter_value(world: &World, name: &str) -> Value {
    let out = world.tickbox(&["read", &format!("@{name}")]);
    assert_eq!(out.code, 0, "{out:#?}");
    out.json()
}

#[test]
fn a_view_shows_the_screen_at_once_and_its_keys_reach_the_tick() {
    let w = World::new("live-view");
    let counter = tick("counter.py");
    let mut host = w.pty(&["run", "--name", "c", "--", "python3", &counter], 100, 30);
    // Listed first, then viewed: `run` attaches once its host is ready.
    assert!(eventually(WAIT, || w.wait_for("c")["views"] == 1));
    let info = w.wait_for("c");
    assert_eq!(
        (&info["kind"], &info["backend"], &info["views"]),
        (&json!("example.counter"), &json!("native"), &json!(1)),
        "{info}"
    );

    let mut taken = w.pty(&["run", "--name", "c", "--", "python3", &counter], 80, 24);
    assert_eq!(taken.wait(), 2, "{}", taken.text());
    assert!(taken.text().contains("`c` is taken"), "{}", taken.text());

    // The directory and the socket are private to this user.
    let dir = w.dir.path("tickbox");
    let mode = |p: &std::path::Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode(&dir), 0o700);
    let socket = dir.join(format!("{}.sock", info["id"].as_str().unwrap()));
    assert_eq!(mode(&socket), 0o600);

    // The one-shot commands give the same output for a live instance.
    let live = w.tickbox(&["describe", "@c"]);
    let started = w.tickbox(&["describe", "--", "python3", &counter]);
    assert_eq!((live.code, &live.stdout), (0, &started.stdout), "{live:#?}");
    // `info` too, with what the live host reports (its tools), as its help says.
    let info_live = w.tickbox(&["info", "@c"]);
    assert_eq!(info_live.code, 0, "{info_live:#?}");
    let i = info_live.json();
    assert_eq!(
        (&i["backend"], &i["instance"]),
        (&json!("live"), &json!("c")),
        "{i}"
    );
    assert!(
        i["tools"]
            .as_array()
            .is_some_and(|t| t.iter().any(|t| t["name"] == "increment")),
        "{i}"
    );
    w.tickbox(&["call", "@c", "increment", r#"{"amount":2}"#])
        .expect(2, "approval required");
    let out = w.tickbox(&["call", "@c", "increment", r#"{"amount":2}"#, "--yes"]);
    assert_eq!((out.code, out.json()), (0, json!({"value": 2})), "{out:#?}");
    w.tickbox(&["call", "@c", "increment", r#"{"amount":"x"}"#, "--yes"])
        .expect(2, "amount");
    let watch = Watch::start(&w, &["@c", "--interval", "50ms"]);
    watch.wait_for("value 2", |d| d["value"] == 2);

    // The counter draws only when its value changes, so seeing its screen
    // right after attaching proves the repaint came from the screen model.
    let mut view = w.pty(&["attach", "c"], 80, 24);
    view.expect_since(0, "Counter: 2");
    assert!(eventually(WAIT, || w.wait_for("c")["views"] == 2));

    // A key typed in the second view changes the value; both views see it.
    let (host_mark, view_mark) = (host.mark(), view.mark());
    view.type_keys(b"+");
    view.expect_since(view_mark, "Counter: 3");
    host.expect_since(host_mark, "Counter: 3");
    assert_eq!(counter_value(&w, "c")["data"]["value"], 3);

    // Resizing a view and attaching never make updates (§8.3): after one
    // key and one marker call, exactly two updates were merged in all.
    view.resize(90, 20);
    let out = w.tickbox(&["call", "@c", "increment", r#"{"amount":10}"#, "--yes"]);
    assert_eq!(out.json(), json!({"value": 13}), "{out:#?}");
    watch.wait_for("value 13", |d| d["value"] == 13);
    assert_eq!(watch.merged(), 2, "{:?}", watch.lines());
    assert_eq!(counter_value(&w, "c")["seq"], 3);

    // Detaching leaves the Tick running, the host view undisturbed.
    view.type_keys(&[0x1d]);
    assert_eq!(view.wait(), 0, "{}", view.text());
    assert!(view.text().contains("detached"), "{}", view.text());
    assert!(eventually(WAIT, || w.wait_for("c")["views"] == 1));
    let host_mark = host.mark();
    host.type_keys(b"-");
    host.expect_since(host_mark, "Counter: 12");

    // Detaching the host's own view gives the shell back; the Tick lives on.
    host.type_keys(&[0x1d]);
    assert_eq!(host.wait(), 0, "{}", host.text());
    assert_eq!(counter_value(&w, "c")["data"]["value"], 12);
    let out = w.tickbox(&["stop", "c"]);
    assert_eq!(out.code, 0, "{out:#?}");
    // `stop` returns once the instance is gone: `ls` right after it is empty.
    assert!(w.ls().is_empty(), "{:?}", w.ls());
}

#[test]
fn a_view_puts_the_terminal_back_when_it_is_signalled() {
    let w = World::new("live-restore");
    let counter = tick("counter.py");
    let _host = w.pty(&["run", "--name", "c", "--", "python3", &counter], 80, 24);
    w.wait_for("c");
    for sig in [libc::SIGTERM, libc::SIGHUP] {
        let mut view = w.pty(&["attach", "c"], 80, 24);
        view.expect_since(0, "Counter: 0");
        assert!(eventually(WAIT, || !view.cooked()), "the view is raw");
        view.signal(sig);
        assert_eq!(view.wait(), 130, "{}", view.text());
        assert!(view.cooked(), "signal {sig} left the terminal raw");
        // The shell's screen is back: the alternate screen was left last.
        let shown = view.text();
        assert!(
            shown.rfind("\x1b[?1049l") > shown.rfind("\x1b[?1049h"),
            "signal {sig} left the alternate screen on"
        );
        assert!(
            view.text().contains("the Tick keeps running"),
            "{}",
            view.text()
        );
    }
    assert_eq!(
        counter_value(&w, "c")["seq"],
        0,
        "views never touch the session"
    );
}

/// The Tick's terminal as large as its smallest view is tickbox-app's
/// `live` test; here, the binary's `watch @NAME` ended by SIGINT.
#[test]
fn interrupting_a_watch_of_a_live_instance_leaves_it_alone() {
    let w = World::new("live-watch-sigint");
    let probe = tick("probe.py");
    let _host = w.pty(&["run", "--name", "p", "--", "python3", &probe], 100, 30);
    w.wait_for("p");
    let screen = w.tickbox(&["screen", "@p"]);
    assert!(screen.stdout.contains("probe ready"), "{screen:#?}");
    // Interrupting a watch of a live instance leaves the instance alone.
    let mut watch = w
        .command("watch", &["@p"])
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut first = String::new();
    use std::io::BufRead;
    // Kept open: a closed stdout would end the watch by itself.
    let mut reader = std::io::BufReader::new(watch.stdout.take().unwrap());
    reader.read_line(&mut first).unwrap();
    assert_eq!(
        serde_json::from_str::<Value>(&first).unwrap()["data"],
        json!({"ok": true})
    );
    // SAFETY: kill has no memory-safety preconditions.
    assert_eq!(unsafe { libc::kill(watch.id() as i32, libc::SIGINT) }, 0);
    let out = watch.wait_with_output().unwrap();
    drop(reader);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(130), "{stderr}");
    assert!(stderr.contains("the Tick keeps running"), "{stderr}");
    assert_eq!(w.wait_for("p")["name"], "p");
}

#[test]
fn clients_of_a_missing_instance_fail_like_a_tick_that_cannot_start() {
    let w = World::new("live-missing");
    for args in [
        vec!["read", "@nope"],
        vec!["describe", "@nope"],
        vec!["screen", "@nope"],
        vec!["call", "@nope", "history"],
        vec!["attach", "nope"],
        vec!["watch", "@nope"],
    ] {
        w.tickbox(&args)
            .expect(3, "no live instance named `nope`; no Ticks are live");
    }
}

#[test]
fn a_tick_that_fails_to_start_under_run_reports_like_the_one_shot_commands() {
    let w = World::new("live-badrun");
    let mut host = w.pty(&["run", "--", "/nonexistent/tick"], 80, 24);
    assert_eq!(host.wait(), 3);
    assert!(host.text().contains("not found"), "{}", host.text());
    assert!(w.ls().is_empty());
}

#[test]
fn the_ticks_of_tickbox_mcp_are_live_instances_too() {
    let w = World::new("live-mcp");
    let counter = tick("counter.py");
    let mut mcp = w
        .command("mcp", &["--name", "mc", "--", "python3", &counter])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let info = w.wait_for("mc");
    assert_eq!(info["pid"], mcp.id(), "{info}");
    let out = w.tickbox(&["call", "@mc", "increment", r#"{"amount":2}"#, "--yes"]);
    assert_eq!(out.json(), json!({"value": 2}), "{out:#?}");
    assert_eq!(counter_value(&w, "mc")["seq"], 1);
    // The MCP client going away ends the facade, and the instance with it.
    drop(mcp.stdin.take());
    assert!(eventually(WAIT, || mcp.try_wait().unwrap().is_some()));
    assert!(w.ls().is_empty(), "{:?}", w.ls());
}

/// What a terminal showing `bytes` displays, as text (the SDK draws with
/// cursor moves and attributes, so raw bytes do not hold "Counter: 2").
pub(crate) fn rendered(bytes: &str) -> String {
    let size = |n| std::num::NonZeroU16::new(n).expect("non-zero");
    let mut p = vt100::Parser::new(size(60), size(200), 0);
    p.process(bytes.as_bytes());
    p.screen().contents()
}

/// The three terminals of `page` (README's tour, or the manual's page on
/// live instances), as written there: the block marked as run by
/// [`the_readme_story_with_the_counter_example_as_wasm`], one command line
/// per terminal, in order, without the leading `tickbox`, with `$C` (the
/// tour's counter) replaced by `counter`. Words are split as a shell would
/// split these lines (blanks, and single quotes kept together).
fn page_terminals(page: &str, counter: &str) -> Vec<Vec<String>> {
    let text = std::fs::read_to_string(root().join(page)).expect(page);
    let (_, after) = text
        .split_once("<!-- run by live::the_readme_story_with_the_counter_example_as_wasm -->")
        .unwrap_or_else(|| panic!("{page}'s three terminals"));
    let block = after
        .split_once("```sh\n")
        .and_then(|(_, b)| b.split_once("```"))
        .expect("its sh block")
        .0;
    let words = |line: &str| {
        let (mut out, mut word, mut quoted) = (Vec::new(), String::new(), false);
        for c in line.chars() {
            match c {
                '\'' => quoted = !quoted,
                c if c.is_whitespace() && !quoted => {
                    out.extend((!word.is_empty()).then(|| std::mem::take(&mut word)))
                }
                c => word.push(c),
            }
        }
        out.extend((!word.is_empty()).then_some(word));
        out
    };
    block
        .lines()
        .map(|line| {
            let (command, comment) = line.split_once('#').expect("a `# terminal N` comment");
            assert!(comment.trim_start().starts_with("terminal "), "{line}");
            let mut argv: Vec<String> = words(command)
                .into_iter()
                .map(|w| if w == "$C" { counter.to_string() } else { w })
                .collect();
            assert_eq!(argv.remove(0), "tickbox", "{line}");
            argv
        })
        .collect()
}

/// A command line's words, borrowed.
fn argv(words: &[String]) -> Vec<&str> {
    words.iter().map(String::as_str).collect()
}

/// README's three terminals, and the same on the manual's page on live
/// instances, each line as written there.
#[test]
fn the_readme_story_with_the_counter_example_as_wasm() {
    let wasm = build_wasm("examples", "counter", "wasm32-wasip2");
    for page in ["README.md", "docs/guide/live.md"] {
        three_terminals(page, &page_terminals(page, &wasm.to_string_lossy()));
    }
}

/// Runs `page`'s three terminals: `run --name c $C`, `attach c`, and a
/// call that both views show.
fn three_terminals(page: &str, lines: &[Vec<String>]) {
    let w = World::new("live-counter-wasm");
    let [run, attach, call] = lines else {
        panic!("{page} has three terminals: {lines:?}")
    };
    // Terminal 1: `tickbox run --name c $C`.
    let host = w.pty(&argv(run), 100, 30);
    assert!(eventually(WAIT, || w.wait_for("c")["views"] == 1), "{page}");
    assert_eq!(w.wait_for("c")["backend"], "wasm");
    // Terminal 2: `tickbox attach c`, repainted at once.
    let view = w.pty(&argv(attach), 80, 24);
    assert!(
        eventually(WAIT, || rendered(&view.text()).contains("Counter: 0")),
        "{page}: {}",
        rendered(&view.text())
    );
    // Terminal 3: a call through the protocol; all three see the value.
    let out = w.tickbox(&argv(call));
    assert_eq!(
        (out.code, &out.json()["value"]),
        (0, &json!(2)),
        "{page}: {out:#?}"
    );
    for (who, pty) in [("run", &host), ("attach", &view)] {
        assert!(
            eventually(WAIT, || rendered(&pty.text()).contains("Counter: 2")),
            "{page}, {who}: {}",
            rendered(&pty.text())
        );
    }
    assert_eq!(counter_value(&w, "c")["data"]["value"], 2);
    let out = w.tickbox(&["stop", "c"]);
    assert_eq!(out.code, 0, "{page}: {out:#?}");
    assert!(
        eventually(WAIT, || w.ls().is_empty()),
        "{page}: {:?}",
        w.ls()
    );
}

#[test]
fn a_host_killed_mid_call_is_an_unknown_outcome_and_call_timeout_reaches_it() {
    let w = World::new("live-killed");
    let faulty = tick("faulty.py");
    let _host = w.pty(
        &[
            "run",
            "--name",
            "slow",
            "--",
            "python3",
            &faulty,
            "slow_async",
        ],
        80,
        24,
    );
    let info = w.wait_for("slow");
    // `misbehave` takes this Tick 30 s (it goes on answering everything
    // else): the host's answer at 1 s is ours.
    let out = w.tickbox(&["call", "@slow", "misbehave", "--call-timeout", "1"]);
    out.expect(4, "no response within 1s");
    w.tickbox(&["call", "@slow", "misbehave", "--call-timeout", "1e30"])
        .expect(2, "--call-timeout must be");
    assert!(out.elapsed < Duration::from_secs(15), "{:?}", out.elapsed);
    // Now a call the Tick has, and the host dies under it.
    let caller = w
        .command("call", &["@slow", "misbehave"])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    // The Tick says on its screen when the call reached it: only then is
    // it in flight at the host.
    let mut screen = String::new();
    assert!(
        eventually(WAIT, || {
            screen = w.tickbox(&["screen", "@slow"]).stdout;
            screen.contains("misbehave call 2 received")
        }),
        "the second call never reached the Tick: {screen}"
    );
    let pid = info["pid"].as_i64().unwrap() as i32;
    // SAFETY: kill has no memory-safety preconditions.
    assert_eq!(unsafe { libc::kill(pid, libc::SIGKILL) }, 0);
    let out = caller.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(4), "{stderr}");
    assert!(stderr.contains("unknown outcome"), "{stderr}");
}

/// What the host delivers is tickbox-host's `delivery` tests; here, that
/// `watch` prints each delivery as a line and `--interval` reaches the
/// subscription (a burst far faster than it arrives merged).
#[test]
fn watch_prints_one_delivery_a_line_at_its_interval() {
    let burst = tick("burst.py");
    let out = tickbox(&[
        "watch",
        "--interval",
        "200ms",
        "--",
        "python3",
        &burst,
        "1000",
    ]);
    assert_eq!(out.code, 0, "{out:#?}");
    let lines: Vec<Value> = out
        .stdout
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let merged: u64 = lines.iter().filter_map(|d| d["merged"].as_u64()).sum();
    assert!(
        !lines.is_empty() && lines.len() <= 100 && merged == 1000,
        "{} deliveries merging {merged} updates",
        lines.len()
    );
    tickbox(&["watch", "--interval", "soon", "--", "python3", &burst]).expect(2, "--interval");
}

/// Reads `watch`'s first line, then closes its stdout like `| head -1`.
fn first_line_then_close(mut child: std::process::Child) -> (Value, std::process::Child) {
    use std::io::BufRead;
    let mut first = String::new();
    let mut out = std::io::BufReader::new(child.stdout.take().unwrap());
    out.read_line(&mut first).unwrap();
    drop(out);
    (serde_json::from_str(&first).unwrap(), child)
}

fn exits_within(child: &mut std::process::Child, limit: Duration) -> Option<i32> {
    let mut code = None;
    eventually(limit, || {
        code = child.try_wait().unwrap().map(|s| s.code().unwrap_or(-1));
        code.is_some()
    });
    if code.is_none() {
        let _ = child.kill();
        let _ = child.wait();
    }
    code
}

#[test]
fn watch_ends_at_once_when_its_reader_goes() {
    let w = World::new("live-epipe");
    let counter = tick("counter.py");
    // A Tick of its own: the state does not change after the first line, so
    // only noticing the closed pipe can end the watch.
    let child = w
        .command("watch", &["--", "python3", &counter])
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let (first, mut child) = first_line_then_close(child);
    assert!(first["seq"].is_u64(), "{first}");
    assert_eq!(exits_within(&mut child, WAIT), Some(0));
    // A live instance: the watch ends, the instance stays.
    let _host = w.pty(&["run", "--name", "c", "--", "python3", &counter], 80, 24);
    w.wait_for("c");
    let child = w
        .command("watch", &["@c"])
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let (_, mut child) = first_line_then_close(child);
    assert_eq!(exits_within(&mut child, WAIT), Some(0));
    assert_eq!(w.wait_for("c")["name"], "c");
}

/// A long first compile under `tickbox run` says so on the person's
/// terminal (the host's own stderr is not that terminal): the notice the
/// one-shot commands print on stderr reaches the view's terminal while the
/// person waits. The compile bomb keeps Cranelift busy until its
/// `--compile-timeout`, so the start then fails with the bound named.
#[test]
fn a_long_first_compile_under_run_says_so_on_the_terminal() {
    let world = World::new("run-notice");
    let dir = TempDir::new("run-notice-wasm");
    let bomb = tickbox_test_support::wasm::write_wasm(
        &dir,
        "bomb.wasm",
        &tickbox_test_support::wasm::compile_bomb(),
    );
    let cache = TempDir::new("run-notice-cache");
    let mut host = world.pty_env(
        &["run", &bomb, "--compile-timeout", "5"],
        100,
        30,
        &[
            ("TICKBOX_COMPILER", "cranelift"),
            ("TICKBOX_CACHE_DIR", cache.0.to_str().unwrap()),
        ],
    );
    host.expect_since(0, "compiling bomb.wasm");
    let code = host.wait();
    assert_eq!(
        code,
        3,
        "the start fails at the compile bound: {:?}",
        host.text()
    );
    assert!(
        host.text().contains("compile_timeout (5 s)"),
        "{:?}",
        host.text()
    );
}
