//! The examples of README.md and the manual (`docs/`), read from their
//! Markdown: which shell blocks a page has, how each is marked (run here,
//! run by a named test, a page's setup, servers, against a registry, not
//! run and why), the commands of each `console` session with the output
//! it shows, and whether what a command printed is what its page shows.
//! `tickbox`'s `doc_examples` test runs them; this is the reading and the
//! comparing, apart from the running.
//!
//! A `console` block is a session: `$ COMMAND` lines (a line ending in
//! `\` continues on the next), each followed by its stdout. In the shown
//! output a line `…` stands for any number of lines, a `…` inside a line
//! for any text, and a last line `[exit N]` for the exit code (0 when none
//! is shown).

use crate::root;
use std::path::{Path, PathBuf};

/// The marker of a block that is shown and not run.
pub const NOT_RUN: &str = "<!-- not run:";
/// The marker of a block that a test runs: `<!-- run by MODULE::TEST -->`,
/// or `<!-- run by MODULE::TEST, on a terminal -->` for commands that
/// print otherwise on a terminal.
pub const RUN_BY: &str = "<!-- run by ";
pub const ON_A_TERMINAL: &str = ", on a terminal";
/// The marker of a block of servers (see the module doc).
pub const SERVES: &str = "<!-- serves until stopped -->";
/// The marker of a block that runs against a registry, and the address it
/// names for it.
pub const WITH_REGISTRY: &str = "<!-- with a registry at 127.0.0.1:5000 -->";
pub const SHOWN_REGISTRY: &str = "127.0.0.1:5000";
#[derive(Debug)]
pub struct Example {
    /// `file:line` of the command.
    pub at: String,
    pub command: String,
    pub output: Vec<String>,
    pub code: i32,
    /// A server: run until what it shows is printed, then stopped.
    pub serves: bool,
    /// Runs against a registry, named [`SHOWN_REGISTRY`].
    pub registry: bool,
    /// Runs with a terminal as its stdout and stderr (what it shows is
    /// both).
    pub terminal: bool,
}

/// README.md and every page under docs/.
pub fn pages() -> Vec<PathBuf> {
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
pub struct Blocks {
    /// The commands of `console` blocks to run.
    pub run: Vec<Example>,
    /// `file:line` of each block marked as not run, and why.
    pub not_run: Vec<(String, String)>,
    /// `file:line` of each block marked as run by a test, and the test.
    pub run_by: Vec<(String, String)>,
    /// The lines of the page's setup, run before each of its commands.
    pub setup: String,
    /// The `tickbox` invocations in blocks not run: `file:line`, the
    /// command, its flags.
    pub unrun_commands: Vec<(String, String, Vec<String>)>,
    /// `file:line` of each shell block (`sh`, `bash`, `shell`) neither a
    /// `console` block nor marked: an example nobody runs, unexplained.
    pub unmarked: Vec<String>,
}

/// The last line before line `i` that is not blank, trimmed: a block's
/// marker, if it has one.
fn marker_before<'a>(lines: &[&'a str], i: usize) -> Option<&'a str> {
    lines[..i]
        .iter()
        .rev()
        .find(|l| !l.trim().is_empty())
        .map(|l| l.trim())
}

/// The test a `<!-- run by TEST -->` marker names (`<!-- run by TEST, on
/// a terminal -->` too).
pub fn run_by_test(marker: &str) -> Option<&str> {
    marker
        .strip_prefix(RUN_BY)
        .and_then(|r| r.strip_suffix("-->"))
        .map(|r| r.trim().trim_end_matches(ON_A_TERMINAL))
}

/// The index of the fence that closes the block opened before `start`.
fn block_end(lines: &[&str], start: usize) -> usize {
    (start..lines.len())
        .find(|&j| lines[j].trim_end() == "```")
        .unwrap_or(lines.len())
}

/// The commands of a `console` block whose lines are `lines[start..end]`,
/// each with the output it shows.
pub fn session(
    shown: &str,
    lines: &[&str],
    start: usize,
    end: usize,
    serves: bool,
    registry: bool,
) -> Vec<Example> {
    let mut block: Vec<Example> = Vec::new();
    let mut i = start;
    while i < end {
        let line = lines[i];
        if let Some(cmd) = line.strip_prefix("$ ") {
            let mut command = cmd.to_string();
            let at = format!("{shown}:{}", i + 1);
            while command.ends_with('\\') && i + 1 < end {
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
                terminal: false,
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
    block.into_iter().map(trimmed).collect()
}

/// The examples of one page.
pub fn examples(shown: &str, text: &str, setup_by: &str) -> Blocks {
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
        let marker = marker_before(&lines, i);
        let not_run = marker
            .and_then(|l| l.strip_prefix(NOT_RUN))
            .map(|why| why.trim_end_matches("-->").trim());
        // A `console` block marked as run by this test is run as any other.
        let run_by = marker
            .and_then(run_by_test)
            .filter(|t| shell || *t != setup_by);
        let at = format!("{shown}:{}", i + 1);
        match (not_run, run_by) {
            (Some(why), _) => blocks.not_run.push((at, why.to_string())),
            (None, Some(test)) => blocks.run_by.push((at, test.to_string())),
            (None, None) if shell => blocks.unmarked.push(at),
            (None, None) => {}
        }
        let end = block_end(&lines, i + 1);
        if not_run.is_some() {
            for (j, line) in lines.iter().enumerate().take(end).skip(i + 1) {
                let at = format!("{shown}:{}", j + 1);
                blocks.unrun_commands.extend(
                    invocations(line)
                        .into_iter()
                        .map(|(c, f)| (at.clone(), c, f)),
                );
            }
        }
        if shell && run_by == Some(setup_by) {
            for line in &lines[i + 1..end] {
                blocks.setup.push_str(line);
                blocks.setup.push('\n');
            }
        }
        if !shell && not_run.is_none() && run_by.is_none() {
            let serves = marker == Some(SERVES);
            let registry = marker == Some(WITH_REGISTRY);
            blocks
                .run
                .extend(session(shown, &lines, i + 1, end, serves, registry));
        }
        i = end + 1;
    }
    blocks
}

/// What a page has the reader do, in its order.
#[derive(Debug)]
pub enum Step {
    Run(Example),
    /// A file to write (`path` relative to where the commands have got
    /// to) with `text`.
    Write {
        at: String,
        path: String,
        text: String,
    },
}

/// The commands of the `console` blocks of a page that are marked as run
/// by `test`, and the files the page has the reader write (a code block
/// after a line ending in "Replace `PATH` with:"), in the page's order.
pub fn steps(shown: &str, text: &str, test: &str) -> Vec<Step> {
    let lines: Vec<&str> = text.lines().collect();
    let mut steps = Vec::new();
    let mut i = 0;
    while i < lines.len() {
        let fence = lines[i].trim_end();
        let marker = marker_before(&lines, i);
        let write = marker
            .and_then(|l| l.rsplit_once("Replace `"))
            .map(|(_, r)| r)
            .and_then(|r| r.strip_suffix("` with:"));
        let end = block_end(&lines, i + 1);
        if fence == "```console" && marker.and_then(run_by_test) == Some(test) {
            let terminal = marker.is_some_and(|m| m.ends_with(&format!("{ON_A_TERMINAL} -->")));
            steps.extend(
                session(shown, &lines, i + 1, end, false, false)
                    .into_iter()
                    .map(|e| Step::Run(Example { terminal, ..e })),
            );
        } else if let (Some(path), true) = (write, fence.len() > 3 && fence.starts_with("```")) {
            steps.push(Step::Write {
                at: format!("{shown}:{}", i + 1),
                path: path.to_string(),
                text: lines[i + 1..end].join("\n") + "\n",
            });
        } else {
            i += 1;
            continue;
        }
        i = end + 1;
    }
    steps
}

/// The `tickbox` invocations on one shell line: each command with the
/// `--flags` given before a `--`, a `#` or the end of the command. A word
/// `tickbox` followed by something that is no command word (`&&`, `.lock`)
/// is not an invocation.
pub fn invocations(line: &str) -> Vec<(String, Vec<String>)> {
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
pub fn matches(shown: &[String], got: &[&str]) -> bool {
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

/// What a command printed, its exit code, and the directory it ended in.
pub struct Ran {
    pub code: i32,
    pub stdout: String,
    pub stderr: String,
    pub cwd: PathBuf,
}

/// `text` as one word of a shell command line.
pub fn quoted(text: &str) -> String {
    format!("'{}'", text.replace('\'', r"'\''"))
}

/// What is wrong with what a command printed, if anything, with
/// everything it printed.
pub fn differs(e: &Example, ran: &Ran) -> Option<String> {
    let got: Vec<&str> = ran.stdout.trim_end_matches('\n').lines().collect();
    (ran.code != e.code || !matches(&e.output, &got)).then(|| {
        format!(
            "{}: `{}`\n  expected exit {} and:\n{}\n  got exit {} and:\n{}\n  stderr:\n{}",
            e.at,
            e.command,
            e.code,
            e.output.join("\n"),
            ran.code,
            ran.stdout,
            ran.stderr
        )
    })
}
