//! The suite's own rules, checked like any other: no tracked file is a
//! built binary (`tools/no-binaries`, which `.ci/run` runs first), and the
//! tests wait for events, not for time: every `sleep(` in a test folder is
//! the one polling pause (`POLL`, in `tickbox-test-support`) or a fixed sleep whose
//! comment says why no event exists, and there are at most
//! [`MAX_FIXED_SLEEPS`] of those. Also: no test builds into the target
//! directory the tests run from, no library keeps process-wide locks or
//! once-cells, and every library crate has tests of its own in `tests/`.

use std::path::{Path, PathBuf};
use std::process::Command;
use tickbox_test_support::*;

/// The most fixed sleeps the whole suite may hold.
const MAX_FIXED_SLEEPS: usize = 5;
/// The marker a fixed sleep's comment starts with, within
/// [`MARKER_LINES`] lines above it.
const MARKER: &str = "Fixed sleep:";
const MARKER_LINES: usize = 4;

fn no_binaries(files: &[&Path]) -> std::process::Output {
    Command::new(root().join("tools/no-binaries"))
        .args(files)
        .output()
        .expect("run tools/no-binaries")
}

#[test]
fn no_tracked_file_is_a_built_binary() {
    let out = no_binaries(&[]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    // Positive controls: a program, a wasm module and an oversized file are
    // each refused with one line naming the file; a source file passes.
    let dir = TempDir::new("no-binaries");
    let elf = dir.path("tool");
    std::fs::copy("/bin/true", &elf).expect("copy /bin/true");
    let wasm = dir.path("guest.wasm");
    std::fs::write(&wasm, b"\0asm\x01\0\0\0").unwrap();
    let big = dir.path("big.txt");
    std::fs::write(&big, "x".repeat(600 * 1024)).unwrap();
    let text = dir.path("main.rs");
    std::fs::write(&text, "fn main() {}\n").unwrap();
    for (file, says) in [
        (&elf, "is an ELF executable"),
        (&wasm, "is a wasm binary"),
        (&big, "over the"),
    ] {
        let out = no_binaries(&[file.as_path()]);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{}: {stderr}", file.display());
        assert!(stderr.contains(says), "{}: {stderr}", file.display());
    }
    assert!(no_binaries(&[text.as_path()]).status.success());
}

/// Every `.rs` file under a `tests` folder of the workspace, and the
/// shared harness (`test-support`).
fn test_sources() -> Vec<(PathBuf, String)> {
    let mut out = rust_sources(&root().join("test-support/src"));
    out.extend(rust_sources(&root().join("examples/embed/tests")));
    for entry in std::fs::read_dir(root()).expect("read root") {
        let tests = entry.expect("entry").path().join("tests");
        if tests.is_dir() {
            out.extend(rust_sources(&tests));
        }
    }
    out
}

/// The fixed sleeps in `text` (line numbers, 1-based), and the sleeps that
/// are neither the polling pause nor marked as fixed.
fn sleeps(text: &str) -> (Vec<usize>, Vec<usize>) {
    let lines: Vec<&str> = text.lines().collect();
    let (mut fixed, mut unexplained) = (Vec::new(), Vec::new());
    for (i, line) in lines.iter().enumerate() {
        let code = line.split("//").next().unwrap_or("");
        if !code.contains("sleep(") || code.contains("sleep(POLL)") {
            continue;
        }
        let above = &lines[i.saturating_sub(MARKER_LINES)..i];
        if above.iter().any(|l| l.contains(MARKER)) {
            fixed.push(i + 1);
        } else {
            unexplained.push(i + 1);
        }
    }
    (fixed, unexplained)
}

#[test]
fn tests_wait_for_events_with_at_most_five_fixed_sleeps_each_explained() {
    // Positive control: the check sees an unexplained sleep, a marked one,
    // and lets the polling pause through.
    // (Built from pieces, so this file's own text holds no sleep call.)
    let call = ["std::thread::sle", "ep(d);"].concat();
    let poll = ["tokio::time::sle", "ep(POLL).await;"].concat();
    let sample = format!(
        "fn a() {{\n    {call}\n}}\n// {MARKER} an absence has no event.\n{call}\n{poll}\n"
    );
    assert_eq!(sleeps(&sample), (vec![5], vec![2]));

    let mut fixed = Vec::new();
    let mut unexplained = Vec::new();
    for (path, text) in test_sources() {
        let (f, u) = sleeps(&text);
        let shown = path
            .strip_prefix(root())
            .unwrap_or(&path)
            .display()
            .to_string();
        fixed.extend(f.into_iter().map(|l| format!("{shown}:{l}")));
        unexplained.extend(u.into_iter().map(|l| format!("{shown}:{l}")));
    }
    assert!(
        unexplained.is_empty(),
        "sleeps that neither poll (the harness POLL) nor say why no event exists \
         (a `{MARKER}` comment above): {unexplained:?}"
    );
    assert!(
        fixed.len() <= MAX_FIXED_SLEEPS,
        "{} fixed sleeps, over the suite's {MAX_FIXED_SLEEPS}: {fixed:?}",
        fixed.len()
    );
}

/// Whether `text` runs a cargo build into the workspace's own target
/// directory: it names cargo (`CARGO`) and `"build"` but no `--target-dir`.
fn builds_into_the_test_build(text: &str) -> bool {
    let code: String = text
        .lines()
        .map(|l| l.split("//").next().unwrap_or(""))
        .collect::<Vec<_>>()
        .join("\n");
    code.contains("\"CARGO\"") && code.contains("\"build\"") && !code.contains("\"--target-dir\"")
}

/// A test that runs `cargo build` in the workspace's own target directory
/// relinks test binaries while other tests run from them (stop 44's CI run
/// lost 30 tests to a test binary rebuilt under them: nextest's test
/// processes carry another environment, so the nested build saw its
/// dependencies as changed). Nested builds go into a target directory of
/// their own; the workspace's own programs are built by the test build.
#[test]
fn no_test_builds_into_the_target_directory_the_tests_run_from() {
    // Positive control, built from pieces so this file does not match.
    let cargo = ["\"CAR", "GO\""].concat();
    let build = ["\"bui", "ld\""].concat();
    let nested = format!("Command::new(env!({cargo})).args([{build}, \"--workspace\"])");
    assert!(builds_into_the_test_build(&nested));
    let own = format!("{nested}.args([\"--target-dir\", dir])");
    assert!(!builds_into_the_test_build(&own));

    let offending: Vec<String> = test_sources()
        .into_iter()
        .filter(|(_, text)| builds_into_the_test_build(text))
        .map(|(path, _)| path.display().to_string())
        .collect();
    assert!(
        offending.is_empty(),
        "tests that run cargo build without --target-dir: {offending:?}"
    );
}

/// The types that make a `static` shared state rather than a counter: a
/// lock, a condition variable or a once-cell (alone or in a tuple).
const SHARED_STATE_TYPES: &[&str] = &[
    "Mutex", "RwLock", "Condvar", "OnceLock", "OnceCell", "Once", "Lazy", "LazyLock", "LazyCell",
];

/// Where [`shared_statics`] is in a source: in code it checks, or in an
/// item it skips, before its body opens or inside it (braces still open).
#[derive(Clone, Copy)]
enum Skip {
    No,
    BeforeBody,
    InBody(usize),
}

/// The state after the part of a skipped item's line that follows the
/// place the item began: in its body while its braces are open, done once
/// they close or at a `;` before any body (`mod tests;`).
fn skip_from(rest: &str) -> Skip {
    match rest.find('{') {
        Some(at) => {
            let body = &rest[at..];
            let open = body.matches('{').count();
            let closed = body.matches('}').count();
            if open > closed {
                Skip::InBody(open - closed)
            } else {
                Skip::No
            }
        }
        None if rest.trim_end().ends_with(';') => Skip::No,
        None => Skip::BeforeBody,
    }
}

/// The lines (1-based) of `text` that declare a `static` of one of
/// [`SHARED_STATE_TYPES`], outside test code (an item under
/// `#[cfg(test)]`) and outside `thread_local!` (one per thread, not per
/// process).
fn shared_statics(text: &str) -> Vec<usize> {
    let lines: Vec<String> = text
        .lines()
        .map(|l| l.split("//").next().unwrap_or("").to_string())
        .collect();
    let mut found = Vec::new();
    let mut skip = Skip::No;
    for (i, line) in lines.iter().enumerate() {
        match skip {
            Skip::InBody(depth) => {
                let depth =
                    (depth + line.matches('{').count()).saturating_sub(line.matches('}').count());
                skip = if depth == 0 {
                    Skip::No
                } else {
                    Skip::InBody(depth)
                };
                continue;
            }
            Skip::BeforeBody => {
                skip = skip_from(line);
                continue;
            }
            Skip::No => {}
        }
        let trimmed = line.trim();
        if let Some(rest) = trimmed.strip_prefix("#[cfg(test)]") {
            skip = skip_from(rest);
            if rest.trim().is_empty() {
                skip = Skip::BeforeBody;
            }
            continue;
        }
        if let Some(at) = trimmed.find("thread_local!") {
            skip = skip_from(&trimmed[at..]);
            continue;
        }
        let declaration = trimmed
            .strip_prefix("pub ")
            .or_else(|| trimmed.strip_prefix("pub(crate) "))
            .or_else(|| trimmed.strip_prefix("pub(super) "))
            .unwrap_or(trimmed);
        if !declaration.starts_with("static ") {
            continue;
        }
        // The type runs from the first `:` to the `=`, maybe over lines.
        let mut decl = declaration.to_string();
        for next in &lines[i + 1..] {
            if decl.contains('=') {
                break;
            }
            decl.push(' ');
            decl.push_str(next);
        }
        let ty = decl
            .split_once(':')
            .map(|(_, rest)| rest.split('=').next().unwrap_or(""))
            .unwrap_or("");
        let shared = ty
            .split(|c: char| !(c.is_alphanumeric() || c == '_'))
            .any(|ident| SHARED_STATE_TYPES.contains(&ident));
        if shared {
            found.push(i + 1);
        }
    }
    found
}

/// Issue 39's rule: a library keeps no state for the whole process. What
/// one process decided (its subreaper's children, cgroups on or off, the
/// open-file limit, compiles being started) is a value its owner hands on
/// (`ProcessHygiene`, an `App`, a `WasmEngine`), so two contexts in one
/// process (an embedder's, a test's) never share it by accident. Counters
/// that only make unique names may stay process-wide, and so may the
/// CLI's terminal and signal handling, which is not a library's.
#[test]
fn library_code_keeps_no_process_wide_lock_or_once_cell() {
    // Positive control, built from pieces so this file does not match: a
    // lock, a tuple holding a condition variable over two lines and a
    // once-cell are found; a counter, a string, a per-thread cell, a
    // `'static` borrow and test code are not.
    let st = ["sta", "tic"].concat();
    let sample = [
        format!("{st} KNOWN: Mutex<Option<HashSet<u32>>> = Mutex::new(None);"),
        format!("pub(crate) {st} STARTING: (std::sync::Mutex<usize>, std::sync::Condvar) ="),
        "    (std::sync::Mutex::new(0), std::sync::Condvar::new());".to_string(),
        format!("{st} WHY: std::sync::OnceLock<&'{st} str> = std::sync::OnceLock::new();"),
        format!("{st} SEQ: AtomicU64 = AtomicU64::new(0);"),
        format!("pub {st} NAME: &str = \"Mutex\";"),
        "thread_local! {".to_string(),
        format!("    {st} CELL: std::cell::OnceCell<u8> = const {{ std::cell::OnceCell::new() }};"),
        "}".to_string(),
        format!("fn held(m: &'{st} Mutex<()>) {{}}"),
        "#[cfg(test)]".to_string(),
        "mod tests {".to_string(),
        "    fn f() {".to_string(),
        format!("        {st} GATE: Mutex<()> = Mutex::new(());"),
        "    }".to_string(),
        "}".to_string(),
        format!("{st} LAST: RwLock<u8> = RwLock::new(0);"),
    ]
    .join("\n");
    assert_eq!(shared_statics(&sample), vec![1, 2, 4, 17]);

    let mut offending = Vec::new();
    for krate in LIBRARY_SOURCES {
        for (path, text) in rust_sources(&root().join(krate)) {
            let shown = path
                .strip_prefix(root())
                .unwrap_or(&path)
                .display()
                .to_string();
            // A test module's own file, and the templates `tickbox new`
            // writes (a new Tick's sources, the guest SDK's copy): neither
            // is the library's code.
            if path.ends_with("tests.rs") || shown.contains("/templates/") {
                continue;
            }
            offending.extend(
                shared_statics(&text)
                    .into_iter()
                    .map(|l| format!("{shown}:{l}")),
            );
        }
    }
    assert!(
        offending.is_empty(),
        "process-wide locks or once-cells in library code (make them part of \
         a value the caller owns): {offending:?}"
    );
}

/// The workspace's members, as the root manifest lists them.
fn members() -> Vec<String> {
    let manifest = std::fs::read_to_string(root().join("Cargo.toml")).expect("the root manifest");
    let line = manifest
        .lines()
        .find(|l| l.starts_with("members"))
        .expect("a members line");
    line.split('"')
        .skip(1)
        .step_by(2)
        .map(str::to_string)
        .collect()
}

/// The members among `members` under `root` that are libraries (a
/// `src/lib.rs`) with no test in a `tests/` folder of their own: a
/// `#[test]` or `#[tokio::test]` in a `.rs` file there.
fn libraries_without_tests(root: &Path, members: &[String]) -> Vec<String> {
    fn has_test(dir: &Path) -> bool {
        std::fs::read_dir(dir)
            .into_iter()
            .flatten()
            .flatten()
            .any(|e| {
                let p = e.path();
                if p.is_dir() {
                    return has_test(&p);
                }
                p.extension().is_some_and(|x| x == "rs")
                    && std::fs::read_to_string(&p)
                        .is_ok_and(|t| t.contains("#[test]") || t.contains("#[tokio::test"))
            })
    }
    members
        .iter()
        .filter(|m| root.join(m).join("src/lib.rs").is_file())
        .filter(|m| !has_test(&root.join(m).join("tests")))
        .cloned()
        .collect()
}

/// Library behaviour is tested beside the library, through its public
/// API: every library crate of the workspace has tests of its own in
/// `tests/`, not only unit tests and not only the binary's.
#[test]
fn every_library_crate_has_tests_of_its_own() {
    let members = members();
    assert!(members.len() >= 10, "the members were read: {members:?}");
    let missing = libraries_without_tests(&root(), &members);
    assert!(
        missing.is_empty(),
        "library crates with no tests/: {missing:?}"
    );

    // Positive control: a library with only unit tests is named; one with
    // a test under tests/ is not; a binary crate is not a library.
    let dir = TempDir::new("suite-tests-dirs");
    for (krate, lib, test) in [
        ("unit_only", true, None),
        ("tested", true, Some("tests/it/main.rs")),
        ("binary", false, None),
    ] {
        let src = dir.path(krate).join("src");
        std::fs::create_dir_all(&src).unwrap();
        let file = if lib { "lib.rs" } else { "main.rs" };
        std::fs::write(src.join(file), "#[test]\nfn unit() {}\n").unwrap();
        if let Some(t) = test {
            let path = dir.path(krate).join(t);
            std::fs::create_dir_all(path.parent().unwrap()).unwrap();
            std::fs::write(path, "#[test]\nfn beside() {}\n").unwrap();
        }
    }
    let names = ["unit_only", "tested", "binary"].map(String::from);
    assert_eq!(libraries_without_tests(&dir.0, &names), ["unit_only"]);
}

/// The most lines the binary's own tests (`cli/tests/it`) may hold:
/// library behaviour is tested beside its crate, and what stays there is
/// what needs the `tickbox` binary (issue 41).
const MAX_BINARY_TEST_LINES: usize = 10_000;

/// Lines of the `.rs` files directly in `dir`.
fn rust_lines(dir: &Path) -> usize {
    std::fs::read_dir(dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|x| x == "rs"))
        .map(|p| std::fs::read_to_string(&p).unwrap().lines().count())
        .sum()
}

#[test]
fn the_binarys_own_tests_stay_under_their_bound() {
    let lines = rust_lines(&root().join("cli/tests/it"));
    assert!(
        lines < MAX_BINARY_TEST_LINES,
        "cli/tests/it holds {lines} lines, over {MAX_BINARY_TEST_LINES}: \
         move what tests a library beside its crate"
    );
    // Positive control: the count is of lines, over every `.rs` file.
    let dir = TempDir::new("suite-lines");
    std::fs::write(dir.path("a.rs"), "1\n2\n3\n").unwrap();
    std::fs::write(dir.path("b.rs"), "4\n").unwrap();
    std::fs::write(dir.path("c.txt"), "not counted\n").unwrap();
    assert_eq!(rust_lines(&dir.0), 4);
}

/// The body of the shell function `name` in `script`: the lines between
/// `name() {` and the next line `}`.
fn function_body(script: &str, name: &str) -> Option<String> {
    let (_, rest) = script.split_once(&format!("\n{name}() {{\n"))?;
    let (body, _) = rest.split_once("\n}\n")?;
    Some(body.to_string())
}

/// `.ci/run` runs README's two commands (the first, a Tick called, and
/// the second, the whole test suite) exactly as README shows them: the
/// lines of the first shell block after README's "Two commands".
#[test]
fn ci_runs_the_two_readme_commands_as_written() {
    let readme = std::fs::read_to_string(root().join("README.md")).unwrap();
    let (_, after) = readme
        .split_once("Two commands")
        .expect("README introduces its two commands");
    let block = after
        .split_once("```sh\n")
        .and_then(|(_, b)| b.split_once("\n```"))
        .map(|(b, _)| b)
        .expect("README's two commands are a sh block");
    let commands: Vec<&str> = block.lines().collect();
    assert_eq!(commands.len(), 2, "README's block: {block}");
    let ci = std::fs::read_to_string(root().join(".ci/run")).unwrap();
    for (name, command) in [
        ("readme_first_command", commands[0]),
        ("readme_test_command", commands[1]),
    ] {
        assert_eq!(
            function_body(&ci, name).as_deref(),
            Some(command),
            ".ci/run's {name} is not README's command"
        );
    }
    // Positive control: the body is read exactly, and another is not it.
    let script = "a\nrun() {\necho one && echo two\n}\nb\n";
    assert_eq!(
        function_body(script, "run").as_deref(),
        Some("echo one && echo two")
    );
    assert_eq!(function_body(script, "walk"), None);
}
