//! `tickbox test`: the committed scenarios for every example pass, the
//! `CI` rule on `--update`, snapshots reviewed, and every exit code and
//! flag works. What the runner itself does (a wrong expectation's diff,
//! snapshots written and compared, virtual time, clocks and randomness,
//! `wait_for`'s jumps, idle and busy guests, style expectations) is
//! tested through `tickbox_conformance` in
//! `conformance/tests/it/scenario.rs`.

use crate::util::*;
use std::path::Path;

/// The directory the wasm examples are built into, as scenarios name it
/// (`${TICKBOX_WASM_DIR}/counter.wasm`).
pub(crate) fn wasm_dir() -> String {
    // Building one example builds the whole examples workspace.
    let counter = build_wasm("examples", "counter", "wasm32-wasip2");
    counter
        .parent()
        .expect("wasm dir")
        .to_string_lossy()
        .into_owned()
}

fn test(args: &[&str]) -> Output {
    let dir = wasm_dir();
    // Scenarios read only the variables the command line allows.
    let mut argv = vec!["test".to_string(), "--allow-env=TICKBOX_WASM_DIR".into()];
    argv.extend(args.iter().map(|a| a.to_string()));
    tickbox_env(&argv, &[("TICKBOX_WASM_DIR", dir.as_str())])
}

/// The C counter's build directory (`examples/c`, built once per run by
/// `langs::c_counter`), which its scenarios name as `${TICKBOX_C_DIR}`.
pub(crate) fn c_dir() -> String {
    let (module, _) = crate::langs::c_counter();
    module
        .parent()
        .expect("c dir")
        .to_string_lossy()
        .into_owned()
}

fn repo(p: &str) -> String {
    root().join(p).to_string_lossy().into_owned()
}

#[test]
fn every_example_scenario_passes() {
    let (wasm, c) = (wasm_dir(), c_dir());
    // The Go, Python and JavaScript examples, built (and compiled into the
    // tests' cache) once per test process by the toolchain tests' helper.
    let lang_dir = |lang| {
        let wasm = crate::toolchains::example(lang);
        wasm.parent().unwrap().to_string_lossy().into_owned()
    };
    let go = lang_dir(crate::toolchains::GO);
    let python = lang_dir(crate::toolchains::PYTHON);
    let js = lang_dir(crate::toolchains::JS);
    // Every example at once, each a fresh instance (the Python and
    // JavaScript components are big): a minute was not always enough at a
    // load average of 12, and time is not what this test checks.
    let out = tickbox_within(
        &[
            "test",
            &repo("examples"),
            "--format",
            "json",
            "--allow-env=TICKBOX_WASM_DIR",
            "--allow-env=TICKBOX_C_DIR",
            "--allow-env=TICKBOX_GO_DIR",
            "--allow-env=TICKBOX_PYTHON_DIR",
            "--allow-env=TICKBOX_JS_DIR",
        ],
        &[
            ("TICKBOX_WASM_DIR", wasm.as_str()),
            ("TICKBOX_C_DIR", c.as_str()),
            ("TICKBOX_GO_DIR", go.as_str()),
            ("TICKBOX_PYTHON_DIR", python.as_str()),
            ("TICKBOX_JS_DIR", js.as_str()),
        ],
        PROJECT_SCENARIO_LIMIT,
    );
    assert_eq!(out.code, 0, "{out:#?}");
    let report = out.json();
    assert_eq!(report["format"], 1);
    assert_eq!(report["passed"], true);
    let names: Vec<&str> = report["scenarios"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["file"].as_str().unwrap())
        .collect();
    for example in [
        "counter",
        "dashboard",
        "fetch",
        "notes",
        "ticker",
        "c",
        "go",
        "python",
        "js",
    ] {
        assert!(
            names
                .iter()
                .any(|n| n.contains(&format!("examples/{example}/"))),
            "no scenario for {example}: {names:?}"
        );
    }
    for s in report["scenarios"].as_array().unwrap() {
        assert_eq!(s["status"], "passed", "{s}");
        assert_eq!(
            s["written"],
            serde_json::json!([]),
            "a plain run writes nothing"
        );
        let native = s["file"]
            .as_str()
            .unwrap()
            .ends_with("-native.scenario.toml");
        assert_eq!(
            s["seed"].is_u64(),
            !native,
            "wasm scenarios are deterministic: {s}"
        );
    }
}

/// Copies the files `names` of the repository's directory `from` into `to`.
fn copy_into(from: &str, names: &[&str], to: &Path) {
    for name in names {
        std::fs::copy(root().join(from).join(name), to.join(name))
            .unwrap_or_else(|e| panic!("copy {from}/{name}: {e}"));
    }
}

/// `--update` never writes a snapshot when `CI` is set (exit 2); without
/// it, it writes the screen and says so. (How snapshots are written and
/// compared is the runner's, in `conformance/tests/it/scenario.rs`.)
#[test]
fn update_is_refused_when_ci_is_set_and_says_what_it_wrote_otherwise() {
    let t = TempDir::new("scenario-update");
    let wasm = format!("{}/counter.wasm", wasm_dir());
    let file = t.path("c.scenario.toml");
    std::fs::write(
        &file,
        format!(
            "[tick]\npath = {wasm:?}\nsize = [30, 5]\n\n[[step]]\nwait_for = {{ contains = \"Counter\" }}\n\n[[step]]\nexpect_screen = {{ snapshot = \"end\" }}\n"
        ),
    )
    .unwrap();
    let file = file.to_string_lossy();
    let ci = tickbox_env(
        &["test", "--allow-env=TICKBOX_WASM_DIR", &file, "--update"],
        &[("TICKBOX_WASM_DIR", wasm_dir().as_str()), ("CI", "true")],
    );
    ci.expect(2, "never written when CI is set");
    assert!(!t.path("c.end.snap").exists());
    let out = test(&[&file, "--update"]);
    assert_eq!(out.code, 0, "{out:#?}");
    assert!(out.stdout.contains("wrote "), "{out:#?}");
    assert!(t.path("c.end.snap").exists());
}

#[test]
fn exit_codes_usage_invalid_and_start_failure() {
    // Invalid scenarios: a native Tick cannot advance virtual time; a step
    // with two actions. Exit 2, each named.
    let out = test(&[&repo("tests/scenarios/invalid")]);
    out.expect(2, "2 scenarios are invalid");
    assert!(
        out.stdout
            .contains("step 1: advance needs virtual time: a native Tick runs on real time"),
        "{out:#?}"
    );
    assert!(
        out.stdout
            .contains("step 1: several actions (key, resize): one per step"),
        "{out:#?}"
    );

    // Virtual time and scratch directories are for wasm Ticks only.
    let t0 = TempDir::new("scenario-native-only");
    let counter = tick("counter.py");
    for (extra, why) in [
        (
            "deterministic = true",
            "deterministic = true applies to wasm Ticks",
        ),
        (
            "scratch = \"/data\"",
            "[tick] scratch applies to wasm Ticks",
        ),
    ] {
        let file = t0.path("native.scenario.toml");
        std::fs::write(
            &file,
            format!(
                "[tick]\ncommand = [\"python3\", {counter:?}]\n{extra}\n[[step]]\nkey = \"+\"\n"
            ),
        )
        .unwrap();
        let out = test(&[&file.to_string_lossy()]);
        out.expect(2, "test: 1 scenario is invalid");
        assert!(out.stdout.contains(why), "{out:#?}");
    }

    // A Tick that cannot start: exit 3.
    let t = TempDir::new("scenario-start");
    let file = t.path("gone.scenario.toml");
    std::fs::write(
        &file,
        "[tick]\npath = \"missing.wasm\"\n[[step]]\nkey = \"+\"\n",
    )
    .unwrap();
    let out = test(&[&file.to_string_lossy(), "--format", "json"]);
    out.expect(3, "test: the Tick of 1 scenario could not start");
    assert_eq!(out.json()["scenarios"][0]["status"], "start_failed");

    // Usage: nothing found, -j 0, a filter that matches nothing.
    test(&[&t.0.join("nothing-here").to_string_lossy()]).expect(2, "nothing-here");
    test(&[&repo("tests/scenarios/failing"), "-j", "0"]).expect(2, "-j must be at least 1");
    test(&[&repo("tests/scenarios/failing"), "--filter", "no-such-name"])
        .expect(2, "--filter matched no scenario");
}

#[test]
fn filter_selects_by_name_or_path() {
    let out = test(&[
        &repo("tests/scenarios/failing"),
        "--filter",
        "wrong-state",
        "--format",
        "json",
    ]);
    assert_eq!(out.code, 1, "{out:#?}");
    let r = out.json();
    assert_eq!(r["scenarios"].as_array().unwrap().len(), 1);
    assert_eq!(
        r["scenarios"][0]["name"],
        "counter with a wrong state expectation"
    );
}

#[test]
fn the_jobs_bound_is_enforced() {
    let dir = repo("tests/scenarios/native-counter.scenario.toml");
    test(&[&dir, "-j", "257"]).expect(2, "-j 257 is over the limit of 256");
    // Positive control: the limit itself is accepted.
    let out = test(&[&dir, "-j", "256"]);
    assert_eq!(out.code, 0, "{out:#?}");
}

/// `--shard K/N` through the wire: N runs of the same suite report
/// disjoint sets of scenario files whose union is the whole suite (a CI
/// matrix's runners), each on its own; an empty shard is not a failure.
#[test]
fn shards_split_a_suite_into_disjoint_parts_that_cover_it() {
    let t = TempDir::new("shards");
    // Twelve scenarios that are refused before any Tick starts (a native
    // Tick under --sandboxed-only): the report still names each file.
    for i in 0..12 {
        std::fs::write(
            t.path(&format!("s{i:02}.scenario.toml")),
            format!("name = \"s{i}\"\n[tick]\ncommand = [\"true\"]\n[[step]]\nkeys = [\"a\"]\n"),
        )
        .unwrap();
    }
    let dir = t.0.display().to_string();
    let files = |args: &[&str]| -> Vec<String> {
        let mut argv = vec![dir.as_str(), "--sandboxed-only", "--format", "json"];
        argv.extend(args);
        let out = test(&argv);
        if out.stdout.trim().is_empty() || out.json()["scenarios"].as_array().unwrap().is_empty() {
            return Vec::new();
        }
        assert_eq!(out.code, 2, "{out:#?}");
        out.json()["scenarios"]
            .as_array()
            .unwrap()
            .iter()
            .map(|s| s["file"].as_str().unwrap().to_string())
            .collect()
    };
    let all = files(&[]);
    assert_eq!(all.len(), 12);
    for n in [2, 3, 5] {
        let mut union = Vec::new();
        for k in 1..=n {
            let part = files(&["--shard", &format!("{k}/{n}")]);
            assert!(part.len() < 12 || n == 1, "shard {k}/{n} took everything");
            union.extend(part);
        }
        union.sort();
        let mut sorted = all.clone();
        sorted.sort();
        assert_eq!(union, sorted, "{n} shards: disjoint and complete");
    }
    test(&[dir.as_str(), "--shard", "3/2"]).expect(2, "shard \"3/2\": give K/N");
}

/// `--retries N`: a scenario that fails and then passes is reported as
/// flaky in the text and JUnit reports (exit 0, never plain green); without
/// retries the same first failure fails the run.
#[test]
fn a_scenario_that_passes_on_retry_is_reported_flaky() {
    let t = TempDir::new("flaky");
    let counter = repo("tests/ticks/counter.py");
    // The Tick exits at once on its first start, and runs on its second.
    let scenario = t.path("flaky.scenario.toml");
    std::fs::write(
        &scenario,
        format!(
            "name = \"flaky start\"\n[tick]\ncommand = [\"sh\", \"-c\", \"if [ -e started ]; then exec python3 {counter}; else touch started; exit 1; fi\"]\n\n[[step]]\ncall = \"increment\"\nargs = {{ amount = 2 }}\nresult = {{ value = 2 }}\n"
        ),
    )
    .unwrap();
    let file = scenario.display().to_string();
    let out = test(&[&file]);
    assert_eq!(out.code, 3, "{out:#?}");
    std::fs::remove_file(t.path("started")).unwrap();
    let out = test(&[&file, "--retries", "1"]);
    assert_eq!(out.code, 0, "{out:#?}");
    assert!(out.stdout.starts_with("FLAKY"), "{out:#?}");
    assert!(
        out.stdout.contains("attempt 1 failed (start_failed)"),
        "{out:#?}"
    );
    assert!(out.stdout.contains("1 passed (1 flaky)"), "{out:#?}");
    std::fs::remove_file(t.path("started")).unwrap();
    let out = test(&[&file, "--retries", "1", "--format", "junit"]);
    assert_eq!(out.code, 0, "{out:#?}");
    assert!(
        out.stdout.contains("<flakyFailure message="),
        "{}",
        out.stdout
    );
    assert!(!out.stdout.contains("<failure"), "{}", out.stdout);
    test(&[&file, "--retries", "11"]).expect(2, "--retries 11 is over the limit");
}

/// `${NAME:-DEFAULT}`: the example scenarios run as checked out, next to
/// the documented build's output, without exporting or allowing anything;
/// a variable the command line allows still wins.
#[test]
fn example_scenarios_run_without_exporting_variables() {
    let t = TempDir::new("defaults");
    let scenarios = t.path("counter/scenarios");
    std::fs::create_dir_all(&scenarios).unwrap();
    copy_into(
        "examples/counter/scenarios",
        &[
            "counter.scenario.toml",
            "counter.start.snap",
            "counter.after.snap",
        ],
        &scenarios,
    );
    // Where `cargo build --manifest-path examples/Cargo.toml` puts it,
    // relative to the scenario.
    let release = t.path("target/wasm32-wasip2/release");
    std::fs::create_dir_all(&release).unwrap();
    std::fs::copy(
        build_wasm("examples", "counter", "wasm32-wasip2"),
        release.join("counter.wasm"),
    )
    .unwrap();
    let dir = t.path("counter").display().to_string();
    let out = tickbox_env(
        &["test", dir.as_str()],
        &[("TICKBOX_WASM_DIR", "/nonexistent")],
    );
    assert_eq!(out.code, 0, "not allowed, so not read: {out:#?}");
    let out = tickbox_env(
        &["test", dir.as_str(), "--allow-env", "TICKBOX_WASM_DIR"],
        &[("TICKBOX_WASM_DIR", "/nonexistent")],
    );
    out.expect(3, "could not start");
    assert!(out.stdout.contains("/nonexistent/counter.wasm"), "{out:#?}");
}

/// The review flow: a mismatch leaves NAME.snap.new; `tickbox test review`
/// lists it when no one can answer, `--accept` makes it the snapshot (the
/// scenario then passes), `--reject` drops it, and a .snap no scenario
/// uses is reported.
#[test]
fn pending_snapshots_are_reviewed_accepted_or_rejected() {
    let t = TempDir::new("review");
    let wasm = format!("{}/counter.wasm", wasm_dir());
    let file = t.path("c.scenario.toml");
    let write = |keys: &str| {
        std::fs::write(
            &file,
            format!(
                "[tick]\npath = {wasm:?}\nsize = [30, 5]\n\n[[step]]\nkeys = [{keys}]\n\n[[step]]\nwait_for = {{ contains = \"Counter\" }}\n\n[[step]]\nexpect_screen = {{ snapshot = \"end\" }}\n"
            ),
        )
        .unwrap();
    };
    let dir = t.0.display().to_string();
    let review = |extra: &[&str]| {
        let mut a = vec!["test", "review", dir.as_str()];
        a.extend(extra);
        tickbox(&a)
    };
    write("\"+\"");
    test(&[&file.to_string_lossy()]).expect(1, "failed");
    std::fs::write(t.path("c.old.snap"), "gone\n").unwrap();
    let listed = review(&[]);
    listed.expect(1, "test review: 1 snapshot pending");
    assert!(
        listed.stdout.contains("pending: ") && listed.stdout.contains("c.end.snap.new"),
        "{listed:#?}"
    );
    let accepted = review(&["--accept"]);
    assert_eq!(accepted.code, 0, "{accepted:#?}");
    assert!(
        accepted.stdout.contains("accepted ")
            && accepted.stdout.contains("unreferenced: ")
            && accepted.stdout.contains("c.old.snap"),
        "{accepted:#?}"
    );
    assert!(std::fs::read_to_string(t.path("c.end.snap"))
        .unwrap()
        .contains("Counter: 1"));
    assert!(!t.path("c.end.snap.new").exists());
    let out = test(&[&file.to_string_lossy()]);
    assert_eq!(out.code, 0, "the accepted snapshot matches: {out:#?}");
    // A changed screen, rejected: the snapshot stays as it was.
    write("\"+\", \"+\"");
    test(&[&file.to_string_lossy()]).expect(1, "failed");
    assert!(t.path("c.end.snap.new").exists());
    let rejected = review(&["--reject"]);
    assert_eq!(rejected.code, 0, "{rejected:#?}");
    assert!(!t.path("c.end.snap.new").exists());
    assert!(std::fs::read_to_string(t.path("c.end.snap"))
        .unwrap()
        .contains("Counter: 1"));
}

/// On a terminal, review shows the diff and asks; the answer is typed.
#[test]
fn review_asks_on_a_terminal() {
    let w = crate::live::World::new("review-tty");
    let wasm = format!("{}/counter.wasm", wasm_dir());
    let file = w.dir.path("c.scenario.toml");
    std::fs::write(
        &file,
        format!("[tick]\npath = {wasm:?}\nsize = [30, 5]\n\n[[step]]\nwait_for = {{ contains = \"Counter\" }}\n\n[[step]]\nexpect_screen = {{ snapshot = \"end\" }}\n"),
    )
    .unwrap();
    test(&[&file.to_string_lossy()]).expect(1, "failed");
    let dir = w.dir.0.display().to_string();
    let mut pty = w.pty(&["test", "review", &dir], 100, 30);
    assert!(
        crate::util::eventually(crate::live::WAIT, || pty
            .text()
            .contains("[a]ccept, [r]eject, [s]kip?")),
        "{}",
        pty.text()
    );
    assert!(
        pty.text().contains("(new):") && pty.text().contains("Counter: 0"),
        "{}",
        pty.text()
    );
    pty.type_keys(b"a\r");
    assert_eq!(pty.wait(), 0, "{}", pty.text());
    assert!(pty.text().contains("accepted "), "{}", pty.text());
    assert!(w.dir.path("c.end.snap").exists());
}

/// A scenario's relative paths mean the same from every working directory:
/// the C example as a newcomer has it (built into `build/` beside its
/// scenarios, no variable set), tested from the folder above it, from its
/// scenarios folder and from elsewhere by absolute path. Its native
/// scenario starts the Tick in the scenario's folder, which once made the
/// relative path point to the wrong place from anywhere but there.
#[test]
fn the_c_example_scenarios_pass_from_every_working_directory() {
    let (module, native) = crate::langs::c_counter();
    let dir = TempDir::new("c-from-anywhere");
    let project = dir.path("c");
    std::fs::create_dir_all(project.join("build")).unwrap();
    std::fs::create_dir_all(project.join("scenarios")).unwrap();
    for entry in std::fs::read_dir(root().join("examples/c/scenarios")).unwrap() {
        let from = entry.unwrap().path();
        std::fs::copy(
            &from,
            project.join("scenarios").join(from.file_name().unwrap()),
        )
        .unwrap();
    }
    let run = |cwd: &Path, target: &str| {
        tickbox_in(
            cwd,
            &["test", target, "--allow-native", "--format", "json"],
            &[],
            PROJECT_SCENARIO_LIMIT,
        )
    };
    // Positive control first: with nothing built the Tick cannot start, and
    // the report says so once ("cannot start the Tick" not doubled).
    let out = run(&dir.0, "c");
    assert_eq!(out.code, 3, "a Tick that cannot start: {out:#?}");
    assert!(out.stdout.contains("cannot start the Tick"), "{out:#?}");
    assert!(
        !out.stdout
            .contains("cannot start the Tick: cannot start the Tick"),
        "{}",
        out.stdout
    );
    std::fs::copy(&module, project.join("build/counter.wasm")).unwrap();
    std::fs::copy(&native, project.join("build/counter")).unwrap();
    let absolute = project.to_string_lossy().into_owned();
    for (cwd, target) in [
        (dir.0.clone(), "c"),
        (project.join("scenarios"), "."),
        (std::env::temp_dir(), absolute.as_str()),
    ] {
        let out = run(&cwd, target);
        assert_eq!(out.code, 0, "from {}: {out:#?}", cwd.display());
        let report = out.json();
        let statuses: Vec<&str> = report["scenarios"]
            .as_array()
            .unwrap()
            .iter()
            .map(|s| s["status"].as_str().unwrap())
            .collect();
        assert_eq!(
            statuses,
            ["passed", "passed"],
            "from {}: {report}",
            cwd.display()
        );
    }
}
