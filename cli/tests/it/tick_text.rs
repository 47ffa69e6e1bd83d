//! Tick text as a type: one hostile corpus (`tests/ticks/corpus.py` puts
//! it in every string a Tick controls) through every sink a person or an
//! agent reads: one-shot command output (stdout and stderr), log lines
//! (`-v` and `tickbox mcp`'s default warnings), the `ls` table and
//! `tickbox test`'s reports (MCP results and listings decoded as a client
//! decodes them are tickbox-mcp's `tick_text` test). Each sink must
//! carry none of the corpus's characters raw (the one policy,
//! `text::is_unsafe`), and each must still carry the text, escaped (the
//! positive control: nothing was dropped to pass).

use crate::mcp_wire::Raw;
use crate::util::*;
use tickbox_runtime::text::is_unsafe;
/// Re-exported for the other sinks' tests.
pub(crate) use tickbox_test_support::shows_escaped;

fn corpus() -> Vec<String> {
    vec!["--".into(), "python3".into(), tick("corpus.py")]
}

/// Panics naming the sink and the first raw character, if any; line
/// breaks between lines are the sink's own.
pub(crate) fn assert_inert(sink: &str, s: &str) {
    assert_inert_by(sink, s, is_unsafe)
}

/// For log sinks, where each line is one event: no line the Tick began
/// (on a screen, the Tick's own line breaks are its drawing).
fn assert_no_forged_line(sink: &str, s: &str) {
    for line in s.lines() {
        assert!(
            !line.trim_start().starts_with("FORGED"),
            "{sink}: a forged line: {line:?}"
        );
    }
}

#[test]
fn one_hostile_corpus_reaches_no_sink_raw() {
    let tick = corpus();
    let with = |head: &[&str]| -> Vec<String> {
        let mut v: Vec<String> = head.iter().map(|s| s.to_string()).collect();
        v.extend(tick.iter().cloned());
        v
    };
    // One-shot commands: results on stdout, logs (-vv: where the Tick's
    // request and notification are logged) on stderr.
    for (args, code) in [
        (with(&["-vv", "describe"]), 0),
        (with(&["-vv", "read"]), 0),
        (with(&["screen"]), 0),
        (with(&["-v", "call", "echo", "{}"]), 0),
        (with(&["call", "fail", "{}"]), 1),
    ] {
        let out = tickbox(&args);
        assert_eq!(out.code, code, "{args:?}: {out:#?}");
        assert_inert(&format!("stdout of {args:?}"), &out.stdout);
        assert_inert(&format!("stderr of {args:?}"), &out.stderr);
        assert_no_forged_line(&format!("stderr of {args:?}"), &out.stderr);
        assert!(
            shows_escaped(&out.stdout) || shows_escaped(&out.stderr),
            "{args:?} shows the corpus escaped: {out:#?}"
        );
    }

    // MCP over stdio at its default log level (warnings: the Tick's
    // request is one), and the `ls` table of the live instance it
    // publishes (the frames, decoded as a client decodes them, are
    // tickbox-mcp's `tick_text` test).
    let state = TempDir::new("tick-text-live");
    let runtime = state.private_dir("run");
    let mut args = vec!["--name".to_string(), "corpus".into()];
    args.extend(tick.iter().cloned());
    let mut mcp = Raw::start_env(&args, &[("XDG_RUNTIME_DIR", runtime.as_path())]);
    mcp.initialize("2025-06-18");
    let ls = tickbox_env(&["ls"], &[("XDG_RUNTIME_DIR", runtime.to_str().unwrap())]);
    assert_eq!(ls.code, 0, "{ls:#?}");
    assert_inert("ls", &ls.stdout);
    assert!(
        ls.stdout.contains("corpus"),
        "the instance is listed: {ls:#?}"
    );
    let (code, stderr) = mcp.close();
    assert_eq!(code, 0, "{stderr}");
    assert_inert("tickbox mcp stderr", &stderr);
    assert_no_forged_line("tickbox mcp stderr", &stderr);
    assert!(
        stderr.contains("ignoring a request") && shows_escaped(&stderr),
        "the Tick's request was logged, escaped: {stderr}"
    );

    // Reports of `tickbox test`, in every format: the scenario's name is
    // the corpus (text from a file), and a failing step quotes the Tick's
    // result (text from the Tick).
    let dir = TempDir::new("tick-text-report");
    let file = dir.0.join("corpus.scenario.toml");
    write_corpus_scenario(&file);
    for format in ["text", "json", "junit"] {
        let f = file.to_string_lossy().into_owned();
        let out = tickbox(&["test", &f, "--allow-native", "--format", format]);
        assert_eq!(out.code, 1, "the step fails ({format}): {out:#?}");
        assert_inert(&format!("{format} report"), &out.stdout);
        assert_inert(&format!("stderr of the {format} report"), &out.stderr);
        if format != "json" {
            assert_no_forged_line(&format!("{format} report"), &out.stdout);
        }
        assert!(
            shows_escaped(&out.stdout),
            "{format} report shows the corpus escaped: {out:#?}"
        );
    }
}

/// A manifest's values are the Tick author's text too: through every sink
/// of consent (the refusal line, `tickbox trust`'s listing and record,
/// `trust ls`, `info`'s `requested`), none raw, each escaped. The prompt
/// on a terminal is `consent::the_prompt_shows_hostile_manifest_text_inert_and_no_stores_nothing`.
#[test]
fn a_hostile_manifest_reaches_no_consent_sink_raw() {
    let dir = TempDir::new("tick-text-manifest");
    let wasm = dir.path("asker.wasm");
    std::fs::copy(hostile(), &wasm).unwrap();
    let w = wasm.to_str().unwrap();
    let manifest = dir.path("asker.tick.toml");
    let value = toml_escaped(CORPUS_SAMPLE);
    std::fs::write(
        &manifest,
        format!("env = [\"GREETING={value}\"]\ndir = [\"/data{value}\"]\n"),
    )
    .unwrap();
    let trust = dir.path("trust");
    let env = [("TICKBOX_TRUST_DIR", trust.to_str().unwrap())];
    let sinks = |what: &str, out: &Output, json: bool| {
        assert_inert(&format!("{what} stdout"), &out.stdout);
        assert_inert(&format!("{what} stderr"), &out.stderr);
        assert_no_forged_line(&format!("{what} stderr"), &out.stderr);
        let shown = if json { &out.stdout } else { &out.stderr };
        assert!(
            shows_escaped(shown),
            "{what} shows the text escaped: {out:#?}"
        );
    };
    let refused = tickbox_env(&["read", w], &env);
    assert_eq!(refused.code, 2, "{refused:#?}");
    sinks("the refusal", &refused, false);
    let trusted = tickbox_env(&["trust", w], &env);
    assert_eq!(trusted.code, 0, "{trusted:#?}");
    sinks("tickbox trust", &trusted, false);
    sinks("tickbox trust's record", &trusted, true);
    let ls = tickbox_env(&["trust", "ls"], &env);
    assert_eq!(ls.code, 0, "{ls:#?}");
    sinks("trust ls", &ls, true);
    let info = tickbox_env(&["info", w], &env);
    assert_eq!(info.code, 0, "{info:#?}");
    sinks("info", &info, true);
    // Asking for more: the difference is quoted in the refusal.
    std::fs::write(
        &manifest,
        format!("env = [\"GREETING={value}\", \"OTHER={value}\"]\ndir = [\"/data{value}\"]\n"),
    )
    .unwrap();
    let more = tickbox_env(&["read", w], &env);
    assert_eq!(more.code, 2, "{more:#?}");
    assert!(more.stderr.contains("asks for more"), "{more:#?}");
    sinks("the refusal of more", &more, false);
}

/// The corpus of `corpus.py`, as a scenario file's author would write it.
pub(crate) const CORPUS_SAMPLE: &str = "[\u{1b}]2;pwned-title\u{7}\u{1b}]52;c;cm0gLXJmIH4=\u{7}\u{9b}31m\u{7f}\r\nFORGED line\u{202e}\u{2066}\u{200b}\u{ad}\u{34f}\u{115f}\u{3164}\u{fe0f}\u{2028}\u{e0041}]";

/// A TOML basic string's content with every character outside printable
/// ASCII as a `\UXXXXXXXX` escape.
pub(crate) fn toml_escaped(s: &str) -> String {
    s.chars()
        .map(|c| match c {
            '"' | '\\' => format!("\\{c}"),
            ' '..='~' => c.to_string(),
            c => format!("\\U{:08X}", c as u32),
        })
        .collect()
}

/// A scenario named by the corpus whose one step fails quoting the
/// corpus Tick's result: text from a file and from the Tick in one report.
pub(crate) fn write_corpus_scenario(file: &std::path::Path) {
    std::fs::write(
        file,
        format!(
            "name = \"{}\"\n[tick]\ncommand = [\"python3\", {:?}]\n\n\
             [[step]]\ncall = \"echo\"\nresult = {{ said = \"something else\" }}\n",
            toml_escaped(CORPUS_SAMPLE),
            crate::util::tick("corpus.py"),
        ),
    )
    .unwrap();
}
