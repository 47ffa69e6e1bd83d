//! The `console` examples of README.md and the manual (`docs/`) run, and
//! what they show on stdout is what they print.
//!
//! A ```` ```console ```` block is a session: `$ COMMAND` lines (a line
//! ending in `\` continues on the next), each followed by its stdout. In
//! the shown output a line `…` stands for any number of lines, a `…`
//! inside a line for any text, and a last line `[exit N]` for the exit
//! code (0 when none is shown). Each command runs in `bash -o pipefail`
//! with the `tickbox` under test first on PATH, in a copy of the
//! repository's layout (links to its files) where
//! `examples/target/wasm32-wasip2/release` is where the test build put
//! the example guests, so the paths README's first command makes work as
//! written (and `hostile.wasm`, the test suite's hostile guest, with an
//! empty `data/` for it to be refused from).
//!
//! A block preceded by `<!-- serves until stopped -->` shows servers: each
//! command starts, must print the shown lines on stderr (in that order,
//! among others) within [`SERVER_READY`], is then sent SIGTERM and must
//! exit with the shown code within [`SERVER_STOP`]. A block preceded by
//! `<!-- with a registry at 127.0.0.1:5000 -->` runs against a real
//! registry the test starts (its address put where the block says
//! `127.0.0.1:5000`, in commands and output). A block preceded by
//! `<!-- not run: WHY -->` is not run; the test lists them with their
//! reasons, and fails on a shell block (`sh`, `bash`, `shell`) that is
//! neither run nor marked. Every `tickbox COMMAND --flag …` line of a
//! block not run must still name a command and flags that `tickbox
//! COMMAND --help` lists, so a renamed flag cannot hide there.

use crate::util::registry::Registry;
use crate::util::{build_wasm, hostile, root, TempDir};
use std::io::BufRead;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

/// The variable README's tour sets before its examples, as it sets it.
const TOUR_SETUP: (&str, &str) = ("C", "examples/target/wasm32-wasip2/release/counter.wasm");

/// The marker of a block that is shown and not run.
const NOT_RUN: &str = "<!-- not run:";
/// The marker of a block of servers (see the module doc).
const SERVES: &str = "<!-- serves until stopped -->";
/// The marker of a block that runs against a registry, and the address it
/// names for it.
const WITH_REGISTRY: &str = "<!-- with a registry at 127.0.0.1:5000 -->";
const SHOWN_REGISTRY: &str = "127.0.0.1:5000";
/// How long a server may take to print what its block shows: a bound for
/// a hang on a loaded machine, not a measure of start-up.
const SERVER_READY: Duration = Duration::from_secs(120);
/// How long a server may take to exit after SIGTERM (its drain included).
const SERVER_STOP: Duration = Duration::from_secs(60);

#[derive(Debug)]
struct Example {
    /// `file:line` of the command.
    at: String,
    command: String,
    output: Vec<String>,
    code: i32,
    /// A server: run until what it shows is printed, then stopped.
    serves: bool,
    /// Runs against a registry, named [`SHOWN_REGISTRY`].
    registry: bool,
}

/// README.md and every page under docs/.
fn pages() -> Vec<PathBuf> {
    fn walk(dir: &Path, out: &mut Vec<PathBuf>) {
        for e in std::fs::read_dir(dir).expect("read docs").flatten() {
            let p = e.path();
            if p.is_dir() {
                walk(&p, out);
            } else if p.extension().is_some_and(|x| x == "md") {
                out.push(p);
            }
        }
    }
    let mut out = vec![root().join("README.md")];
    walk(&root().join("docs"), &mut out);
    out.sort();
    out
}

/// The blocks of one page.
#[derive(Debug, Default)]
struct Blocks {
    /// The commands of `console` blocks to run.
    run: Vec<Example>,
    /// `file:line` of each block marked as not run, and why.
    not_run: Vec<String>,
    /// The `tickbox` invocations in blocks not run: `file:line`, the
    /// command, its flags.
    unrun_commands: Vec<(String, String, Vec<String>)>,
    /// `file:line` of each shell block (`sh`, `bash`, `shell`) neither a
    /// `console` block nor marked: an example nobody runs, unexplained.
    unmarked: Vec<String>,
}

/// The examples of one page.
fn examples(shown: &str, text: &str) -> Blocks {
    let lines: Vec<&str> = text.lines().collect();
    let mut blocks = Blocks::default();
    let mut i = 0;
    while i < lines.len() {
        let fence = lines[i].trim_end();
        let shell = matches!(fence, "```sh" | "```bash" | "```shell");
        if !shell && fence != "```console" {
            i += 1;
            continue;
        }
        let before = lines[..i].iter().rev().find(|l| !l.trim().is_empty());
        let marked = before.and_then(|l| l.trim_start().strip_prefix(NOT_RUN));
        let serves = before.is_some_and(|l| l.trim() == SERVES);
        let registry = before.is_some_and(|l| l.trim() == WITH_REGISTRY);
        match marked {
            Some(why) => blocks.not_run.push(format!(
                "{shown}:{} ({})",
                i + 1,
                why.trim_end_matches("-->").trim()
            )),
            None if shell => blocks.unmarked.push(format!("{shown}:{}", i + 1)),
            None => {}
        }
        i += 1;
        if marked.is_some() {
            let mut j = i;
            while j < lines.len() && lines[j].trim_end() != "```" {
                let at = format!("{shown}:{}", j + 1);
                blocks.unrun_commands.extend(
                    invocations(lines[j])
                        .into_iter()
                        .map(|(c, f)| (at.clone(), c, f)),
                );
                j += 1;
            }
        }
        if shell {
            continue;
        }
        let mut block: Vec<Example> = Vec::new();
        while i < lines.len() && lines[i].trim_end() != "```" {
            let line = lines[i];
            if let Some(cmd) = line.strip_prefix("$ ") {
                let mut command = cmd.to_string();
                let at = format!("{shown}:{}", i + 1);
                while command.ends_with('\\') && i + 1 < lines.len() {
                    command.pop();
                    i += 1;
                    command.push_str(lines[i].trim_start());
                }
                block.push(Example {
                    at,
                    command,
                    output: Vec::new(),
                    code: 0,
                    serves,
                    registry,
                });
            } else if let Some(e) = block.last_mut() {
                match line
                    .strip_prefix("[exit ")
                    .and_then(|r| r.strip_suffix(']'))
                {
                    Some(code) => e.code = code.parse().expect("an exit code"),
                    None => e.output.push(line.to_string()),
                }
            }
            i += 1;
        }
        if marked.is_none() {
            blocks.run.extend(block.into_iter().map(trimmed));
        }
        i += 1;
    }
    blocks
}

/// The `tickbox` invocations on one shell line: each command with the
/// `--flags` given before a `--`, a `#` or the end of the command. A word
/// `tickbox` followed by something that is no command word (`&&`, `.lock`)
/// is not an invocation.
fn invocations(line: &str) -> Vec<(String, Vec<String>)> {
    let line = line.trim_start().trim_start_matches("$ ");
    let words: Vec<&str> = line.split_whitespace().collect();
    let mut found = Vec::new();
    for (n, w) in words.iter().enumerate() {
        let Some(command) = words.get(n + 1) else {
            continue;
        };
        if *w != "tickbox" || !command.chars().all(|c| c.is_ascii_lowercase()) {
            continue;
        }
        let flags = words[n + 2..]
            .iter()
            .take_while(|w| !matches!(**w, "--" | "#" | "&&" | "|" | ";"))
            .filter(|w| w.starts_with("--") && w.len() > 2)
            .map(|w| w.split('=').next().unwrap_or(w).to_string())
            .collect();
        found.push((command.to_string(), flags));
    }
    found
}

/// An example without the blank lines that end its shown output.
fn trimmed(mut e: Example) -> Example {
    while e.output.last().is_some_and(|l| l.is_empty()) {
        e.output.pop();
    }
    e
}

/// Whether `got` (lines) is what `shown` shows, `…` eliding.
fn matches(shown: &[String], got: &[&str]) -> bool {
    match shown.split_first() {
        None => got.is_empty(),
        Some((first, rest)) if first == "…" => {
            (0..=got.len()).any(|skip| matches(rest, &got[skip..]))
        }
        Some((first, rest)) => {
            got.split_first()
                .is_some_and(|(g, _)| line_matches(first, g))
                && matches(rest, &got[1..])
        }
    }
}

fn line_matches(shown: &str, got: &str) -> bool {
    let mut parts = shown.split('…');
    let first = parts.next().unwrap_or("");
    let Some(mut rest) = got.strip_prefix(first) else {
        return false;
    };
    let parts: Vec<&str> = parts.collect();
    for (n, part) in parts.iter().enumerate() {
        if n + 1 == parts.len() {
            return rest.ends_with(part);
        }
        match rest.find(part) {
            Some(at) => rest = &rest[at + part.len()..],
            None => return false,
        }
    }
    rest.is_empty()
}

/// A copy of the repository's layout made of links, with the example
/// guests where README's first command builds them.
fn layout(dir: &TempDir, page: &str) -> PathBuf {
    let top = dir.path(&page.replace('/', "_"));
    std::fs::create_dir_all(top.join("examples/target/wasm32-wasip2")).unwrap();
    let link = |from: PathBuf, to: PathBuf| std::os::unix::fs::symlink(from, to).unwrap();
    for e in std::fs::read_dir(root()).unwrap().flatten() {
        let name = e.file_name();
        if name != "examples" && name != "target" {
            link(e.path(), top.join(&name));
        }
    }
    for e in std::fs::read_dir(root().join("examples"))
        .unwrap()
        .flatten()
    {
        if e.file_name() != "target" {
            link(e.path(), top.join("examples").join(e.file_name()));
        }
    }
    let guests = build_wasm("examples", "counter", "wasm32-wasip2");
    link(
        guests.parent().unwrap().to_path_buf(),
        top.join("examples/target/wasm32-wasip2/release"),
    );
    link(PathBuf::from(hostile()), top.join("hostile.wasm"));
    std::fs::create_dir(top.join("data")).unwrap();
    top
}

/// An example's command in `bash -o pipefail`, the `tickbox` under test
/// first on PATH, in `cwd`; under `timeout SECONDS` when `bound` says so.
fn shell(example: &Example, cwd: &Path, bound: Option<&str>) -> Command {
    let bin = PathBuf::from(env!("CARGO_BIN_EXE_tickbox"));
    let path = format!(
        "{}:{}",
        bin.parent().unwrap().display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let bash = ["bash", "-o", "pipefail", "-c", &example.command];
    let mut cmd = match bound {
        Some(seconds) => {
            let mut cmd = Command::new("timeout");
            cmd.arg(seconds).args(bash);
            cmd
        }
        None => {
            let mut cmd = Command::new(bash[0]);
            cmd.args(&bash[1..]);
            cmd
        }
    };
    cmd.current_dir(cwd)
        .env("PATH", path)
        .env(TOUR_SETUP.0, TOUR_SETUP.1)
        .env_remove("TICKBOX_SIGNERS");
    cmd
}

fn run(example: &Example, cwd: &Path) -> (i32, String, String) {
    // `timeout` bounds a command that hangs; its 124 fails the comparison.
    let out = shell(example, cwd, Some("300")).output().expect("run bash");
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// Runs a server's example: it must print the shown lines on stderr, in
/// order among others, then exit with the shown code after SIGTERM. Err
/// says what went wrong, with everything it printed.
fn serve(example: &Example, cwd: &Path) -> Result<(), String> {
    use std::os::unix::process::CommandExt;
    // Bounded here rather than by `timeout`, which would pass the group's
    // SIGTERM on to its child: a second signal, which stops a draining
    // server at once.
    let mut child = shell(example, cwd, None)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        // Its own group, so SIGTERM reaches the server and not this test.
        .process_group(0)
        .spawn()
        .expect("start bash");
    let pid = child.id() as i32;
    let (lines, printed) = mpsc::channel();
    let stderr = child.stderr.take().expect("piped stderr");
    std::thread::spawn(move || {
        for line in std::io::BufReader::new(stderr)
            .lines()
            .map_while(Result::ok)
        {
            if lines.send(line).is_err() {
                break;
            }
        }
    });
    let (exit, exited) = mpsc::channel();
    std::thread::spawn(move || {
        let _ = exit.send(child.wait().ok().and_then(|s| s.code()));
    });
    let mut shown = vec!["…".to_string()];
    shown.extend(example.output.iter().cloned());
    shown.push("…".to_string());
    let mut got: Vec<String> = Vec::new();
    let ready_by = Instant::now() + SERVER_READY;
    let ready = loop {
        let so_far: Vec<&str> = got.iter().map(String::as_str).collect();
        if matches(&shown, &so_far) {
            break true;
        }
        // Err: the deadline passed, or stderr closed (the server ended).
        match printed.recv_timeout(ready_by.saturating_duration_since(Instant::now())) {
            Ok(line) => got.push(line),
            Err(_) => break false,
        }
    };
    // SAFETY: kill(2) on the group this test made; no memory is involved.
    unsafe { libc::kill(-pid, libc::SIGTERM) };
    let code = exited.recv_timeout(SERVER_STOP).ok().flatten();
    if code.is_none() {
        // SAFETY: as above.
        unsafe { libc::kill(-pid, libc::SIGKILL) };
    }
    let stop_by = Instant::now() + SERVER_STOP;
    while let Ok(line) = printed.recv_timeout(stop_by.saturating_duration_since(Instant::now())) {
        got.push(line);
    }
    let stderr = got.join("\n");
    match (ready, code) {
        (false, _) => Err(format!(
            "did not print the shown lines within {SERVER_READY:?}; stderr:\n{stderr}"
        )),
        (true, Some(c)) if c == example.code => Ok(()),
        (true, c) => Err(format!(
            "exited with {c:?} after SIGTERM, not {}; stderr:\n{stderr}",
            example.code
        )),
    }
}

#[test]
fn the_examples_in_readme_and_the_manual_print_what_they_show() {
    // Positive controls for the reading and the comparison.
    let sample = "```console\n$ echo a \\\n  b\na b\n$ false\n[exit 1]\n```\n<!-- not run: a server -->\n```console\n$ serve\n```\n```sh\nls\n```\n";
    let blocks = examples("sample", sample);
    let found = &blocks.run;
    assert_eq!(found.len(), 2, "{found:?}");
    assert_eq!((found[0].command.as_str(), found[0].code), ("echo a b", 0));
    assert_eq!(found[1].code, 1);
    assert_eq!(blocks.not_run, ["sample:9 (a server)"]);
    assert_eq!(blocks.unmarked, ["sample:12"]);
    assert_eq!(
        invocations("tickbox call --dir ./d::/d x.wasm t --yes -- cmd --not-ours # --nor-this"),
        [(
            "call".to_string(),
            vec!["--dir".to_string(), "--yes".to_string()]
        )]
    );
    assert!(invocations("cargo build --bin tickbox && export X").is_empty());
    let shown = |v: &[&str]| v.iter().map(|s| s.to_string()).collect::<Vec<_>>();
    assert!(matches(&shown(&["a", "…", "z"]), &["a", "b", "c", "z"]));
    assert!(matches(&shown(&["took … ms"]), &["took 12.5 ms"]));
    assert!(!matches(&shown(&["a", "z"]), &["a", "b", "z"]));
    assert!(!matches(&shown(&["took … ms"]), &["took 12.5 s"]));

    // Positive controls for servers: one that shows its line and exits 0 on
    // SIGTERM passes; one that never shows it, and one that shows it but
    // exits otherwise, fail.
    let here = Path::new(".");
    let server = |command: &str| Example {
        at: "sample".into(),
        command: command.into(),
        output: vec!["ready on …".into()],
        code: 0,
        serves: true,
        registry: false,
    };
    let marked = examples("sample", &format!("{SERVES}\n```console\n$ x\n```\n"));
    assert!(
        marked.run[0].serves && !marked.run[0].registry,
        "{marked:?}"
    );
    let marked = examples(
        "sample",
        &format!("{WITH_REGISTRY}\n```console\n$ x\n```\n"),
    );
    assert!(
        marked.run[0].registry && !marked.run[0].serves,
        "{marked:?}"
    );
    serve(
        &server("trap 'exit 0' TERM; echo starting >&2; echo ready on 1 >&2; sleep 600 & wait"),
        here,
    )
    .expect("a server that shows its line");
    assert!(serve(&server("echo starting >&2; echo readyish >&2"), here).is_err());
    assert!(serve(
        &server("trap 'exit 3' TERM; echo ready on 1 >&2; sleep 600 & wait"),
        here
    )
    .is_err());

    // README's tour sets the variable the way the test does.
    let readme = std::fs::read_to_string(root().join("README.md")).unwrap();
    let setup = format!("{}={}", TOUR_SETUP.0, TOUR_SETUP.1);
    assert!(readme.lines().any(|l| l == setup), "README lost `{setup}`");

    // Each page runs in a layout of its own: one page's files (an audit
    // file, a directory it made) are not another's.
    let dir = TempDir::new("doc-examples");
    let mut all = Vec::new();
    let mut not_run = Vec::new();
    let mut unmarked = Vec::new();
    let mut unrun_commands = Vec::new();
    for page in pages() {
        let shown = page.strip_prefix(root()).unwrap().display().to_string();
        let text = std::fs::read_to_string(&page).unwrap();
        let blocks = examples(&shown, &text);
        let cwd = layout(&dir, &shown);
        all.extend(blocks.run.into_iter().map(|e| (e, cwd.clone())));
        not_run.extend(blocks.not_run);
        unmarked.extend(blocks.unmarked);
        unrun_commands.extend(blocks.unrun_commands);
    }
    assert!(
        unmarked.is_empty(),
        "shell examples neither run (a `console` block) nor marked `{NOT_RUN} WHY -->`: {unmarked:?}"
    );
    assert!(all.len() >= 5, "README's tour has examples: {all:?}");
    let mut failed = Vec::new();
    // The lines not run still name commands and flags that exist.
    let mut helps = std::collections::HashMap::new();
    for (at, command, flags) in &unrun_commands {
        let help = helps.entry(command.clone()).or_insert_with(|| {
            let out = Command::new(env!("CARGO_BIN_EXE_tickbox"))
                .args([command.as_str(), "--help"])
                .output()
                .expect("run tickbox --help");
            out.status
                .success()
                .then(|| String::from_utf8_lossy(&out.stdout).into_owned())
        });
        match help {
            None => failed.push(format!("{at}: `tickbox {command}` is no command")),
            Some(help) => {
                for flag in flags {
                    if !help.contains(flag.as_str()) {
                        failed.push(format!("{at}: `tickbox {command}` has no flag {flag}"));
                    }
                }
            }
        }
    }
    assert!(
        unrun_commands.len() >= 5,
        "the blocks not run were read: {unrun_commands:?}"
    );
    // Started for the first block that needs it, stopped at the end.
    let mut registry: Option<Registry> = None;
    for (e, cwd) in &mut all {
        if e.registry {
            let port = registry.get_or_insert_with(|| Registry::start(None)).port;
            let real = format!("127.0.0.1:{port}");
            e.command = e.command.replace(SHOWN_REGISTRY, &real);
            for line in &mut e.output {
                *line = line.replace(SHOWN_REGISTRY, &real);
            }
        }
        // A build in a test would write where other tests read (and take
        // minutes): what README's first command builds, the test build
        // has built. Builds are shown in `sh` blocks.
        if e.command.starts_with("cargo ") {
            failed.push(format!(
                "{}: `{}` builds; show builds in an `sh` block",
                e.at, e.command
            ));
            continue;
        }
        if e.serves {
            if let Err(why) = serve(e, cwd) {
                failed.push(format!("{}: `{}` {why}", e.at, e.command));
            }
            continue;
        }
        let (code, stdout, stderr) = run(e, cwd);
        let got: Vec<&str> = stdout.trim_end_matches('\n').lines().collect();
        if code != e.code || !matches(&e.output, &got) {
            failed.push(format!(
                "{}: `{}`\n  expected exit {} and:\n{}\n  got exit {code} and:\n{stdout}\n  stderr:\n{stderr}",
                e.at,
                e.command,
                e.code,
                e.output.join("\n")
            ));
        }
    }
    eprintln!(
        "{} examples run; {} blocks shown but not run:\n{}",
        all.len(),
        not_run.len(),
        not_run.join("\n")
    );
    assert!(failed.is_empty(), "{}", failed.join("\n\n"));
}
