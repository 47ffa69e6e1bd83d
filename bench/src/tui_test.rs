//! `tickbox test` against Microsoft's tui-test (npm `@microsoft/tui-test`,
//! pinned by `bench/tui-test/package-lock.json`, installed there by
//! `tests/setup.sh`), the same scenario for both, in the same run.
//!
//! The scenario drives the native counter (`tests/ticks/counter.py`): two
//! `+` keys, its state and screen, a tool call, the screen again. It is
//! written once per tool, `bench/tui-test/counter.scenario.toml` and
//! `bench/tui-test/counter.test.ts`; BENCHMARKS.md says where a terminal
//! tester has to do something else (no state, no tools: the screen and more
//! keys). The bench copies them into a scratch directory (the counter's
//! path made absolute) and times whole runs of each tool, wall clock from
//! spawn to exit:
//!
//! - **one scenario**: a suite of one, the two tools interleaved run by run;
//! - **per scenario in a suite**: N copies run one at a time (`-j 1`;
//!   tui-test's `workers: 1`), the run's time over N;
//! - **two at once**: the same suite with `-j 2` (`workers: 2`), against
//!   the same tool's one-at-a-time run.
//!
//! A run that fails (a scenario that does not pass, a tool that exits
//! non-zero) is an error, never a figure; a run that takes longer than
//! [`RUN_LIMIT`] is killed. The targets are reported, never asserted.

use super::{root, Anchored, Stat};
use anyhow::{bail, Context, Result};
use std::io::Read;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// The goal of issue 29: a scenario under `tickbox test` takes at most this
/// fraction of the same scenario's wall time under tui-test.
const GOAL: f64 = 0.25;
/// Longest one run of either tool may take: a loaded machine is slow, a
/// hung run is a bug to report, not a figure to wait for.
const RUN_LIMIT: Duration = Duration::from_secs(600);
/// The counter's path as both suite files give it (relative to
/// `bench/tui-test/`), made absolute in the copies.
const COUNTER_REL: &str = "../../tests/ticks/counter.py";
/// How each suite file runs the counter's interpreter (the TOML's command,
/// the shell command the test types).
const PYTHON_COMMANDS: [&str; 2] = ["[\"python3\", ", "| python3 "];
/// The suite files, as committed.
const SCENARIO: &str = include_str!("../tui-test/counter.scenario.toml");
const TEST_TS: &str = include_str!("../tui-test/counter.test.ts");
/// Most output of a failed run kept for its error message.
const TAIL: usize = 2000;
/// tui-test's settings for every run: its own waits (an expectation 5 s,
/// a test 30 s by default) raised for a loaded machine (each wait ends as
/// soon as its condition holds, so the figures do not change).
const TUI_CONFIG: &str = "export default {\n  workers: WORKERS,\n  timeout: 300000,\n  expect: { timeout: 60000 },\n  shellReadyTimeout: 60000,\n};\n";

/// How much to measure.
pub(crate) struct Sizes {
    /// Interleaved pairs of one-scenario runs.
    pub one: usize,
    /// Copies of the scenario in the suite.
    pub suite: usize,
    /// Runs of each suite variant.
    pub suite_runs: usize,
    /// Whether tui-test runs the suite too (else only `tickbox test`'s
    /// `-j 2` against `-j 1` is measured).
    pub anchor_suites: bool,
}

/// The scratch directory; removed when dropped.
struct Scratch(PathBuf);

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// The installed tui-test package, or why it is not there.
fn tui_test_package() -> Result<PathBuf> {
    let pkg = root().join("bench/tui-test/node_modules/@microsoft/tui-test");
    if !pkg.join("index.js").is_file() {
        bail!("tui-test is not installed in bench/tui-test (tests/setup.sh runs `npm ci` there)");
    }
    let node = Command::new("node").arg("--version").output();
    if !node.is_ok_and(|o| o.status.success()) {
        bail!("node is not on PATH (tests/setup.sh installs npm, which brings it)");
    }
    Ok(pkg)
}

/// The interpreter that `python3` on PATH runs. A version manager's shim
/// (pyenv's is a shell script that starts another process or two) would
/// add its own start, the same for both tools, to every figure; the suite
/// copies name the interpreter itself.
fn python() -> Result<String> {
    let out = Command::new("python3")
        .args(["-c", "import sys; print(sys.executable)"])
        .output()
        .context("python3 (it runs the counter)")?;
    let path = String::from_utf8_lossy(&out.stdout).trim().to_string();
    if !out.status.success() || path.is_empty() {
        bail!("python3 does not say where its interpreter is");
    }
    Ok(path)
}

/// Writes `copies` copies of a suite file into `dir`, the counter's path
/// made absolute and `python3` the interpreter itself (`python`).
fn write_suite(dir: &Path, text: &str, ext: &str, copies: usize, python: &str) -> Result<()> {
    std::fs::create_dir_all(dir)?;
    let counter = root().join("tests/ticks/counter.py").display().to_string();
    // Both go into a TOML string, a JavaScript string and a shell word
    // unquoted: paths that need quoting in any of them are refused.
    for p in [&counter, python] {
        if p.contains(|c: char| c.is_whitespace() || "'\"\\$`".contains(c)) {
            bail!("{p:?}: the bench writes this path into its suite unquoted");
        }
    }
    let mut text = text.replace(COUNTER_REL, &counter);
    for command in PYTHON_COMMANDS {
        text = text.replace(command, &command.replace("python3", python));
    }
    if text.matches(python).count() != 1 {
        bail!("the suite file no longer runs the counter as {PYTHON_COMMANDS:?} says");
    }
    for i in 0..copies {
        std::fs::write(dir.join(format!("counter-{i}.{ext}")), &text)?;
    }
    Ok(())
}

/// Runs `cmd` to its end and returns its wall time in ms; an exit status
/// other than 0, or a run past [`RUN_LIMIT`], is an error naming `what`
/// with the end of what it printed.
fn timed(mut cmd: Command, what: &str) -> Result<f64> {
    // Its own process group, so a run past the limit is ended with every
    // process it started (tui-test's workers).
    cmd.stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .process_group(0);
    let start = Instant::now();
    let mut child = cmd.spawn().with_context(|| format!("starting {what}"))?;
    let pid = child.id() as i32;
    let mut pipes = [
        child
            .stdout
            .take()
            .map(|p| Box::new(p) as Box<dyn Read + Send>),
        child
            .stderr
            .take()
            .map(|p| Box::new(p) as Box<dyn Read + Send>),
    ];
    // Both pipes are drained while it runs: a full pipe would stall it.
    let readers: Vec<_> = pipes
        .iter_mut()
        .filter_map(Option::take)
        .map(|mut p| {
            std::thread::spawn(move || {
                let mut s = Vec::new();
                let _ = p.read_to_end(&mut s);
                s
            })
        })
        .collect();
    // wait() in a thread, so the time is taken the moment it ends (no
    // polling interval in the figure) and the limit is still kept.
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(child.wait());
    });
    let status = match rx.recv_timeout(RUN_LIMIT) {
        Ok(status) => status?,
        Err(_) => {
            // SAFETY: kill(2) on the process group this run leads.
            unsafe { libc::kill(-pid, libc::SIGKILL) };
            bail!("{what} did not finish within {RUN_LIMIT:?}");
        }
    };
    let ms = start.elapsed().as_secs_f64() * 1000.0;
    if !status.success() {
        let out: Vec<u8> = readers
            .into_iter()
            .flat_map(|r| r.join().unwrap_or_default())
            .collect();
        let text = String::from_utf8_lossy(&out);
        let tail: String = text
            .chars()
            .rev()
            .take(TAIL)
            .collect::<Vec<_>>()
            .into_iter()
            .rev()
            .collect();
        bail!("{what} failed ({status}):\n{tail}");
    }
    Ok(ms)
}

/// One whole `tickbox test DIR -j JOBS` run; ms.
fn tickbox_run(tickbox: &Path, dir: &Path, jobs: usize) -> Result<f64> {
    let mut cmd = Command::new(tickbox);
    cmd.arg("test")
        .arg(dir)
        .args(["-j", &jobs.to_string(), "--format", "json"])
        // The counter is native: with CI set, tickbox test runs only
        // sandboxed Ticks unless told otherwise (it is ours).
        .arg("--allow-native");
    timed(cmd, &format!("tickbox test -j {jobs}"))
}

/// One whole tui-test run in `dir` with `workers`; ms.
fn tui_run(pkg: &Path, dir: &Path, workers: usize) -> Result<f64> {
    std::fs::write(
        dir.join("tui-test.config.js"),
        TUI_CONFIG.replace("WORKERS", &workers.to_string()),
    )?;
    let mut cmd = Command::new("node");
    cmd.arg(pkg.join("index.js")).current_dir(dir);
    timed(cmd, &format!("tui-test with {workers} worker(s)"))
}

/// The rows: `tickbox test` beside tui-test, and each at two scenarios at
/// once beside itself one at a time.
pub(crate) fn rows(tickbox: &Path, sizes: &Sizes) -> Result<Vec<Anchored>> {
    let pkg = tui_test_package()?;
    let scratch = Scratch(
        std::env::temp_dir().join(format!("tickbox-bench-tui-test-{}", std::process::id())),
    );
    let _ = std::fs::remove_dir_all(&scratch.0);
    // The test files import `@microsoft/tui-test`: node finds it in a
    // node_modules above them. Not a link named node_modules in the run's
    // own directory: tui-test copies that directory's entries into its
    // cache and would try to copy a link to a directory as a file.
    let modules = scratch.0.join("node_modules/@microsoft");
    std::fs::create_dir_all(&modules)?;
    std::os::unix::fs::symlink(&pkg, modules.join("tui-test"))?;
    // A module package: tui-test compiles the test files to ES modules, and
    // without it node parses each twice (it warns so).
    std::fs::write(scratch.0.join("package.json"), "{\"type\": \"module\"}\n")?;
    let one_tb = scratch.0.join("one-tickbox");
    let one_tui = scratch.0.join("one-tui-test");
    let suite_tb = scratch.0.join("suite-tickbox");
    let suite_tui = scratch.0.join("suite-tui-test");
    let py = python()?;
    write_suite(&one_tb, SCENARIO, "scenario.toml", 1, &py)?;
    write_suite(&one_tui, TEST_TS, "test.ts", 1, &py)?;
    write_suite(&suite_tb, SCENARIO, "scenario.toml", sizes.suite, &py)?;
    if sizes.anchor_suites {
        write_suite(&suite_tui, TEST_TS, "test.ts", sizes.suite, &py)?;
    }

    // One unmeasured run each: node's and Python's caches, the page cache.
    tickbox_run(tickbox, &one_tb, 1)?;
    tui_run(&pkg, &one_tui, 1)?;
    let (mut tb, mut tui) = (Vec::new(), Vec::new());
    for _ in 0..sizes.one {
        tb.push(tickbox_run(tickbox, &one_tb, 1)?);
        tui.push(tui_run(&pkg, &one_tui, 1)?);
    }
    let (mut j1, mut j2, mut w1, mut w2) = (Vec::new(), Vec::new(), Vec::new(), Vec::new());
    for _ in 0..sizes.suite_runs {
        j1.push(tickbox_run(tickbox, &suite_tb, 1)?);
        j2.push(tickbox_run(tickbox, &suite_tb, 2)?);
        if sizes.anchor_suites {
            w1.push(tui_run(&pkg, &suite_tui, 1)?);
            w2.push(tui_run(&pkg, &suite_tui, 2)?);
        }
    }

    let n = sizes.suite;
    let per = |v: &[f64]| v.iter().map(|ms| ms / n as f64).collect::<Vec<_>>();
    let secs = |v: &[f64]| v.iter().map(|ms| ms / 1000.0).collect::<Vec<_>>();
    let goal = |value: &Stat, anchor: &Stat| {
        let r = value.median() / anchor.median();
        Some((format!("≤ {GOAL}× (got {r:.2}×)"), r <= GOAL))
    };
    let one = Stat::new("ms", tb);
    let one_anchor = Stat::new("ms", tui);
    let mut rows = vec![Anchored {
        name: format!(
            "tickbox test, one native-counter scenario, whole run ({} interleaved runs)",
            sizes.one
        ),
        target: goal(&one, &one_anchor),
        value: one,
        anchor: Some(("tui-test, the same scenario", one_anchor)),
    }];
    if sizes.anchor_suites {
        let value = Stat::new("ms", per(&j1));
        let anchor = Stat::new("ms", per(&w1));
        rows.push(Anchored {
            name: format!("tickbox test -j 1, per scenario in a suite of {n}"),
            target: goal(&value, &anchor),
            value,
            anchor: Some(("tui-test, 1 worker", anchor)),
        });
    }
    let throughput = |two: &Stat, one: &Stat| one.median() / two.median();
    let (two, single) = (Stat::new("s", secs(&j2)), Stat::new("s", secs(&j1)));
    rows.push(Anchored {
        name: format!(
            "tickbox test -j 2, a suite of {n} (throughput {:.2}× -j 1's)",
            throughput(&two, &single)
        ),
        value: two,
        anchor: Some(("the same suite, -j 1", single)),
        target: None,
    });
    if sizes.anchor_suites {
        let (two, single) = (Stat::new("s", secs(&w2)), Stat::new("s", secs(&w1)));
        rows.push(Anchored {
            name: format!(
                "tui-test, 2 workers, the same suite (throughput {:.2}× 1 worker's)",
                throughput(&two, &single)
            ),
            value: two,
            anchor: Some(("the same suite, 1 worker", single)),
            target: None,
        });
    }
    Ok(rows)
}
