//! The `console` examples of README.md and the manual (`docs/`) run, and
//! what they show on stdout is what they print.
//!
//! A ```` ```console ```` block is a session of commands, each with the
//! output it shows ([`tickbox_test_support::doc_pages`] reads pages and
//! compares outputs). Each command runs in `bash -o pipefail`
//! with the `tickbox` under test first on PATH, after the page's setup
//! (a `sh` block marked as run by this module's test, aliases expanded;
//! README's tour sets `C` and `tickbox` there), in a copy of the
//! repository's layout (links to its files) where
//! `examples/target/wasm32-wasip2/release` is where the test build put
//! the example guests and `target/debug/tickbox` is the `tickbox` under
//! test, so the paths README's first command makes work as written (and
//! `hostile.wasm`, the test suite's hostile guest, with an empty `data/`
//! for it to be refused from). A `cd` carries over to the page's next
//! commands.
//!
//! A block preceded by `<!-- serves until stopped -->` shows servers: each
//! command starts, must print the shown lines on stderr (in that order,
//! among others) within [`SERVER_READY`], is then sent SIGTERM and must
//! exit with the shown code within [`SERVER_STOP`]. A block preceded by
//! `<!-- with a registry at 127.0.0.1:5000 -->` runs against a real
//! registry the test starts (its address put where the block says
//! `127.0.0.1:5000`, in commands and output). A block preceded by
//! `<!-- run by MODULE::TEST -->` is run by that test instead, which
//! reads it from the page (a page the repository's layout cannot hold,
//! such as a project made outside the checkout): the test must be in this
//! suite and its own source must name the page, so the marker cannot
//! name a test that does not read it. [`run_as_written`] runs such a
//! page's `console` blocks as this module runs the others, in order in
//! one directory, writing on the way each file the page has the reader
//! write (a code block after a line "Replace `PATH` with:"); a block
//! marked `<!-- run by MODULE::TEST, on a terminal -->` runs with a
//! terminal as its output, for commands that print otherwise there.
//!
//! A block preceded by `<!-- not run: WHY -->` is not run, and is allowed
//! only where [`NOT_RUN_ALLOWED`] lists its page and reason: what no test
//! can run (an install, the test suite itself, a tool the suite does not
//! install). The test lists them, and fails on a shell block (`sh`,
//! `bash`, `shell`) that is neither run nor marked. Every `tickbox COMMAND
//! --flag …` line of a block not run must still name a command and flags
//! that `tickbox COMMAND --help` lists, so a renamed flag cannot hide
//! there.

use crate::util::registry::Registry;
use crate::util::{build_wasm, hostile, root, TempDir};
use std::{io::BufRead, path::Path, path::PathBuf, process::Command, process::Stdio};
use std::{sync::mpsc, time::Duration, time::Instant};
use tickbox_test_support::doc_pages::{
    differs, examples, invocations, matches, pages, quoted, session, steps, Example, Ran, Step,
    NOT_RUN, ON_A_TERMINAL, RUN_BY, SERVES, SHOWN_REGISTRY, WITH_REGISTRY,
};

/// This module's test: a shell block marked as run by it is its page's
/// setup (see the module doc).
const SETUP_BY: &str = "doc_examples::the_examples_in_readme_and_the_manual_print_what_they_show";

/// How long a server may take to print what its block shows: a bound for
/// a hang on a loaded machine, not a measure of start-up.
const SERVER_READY: Duration = Duration::from_secs(120);
/// How long a server may take to exit after SIGTERM (its drain included).
const SERVER_STOP: Duration = Duration::from_secs(60);

/// The blocks no test runs, by page, each with the reason its marker
/// gives: an install (a release build of wasmtime, too slow for a test),
/// the test suite itself, and what needs a tool the suite does not install.
/// A new block marked as not run fails the test until it is listed here.
const NOT_RUN_ALLOWED: &[(&str, &str)] = &[
    ("README.md", "README's two commands: .ci/run runs both as written, and test-support's suite checks they are these"),
    ("README.md", "an install"),
    ("docs/development.md", "the test suite itself"),
    ("docs/development.md", "the test suite itself"),
    ("docs/development.md", "an install"),
    ("docs/guide/service.md", "needs podman and a container image build"),
    ("docs/guide/testing.md", "builds the examples; the test build builds them the same way, and the blocks below run against it"),
];

/// Whether `test` (`MODULE::NAME`) is a test of this suite whose own
/// source (its function, in `cli/tests/it/MODULE.rs`) names `page`.
fn runs_page(test: &str, page: &str) -> Result<(), String> {
    static LISTED: std::sync::OnceLock<String> = std::sync::OnceLock::new();
    let listed = LISTED.get_or_init(|| {
        let out = Command::new(std::env::current_exe().expect("this test binary"))
            .args(["--list", "--format", "terse"])
            .output()
            .expect("list this suite's tests");
        String::from_utf8_lossy(&out.stdout).into_owned()
    });
    if !listed.lines().any(|l| l == format!("{test}: test")) {
        return Err(format!("`{test}` is no test of cli/tests/it"));
    }
    let (module, name) = test.rsplit_once("::").expect("MODULE::TEST");
    let file = root().join(format!("cli/tests/it/{}.rs", module.replace("::", "/")));
    let source = std::fs::read_to_string(&file).map_err(|e| format!("{}: {e}", file.display()))?;
    let body = source
        .split_once(&format!("fn {name}("))
        .and_then(|(_, rest)| rest.split("\n}\n").next())
        .unwrap_or("");
    if body.contains(&format!("\"{page}\"")) {
        Ok(())
    } else {
        Err(format!(
            "`{test}` does not name \"{page}\" in its source, so it does not read it"
        ))
    }
}

/// Runs what `page` (a path from the repository's root) has the reader do
/// for `test` ([`steps`]), in order, starting in `dir`, each command as
/// this module runs one and bounded by `bound` seconds; `prepare` may add
/// to each command's environment, given the directory it runs in. The
/// number of steps, or what differed from what the page shows.
pub(crate) fn run_as_written(
    page: &str,
    test: &str,
    dir: &Path,
    bound: u32,
    mut prepare: impl FnMut(&Path, &mut Command),
) -> Result<usize, String> {
    let text = std::fs::read_to_string(root().join(page)).map_err(|e| format!("{page}: {e}"))?;
    let steps = steps(page, &text, test);
    if !steps.iter().any(|s| matches!(s, Step::Run(_))) {
        return Err(format!("{page} has no block marked `{RUN_BY}{test} -->`"));
    }
    let mut cwd = dir.to_path_buf();
    for step in &steps {
        match step {
            Step::Write { at, path, text } => std::fs::write(cwd.join(path), text)
                .map_err(|e| format!("{at}: cannot write {path} in {}: {e}", cwd.display()))?,
            Step::Run(e) => {
                let ran = run(e, "", &cwd, bound, &mut prepare);
                if let Some(failed) = differs(e, &ran) {
                    return Err(failed);
                }
                cwd = ran.cwd;
            }
        }
    }
    Ok(steps.len())
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
    // The debug build README's tour names, which is the one under test.
    std::fs::create_dir_all(top.join("target/debug")).unwrap();
    link(
        PathBuf::from(env!("CARGO_BIN_EXE_tickbox")),
        top.join("target/debug/tickbox"),
    );
    std::fs::create_dir(top.join("data")).unwrap();
    top
}

/// `script` in `bash -o pipefail`, the `tickbox` under test first on
/// PATH, in `cwd`; under `timeout SECONDS` when `bound` says so.
fn shell(script: &str, cwd: &Path, bound: Option<u32>) -> Command {
    let bin = PathBuf::from(env!("CARGO_BIN_EXE_tickbox"));
    let path = format!(
        "{}:{}",
        bin.parent().unwrap().display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let bash = ["bash", "-o", "pipefail", "-c", script];
    let mut cmd = match bound {
        Some(seconds) => {
            let mut cmd = Command::new("timeout");
            cmd.arg(seconds.to_string()).args(bash);
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
        .env_remove("TICKBOX_SIGNERS");
    cmd
}

/// The variable naming the file where a command's shell writes the
/// directory it ended in, so a `cd` carries over to the next command.
const ENDED_IN: &str = "TICKBOX_DOC_ENDED_IN";

/// Runs an example's command in `cwd` after its page's `setup` (aliases
/// expanded), bounded by `bound` seconds (a hang; `timeout`'s 124 then
/// fails the comparison), `prepare` adding to its environment.
fn run(
    example: &Example,
    setup: &str,
    cwd: &Path,
    bound: u32,
    prepare: &mut dyn FnMut(&Path, &mut Command),
) -> Ran {
    let script = format!(
        "shopt -s expand_aliases\n{setup}{}\nstatus=$?; pwd >\"${ENDED_IN}\"; exit $status",
        example.command
    );
    // On a terminal: `script` (util-linux) runs it on a pseudo-terminal
    // of its own and copies what it prints.
    let script = match example.terminal {
        true => {
            let inner = format!("bash -o pipefail -c {}", quoted(&script));
            format!("script -qec {} /dev/null", quoted(&inner))
        }
        false => script,
    };
    let scratch = TempDir::new("doc-cwd");
    let ended_in = scratch.path("ended-in");
    let mut cmd = shell(&script, cwd, Some(bound));
    cmd.env(ENDED_IN, &ended_in);
    prepare(cwd, &mut cmd);
    let out = cmd.output().expect("run bash");
    let ended = std::fs::read_to_string(&ended_in)
        .map(|d| PathBuf::from(d.trim_end_matches('\n')))
        .unwrap_or_else(|_| cwd.to_path_buf());
    Ran {
        code: out.status.code().unwrap_or(-1),
        // A terminal ends its lines with CR LF.
        stdout: String::from_utf8_lossy(&out.stdout).replace("\r\n", "\n"),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
        cwd: ended,
    }
}

/// Runs a server's example: it must print the shown lines on stderr, in
/// order among others, then exit with the shown code after SIGTERM. Err
/// says what went wrong, with everything it printed.
fn serve(example: &Example, cwd: &Path) -> Result<(), String> {
    use std::os::unix::process::CommandExt;
    // Bounded here rather than by `timeout`, which would pass the group's
    // SIGTERM on to its child: a second signal, which stops a draining
    // server at once.
    let mut child = shell(&example.command, cwd, None)
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
    let blocks = examples("sample", sample, SETUP_BY);
    let found = &blocks.run;
    assert_eq!(found.len(), 2, "{found:?}");
    assert_eq!((found[0].command.as_str(), found[0].code), ("echo a b", 0));
    assert_eq!(found[1].code, 1);
    assert_eq!(
        blocks.not_run,
        [("sample:9".to_string(), "a server".to_string())]
    );
    assert_eq!(blocks.unmarked, ["sample:12"]);
    // A block run by a test is left to it, with the files the page has
    // the reader write, in order; a `cd` carries over.
    let page = format!(
        "{RUN_BY}t::a -->\n```console\n$ cd sub\n```\nThen, Replace `f` with:\n\n```text\nhi\n```\n\
         {RUN_BY}t::a -->\n```console\n$ cat f\nhi\n```\n{RUN_BY}t::b -->\n```sh\nx\n```\n"
    );
    let blocks = examples("sample", &page, SETUP_BY);
    assert!(
        blocks.run.is_empty() && blocks.unmarked.is_empty(),
        "{blocks:?}"
    );
    assert_eq!(blocks.run_by.len(), 3, "{blocks:?}");
    let order: Vec<String> = steps("sample", &page, "t::a")
        .into_iter()
        .map(|s| match s {
            Step::Run(e) => e.command,
            Step::Write { path, text, .. } => format!("{path}={text}"),
        })
        .collect();
    assert_eq!(order, ["cd sub", "f=hi\n", "cat f"]);
    let dir = TempDir::new("doc-cd");
    std::fs::create_dir(dir.path("sub")).unwrap();
    let Step::Run(cd) = steps("sample", &page, "t::a").remove(0) else {
        panic!("the first step is the `cd`")
    };
    let ran = run(&cd, "", &dir.0, 60, &mut |_, _| {});
    assert_eq!(ran.cwd, dir.path("sub"));
    // A block run on a terminal has one for stdout; the others do not.
    let page = format!(
        "{RUN_BY}t::a{ON_A_TERMINAL} -->\n```console\n$ [ -t 1 ] && echo 'a tty'\n```\n\
         {RUN_BY}t::a -->\n```console\n$ [ -t 1 ] || echo 'a pipe'\n```\n"
    );
    for step in steps("sample", &page, "t::a") {
        let Step::Run(e) = step else {
            panic!("commands")
        };
        let ran = run(&e, "", &dir.0, 60, &mut |_, _| {});
        let shown = if e.terminal { "a tty\n" } else { "a pipe\n" };
        assert_eq!(
            (ran.code, ran.stdout.as_str()),
            (0, shown),
            "{}",
            ran.stderr
        );
    }
    // A shell block this test runs is its page's setup, run before each
    // command.
    let page = format!("{RUN_BY}{SETUP_BY} -->\n```sh\nalias say=echo\nC=hi\n```\n");
    let blocks = examples("sample", &page, SETUP_BY);
    assert_eq!(blocks.setup, "alias say=echo\nC=hi\n");
    let say = session("sample", &["$ say $C"], 0, 1, false, false).remove(0);
    let ran = run(&say, &blocks.setup, &dir.0, 60, &mut |_, _| {});
    assert_eq!(ran.stdout, "hi\n");
    // A marker names a test of this suite that names the page in its own
    // source, and nothing else.
    runs_page(
        "langs::the_first_tick_guide_runs_as_written",
        "docs/guide/first-tick.md",
    )
    .expect("the guide's test");
    assert!(runs_page("langs::the_first_tick_guide_runs_as_written", "README.md").is_err());
    assert!(runs_page("langs::no_such_test", "docs/guide/first-tick.md").is_err());
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
        terminal: false,
    };
    let marked = examples(
        "sample",
        &format!("{SERVES}\n```console\n$ x\n```\n"),
        SETUP_BY,
    );
    assert!(
        marked.run[0].serves && !marked.run[0].registry,
        "{marked:?}"
    );
    let marked = examples(
        "sample",
        &format!("{WITH_REGISTRY}\n```console\n$ x\n```\n"),
        SETUP_BY,
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

    // Each page runs in a layout of its own: one page's files (an audit
    // file, a directory it made) are not another's; a `cd` carries over
    // to the page's next commands.
    let dir = TempDir::new("doc-examples");
    let mut all = Vec::new();
    let mut cwds = Vec::new();
    let mut setups = std::collections::HashMap::new();
    let mut not_run = Vec::new();
    let mut run_by = Vec::new();
    let mut unmarked = Vec::new();
    let mut unrun_commands = Vec::new();
    for page in pages() {
        let shown = page.strip_prefix(root()).unwrap().display().to_string();
        let text = std::fs::read_to_string(&page).unwrap();
        let blocks = examples(&shown, &text, SETUP_BY);
        cwds.push(layout(&dir, &shown));
        setups.insert(cwds.len() - 1, blocks.setup);
        all.extend(blocks.run.into_iter().map(|e| (e, cwds.len() - 1)));
        not_run.extend(blocks.not_run);
        run_by.extend(blocks.run_by);
        unmarked.extend(blocks.unmarked);
        unrun_commands.extend(blocks.unrun_commands);
    }
    assert!(
        unmarked.is_empty(),
        "shell examples neither run (a `console` block) nor marked `{NOT_RUN} WHY -->`: {unmarked:?}"
    );
    assert!(all.len() >= 5, "README's tour has examples: {all:?}");
    // README's tour names its counter in its setup.
    let readme = pages().iter().position(|p| p.ends_with("README.md"));
    assert!(
        setups[&readme.expect("README.md")].contains("\nC="),
        "README's tour has a setup that sets C"
    );
    let mut failed = Vec::new();
    // Each block run by a test names one that reads its page; this test
    // reads every page, and runs its setup.
    for (at, test) in run_by.iter().filter(|(_, test)| test != SETUP_BY) {
        let page = at.rsplit_once(':').map_or(at.as_str(), |(p, _)| p);
        if let Err(why) = runs_page(test, page) {
            failed.push(format!("{at}: {why}"));
        }
    }
    // What is not run is what the allow-list says, no more and no less.
    let mut unrun: Vec<(&str, &str)> = not_run
        .iter()
        .map(|(at, why)| {
            (
                at.rsplit_once(':').map_or(at.as_str(), |(p, _)| p),
                why.as_str(),
            )
        })
        .collect();
    unrun.sort();
    let mut allowed = NOT_RUN_ALLOWED.to_vec();
    allowed.sort();
    if unrun != allowed {
        failed.push(format!(
            "the blocks marked `{NOT_RUN} WHY -->` are not those NOT_RUN_ALLOWED lists \
             (a block a test can run is run, or marked `{RUN_BY}MODULE::TEST -->`):\n  \
             marked: {unrun:?}\n  allowed: {allowed:?}"
        ));
    }
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
    // Started for the first block that needs it, stopped at the end.
    let mut registry: Option<Registry> = None;
    for (e, page) in &mut all {
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
                "{}: `{}` builds; show builds in an `sh` block, or one a test runs",
                e.at, e.command
            ));
            continue;
        }
        if e.serves {
            if let Err(why) = serve(e, &cwds[*page]) {
                failed.push(format!("{}: `{}` {why}", e.at, e.command));
            }
            continue;
        }
        let ran = run(e, &setups[page], &cwds[*page], 300, &mut |_, _| {});
        failed.extend(differs(e, &ran));
        cwds[*page] = ran.cwd;
    }
    eprintln!(
        "{} examples run here; {} blocks run by other tests; {} blocks shown but not run:\n{}",
        all.len(),
        run_by.len(),
        not_run.len(),
        not_run
            .iter()
            .map(|(at, why)| format!("{at} ({why})"))
            .collect::<Vec<_>>()
            .join("\n")
    );
    assert!(failed.is_empty(), "{}", failed.join("\n\n"));
}
