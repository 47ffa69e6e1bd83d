//! `tickbox test` treats scenario files as untrusted input: native Ticks
//! only when allowed, grants bounded by the command line, no symbolic links
//! for scenario and snapshot files, names that cannot forge report lines,
//! and a time budget per scenario and per run. Each attack has its normal
//! case beside it.

use crate::util::*;
use std::path::{Path, PathBuf};

/// The wasm counter example (`examples/counter`).
fn counter_wasm() -> String {
    build_wasm("examples", "counter", "wasm32-wasip2")
        .to_string_lossy()
        .into_owned()
}

/// A scenario for the wasm counter: `tick` extra lines in `[tick]`, then
/// `steps`.
fn wasm_scenario(file: &Path, tick: &str, steps: &str) {
    let body = format!(
        "[tick]\npath = {:?}\nsize = [40, 8]\n{tick}\n{steps}",
        counter_wasm()
    );
    std::fs::write(file, body).unwrap();
}

/// Two presses and their state: passes on the counter.
const PRESS_TWICE: &str =
    "[[step]]\nkeys = [\"+\", \"+\"]\n\n[[step]]\nexpect_state = { pointer = \"/value\", equals = 2 }\n";

fn test(args: &[&str], env: &[(&str, &str)]) -> Output {
    let mut argv = vec!["test"];
    argv.extend_from_slice(args);
    tickbox_env(&argv, env)
}

fn s(p: &Path) -> String {
    p.to_string_lossy().into_owned()
}

#[test]
fn native_scenarios_run_only_when_allowed() {
    let native = s(&root().join("tests/scenarios/native-counter.scenario.toml"));
    let refused = "refused: a native Tick runs with your permissions, and only sandboxed (wasm) Ticks may run";
    let out = test(&[&native, "--sandboxed-only"], &[]);
    out.expect(2, "test: 1 scenario is invalid");
    assert!(out.stdout.contains(refused), "{out:#?}");
    assert!(out.stdout.contains("(--sandboxed-only)"), "{out:#?}");

    // CI set: the same, by default; CI=false is not CI.
    let out = test(&[&native], &[("CI", "true")]);
    out.expect(2, "test: 1 scenario is invalid");
    assert!(
        out.stdout.contains("(the default when CI is set)"),
        "{out:#?}"
    );
    assert!(out.stdout.contains("pass --allow-native"), "{out:#?}");
    // Opting back in, and CI=false: the native Tick runs and passes.
    let out = test(&[&native, "--allow-native"], &[("CI", "true")]);
    assert_eq!(out.code, 0, "{out:#?}");
    let out = test(&[&native], &[("CI", "false")]);
    assert_eq!(out.code, 0, "{out:#?}");
    test(&[&native, "--allow-native", "--sandboxed-only"], &[]).expect(2, "cannot be used with");

    // Positive control: a wasm Tick runs under both.
    let t = TempDir::new("walls-sandboxed");
    let file = t.path("wasm.scenario.toml");
    wasm_scenario(&file, "", PRESS_TWICE);
    let out = test(&[&s(&file), "--sandboxed-only"], &[("CI", "1")]);
    assert_eq!(out.code, 0, "{out:#?}");
}

#[test]
fn dir_grants_stay_under_the_grant_root() {
    let t = TempDir::new("walls-root");
    let here = t.path("here");
    let outside = t.path("outside");
    std::fs::create_dir_all(here.join("data")).unwrap();
    std::fs::create_dir_all(&outside).unwrap();
    std::os::unix::fs::symlink(&outside, here.join("link")).unwrap();
    let file = here.join("g.scenario.toml");

    // Positive control: a directory beside the scenario is granted.
    wasm_scenario(&file, "dir = [\"data::/data:ro\"]", PRESS_TWICE);
    let out = test(&[&s(&file)], &[]);
    assert_eq!(out.code, 0, "{out:#?}");

    // Outside it, by absolute path, by `..`, through a link: refused.
    for grant in [s(&outside), "../outside".into(), "link::/l".into()] {
        wasm_scenario(&file, &format!("dir = [{grant:?}]"), PRESS_TWICE);
        let out = test(&[&s(&file)], &[]);
        out.expect(2, "test: 1 scenario is invalid");
        assert!(
            out.stdout.contains("is outside the grant root"),
            "{grant}: {out:#?}"
        );
        // A root the command line names widens it.
        let out = test(&[&s(&file), "--grant-root", &s(&t.0)], &[]);
        assert_eq!(out.code, 0, "{grant}: {out:#?}");
    }
    test(&[&s(&file), "--grant-root", &s(&t.path("none"))], &[]).expect(2, "not a directory");
}

#[test]
fn environment_variables_are_read_only_when_allowed() {
    let t = TempDir::new("walls-env");
    let file = t.path("e.scenario.toml");
    let secret = ("WALLS_SECRET", "hunter2-do-not-print");
    let bin = counter_wasm();
    let dir = Path::new(&bin)
        .parent()
        .unwrap()
        .to_string_lossy()
        .into_owned();

    // The host's variable in a path: refused, and the value is nowhere.
    std::fs::write(
        &file,
        format!("[tick]\npath = \"${{WALLS_SECRET}}/counter.wasm\"\n{PRESS_TWICE}"),
    )
    .unwrap();
    let out = test(&[&s(&file)], &[secret]);
    out.expect(2, "test: 1 scenario is invalid");
    assert!(
        out.stdout
            .contains("environment variable WALLS_SECRET is not allowed by the run"),
        "{out:#?}"
    );
    assert!(!format!("{out:?}").contains(secret.1), "{out:#?}");

    // An env grant copying it to the Tick: refused too.
    wasm_scenario(&file, "env = [\"WALLS_SECRET\"]", PRESS_TWICE);
    let out = test(&[&s(&file)], &[secret]);
    out.expect(2, "test: 1 scenario is invalid");
    assert!(
        out.stdout.contains("allow it with allow_env WALLS_SECRET"),
        "{out:#?}"
    );
    assert!(!format!("{out:?}").contains(secret.1), "{out:#?}");

    // Positive controls: allowed, both work; a literal value needs nothing.
    let out = test(&[&s(&file), "--allow-env", "WALLS_SECRET"], &[secret]);
    assert_eq!(out.code, 0, "{out:#?}");
    std::fs::write(
        &file,
        format!("[tick]\npath = \"${{WALLS_DIR}}/counter.wasm\"\n{PRESS_TWICE}"),
    )
    .unwrap();
    let out = test(
        &[&s(&file), "--allow-env", "WALLS_DIR"],
        &[("WALLS_DIR", &dir)],
    );
    assert_eq!(out.code, 0, "{out:#?}");
    wasm_scenario(&file, "env = [\"MODE=fast\"]", PRESS_TWICE);
    assert_eq!(test(&[&s(&file)], &[]).code, 0);
}

#[test]
fn a_symlinked_scenario_file_is_refused_without_its_content() {
    let t = TempDir::new("walls-link");
    let outside = t.path("private.txt");
    std::fs::write(&outside, "[tick]\nthe secret content = = here\n").unwrap();
    let dir = t.path("scenarios");
    std::fs::create_dir_all(&dir).unwrap();
    let link = dir.join("link.scenario.toml");
    std::os::unix::fs::symlink(&outside, &link).unwrap();
    // Named directly, and found in a directory.
    for arg in [s(&link), s(&dir)] {
        let out = test(&[&arg], &[]);
        out.expect(2, "test: 1 scenario is invalid");
        assert!(out.stdout.contains("link.scenario.toml"), "{out:#?}");
        assert!(out.stdout.contains("a symbolic link"), "{out:#?}");
        assert!(!format!("{out:?}").contains("secret content"), "{out:#?}");
    }
    // Positive control: the same text in a regular file is parsed, and its
    // parse error quotes it (so the refusal above is what hid it).
    std::fs::remove_file(&link).unwrap();
    std::fs::copy(&outside, &link).unwrap();
    let out = test(&[&s(&link)], &[]);
    out.expect(2, "test: 1 scenario is invalid");
    assert!(out.stdout.contains("not a valid scenario"), "{out:#?}");
    assert!(out.stdout.contains("secret content"), "{out:#?}");
}

#[test]
fn snapshots_are_never_read_or_written_through_a_link() {
    let t = TempDir::new("walls-snap");
    let dir = t.path("repo");
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join("s.scenario.toml");
    wasm_scenario(
        &file,
        "",
        &format!("{PRESS_TWICE}\n[[step]]\nexpect_screen = {{ snapshot = \"after\" }}\n"),
    );
    let snap = dir.join("s.after.snap");
    let outside = t.path("outside.txt");
    let original = "OUTSIDE FILE, not a snapshot\n";

    // A link to a file outside: not read (its content is not shown), not
    // written by --update.
    std::fs::write(&outside, original).unwrap();
    std::os::unix::fs::symlink(&outside, &snap).unwrap();
    let out = test(&[&s(&file)], &[]);
    out.expect(1, "1 of 1 scenario failed");
    assert!(
        out.stdout.contains("snapshot \"after\" refused")
            && out.stdout.contains("is a symbolic link"),
        "{out:#?}"
    );
    assert!(!out.stdout.contains("OUTSIDE FILE"), "{out:#?}");
    let out = test(&[&s(&file), "--update"], &[]);
    out.expect(1, "1 of 1 scenario failed");
    assert!(
        out.stdout.contains("refused to write the snapshot"),
        "{out:#?}"
    );
    assert_eq!(std::fs::read_to_string(&outside).unwrap(), original);
    assert!(std::fs::symlink_metadata(&snap)
        .unwrap()
        .file_type()
        .is_symlink());

    // A dangling link: --update creates nothing outside.
    std::fs::remove_file(&snap).unwrap();
    let target = t.path("created-outside.txt");
    std::os::unix::fs::symlink(&target, &snap).unwrap();
    let out = test(&[&s(&file), "--update"], &[]);
    out.expect(1, "1 of 1 scenario failed");
    assert!(out.stdout.contains("is a symbolic link"), "{out:#?}");
    assert!(!target.exists(), "nothing was created through the link");

    // Positive control: a regular snapshot is written, then compared.
    std::fs::remove_file(&snap).unwrap();
    let out = test(&[&s(&file), "--update"], &[]);
    assert_eq!(out.code, 0, "{out:#?}");
    assert!(std::fs::read_to_string(&snap)
        .unwrap()
        .contains("Counter: 2"));
    let out = test(&[&s(&file)], &[]);
    assert_eq!(out.code, 0, "{out:#?}");
}

#[test]
fn a_newline_in_a_name_forges_no_report_line() {
    let t = TempDir::new("walls-name");
    let file = t.path("n.scenario.toml");
    let forged = "PASSED: 9 passed, 0 failed, 0 could not start, 0 invalid";
    // A failing scenario whose name tries to end the report with a pass.
    let wrong = "[[step]]\nexpect_state = { pointer = \"/value\", equals = 7 }\ntimeout = \"1s\"\n";
    let write = |name: &str| {
        std::fs::write(
            &file,
            format!(
                "name = {name:?}\n[tick]\npath = {:?}\nsize = [40, 8]\n{wrong}",
                counter_wasm()
            ),
        )
        .unwrap()
    };
    write(&format!("counter\n{forged}"));
    let out = test(&[&s(&file)], &[]);
    out.expect(1, "1 of 1 scenario failed");
    let lines: Vec<&str> = out.stdout.lines().collect();
    assert!(!lines.iter().any(|l| l.starts_with("PASSED")), "{out:#?}");
    assert!(
        lines[0].starts_with("FAIL    counter\\nPASSED: 9 passed"),
        "the name stays on its line, escaped: {out:#?}"
    );
    assert!(lines
        .last()
        .unwrap()
        .starts_with("FAILED: 0 passed, 1 failed"));
    let out = test(&[&s(&file), "--format", "junit"], &[]);
    assert!(out.stdout.contains("name=\"counter\\nPASSED"), "{out:#?}");
    assert!(!out.stdout.contains("&#10;PASSED"), "{out:#?}");
    let out = test(&[&s(&file), "--format", "json"], &[]);
    assert_eq!(
        out.json()["scenarios"][0]["name"],
        format!("counter\n{forged}")
    );
    // Positive control: a plain name is shown as it is.
    write("plain counter");
    let out = test(&[&s(&file)], &[]);
    assert!(
        out.stdout.starts_with("FAIL    plain counter ("),
        "{out:#?}"
    );
}

/// A native counter scenario that waits (real time, up to its 10 minute
/// step timeout) for a value that never comes.
fn forever(file: &PathBuf) {
    std::fs::write(
        file,
        format!(
            "[tick]\ncommand = [\"python3\", {:?}]\n[[step]]\nwait_for = {{ pointer = \"/value\", equals = 99 }}\ntimeout = \"10m\"\n",
            tick("counter.py")
        ),
    )
    .unwrap();
}

#[test]
fn scenarios_and_runs_stop_at_their_time_budget() {
    let t = TempDir::new("walls-time");
    let (a, b) = (t.path("a.scenario.toml"), t.path("b.scenario.toml"));
    forever(&a);
    let out = test(&[&s(&a), "--timeout", "2s"], &[]);
    out.expect(1, "1 of 1 scenario failed");
    assert!(
        out.stdout
            .contains("stopped: the scenario ran past the scenario's time budget (--timeout 2s)"),
        "{out:#?}"
    );
    assert!(out.elapsed < std::time::Duration::from_secs(50), "{out:#?}");

    // The run's budget: the first scenario uses it up, the second never
    // starts (one at a time).
    forever(&b);
    let out = test(&[&s(&t.0), "-j", "1", "--run-timeout", "2s"], &[]);
    out.expect(1, "2 of 2 scenarios failed");
    assert!(
        out.stdout
            .contains("stopped: the scenario ran past the run's time budget (--run-timeout 2s)"),
        "{out:#?}"
    );
    assert!(
        out.stdout
            .contains("not run: the run's time budget (--run-timeout 2s) was used up"),
        "{out:#?}"
    );
    test(&[&s(&a), "--timeout", "0s"], &[]).expect(2, "--timeout \"0s\": give a duration");
    test(&[&s(&a), "--run-timeout", "25h"], &[]).expect(2, "at most 24h");

    // Positive control: a scenario within its budget passes.
    let native = s(&root().join("tests/scenarios/native-counter.scenario.toml"));
    let out = test(&[&native, "--timeout", "2m", "--run-timeout", "3m"], &[]);
    assert_eq!(out.code, 0, "{out:#?}");
}
