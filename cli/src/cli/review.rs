//! `tickbox test review`: the pending snapshots (`NAME.snap.new`, written
//! when a screen did not match), one at a time: the diff, then accept
//! (it becomes `NAME.snap`), reject (it goes) or skip; and the `.snap`
//! files no scenario refers to any more.

use super::exit::Exit;
use clap::Args;
use std::collections::BTreeSet;
use std::io::{BufRead, IsTerminal, Write};
use std::path::{Path, PathBuf};
use tickbox_runtime::scenario::{self, Policy, MAX_SNAPSHOT_BYTES};

#[derive(Args)]
pub struct ReviewArgs {
    /// Scenario files, or directories searched for *.scenario.toml
    #[arg(value_name = "FILE|DIR", required = true)]
    pub paths: Vec<PathBuf>,
    /// Accept every pending snapshot without asking
    #[arg(long, conflicts_with = "reject")]
    pub accept: bool,
    /// Reject every pending snapshot without asking
    #[arg(long)]
    pub reject: bool,
}

enum Answer {
    Accept,
    Reject,
    Skip,
}

/// Runs the review; prints what it did (and each diff) on stdout.
pub fn run(args: ReviewArgs) -> Result<(), Exit> {
    let files = scenario::discover(&args.paths).map_err(Exit::usage)?;
    let mut referenced = BTreeSet::new();
    let mut dirs = BTreeSet::new();
    let mut unreadable = Vec::new();
    for f in &files {
        dirs.insert(f.parent().unwrap_or(Path::new(".")).to_path_buf());
        // No variable is read: a snapshot's path never depends on one.
        match scenario::load(f, &Policy::default()) {
            Ok(s) => referenced.extend(s.snapshots()),
            Err(e) => unreadable.push(format!("{}: {}", f.display(), e.message)),
        }
    }
    let mut pending = Vec::new();
    let mut snaps = Vec::new();
    for d in &dirs {
        let Ok(entries) = std::fs::read_dir(d) else {
            continue;
        };
        let mut names: Vec<PathBuf> = entries.flatten().map(|e| e.path()).collect();
        names.sort();
        for p in names {
            let name = p
                .file_name()
                .map(|n| n.to_string_lossy().into_owned())
                .unwrap_or_default();
            if name.ends_with(".snap.new") {
                pending.push(p);
            } else if name.ends_with(".snap") {
                snaps.push(p);
            }
        }
    }
    let interactive = !args.accept && !args.reject && std::io::stdin().is_terminal();
    if !pending.is_empty() && !interactive && !args.accept && !args.reject {
        let mut lines: Vec<String> = pending
            .iter()
            .map(|p| format!("pending: {}", p.display()))
            .collect();
        lines.push(format!(
            "{} pending: review {} on a terminal, or pass --accept or --reject",
            match pending.len() {
                1 => "1 snapshot".to_string(),
                n => format!("{n} snapshots"),
            },
            if pending.len() == 1 { "it" } else { "them" }
        ));
        super::emit_text(&lines.join("\n"))?;
        return Err(Exit::new(
            super::exit::SCENARIO_FAILED,
            match pending.len() {
                1 => "test review: 1 snapshot pending".to_string(),
                n => format!("test review: {n} snapshots pending"),
            },
        ));
    }
    let (mut accepted, mut rejected, mut skipped) = (0, 0, 0);
    for new in &pending {
        let snap = PathBuf::from(new.to_string_lossy().trim_end_matches(".new"));
        let read = |p: &Path| scenario::read_regular(p, MAX_SNAPSHOT_BYTES);
        let proposed = read(new).map_err(|e| Exit::session(format!("{}: {e}", new.display())))?;
        let old = read(&snap).ok();
        let answer = if args.accept {
            Answer::Accept
        } else if args.reject {
            Answer::Reject
        } else {
            let mut shown = vec![match &old {
                Some(_) => format!("{} (- snapshot, + new screen):", snap.display()),
                None => format!("{} (new):", snap.display()),
            }];
            shown.extend(scenario::screen_diff(
                old.as_deref().unwrap_or(""),
                &proposed,
            ));
            super::emit_text(&shown.join("\n"))?;
            ask()?
        };
        match answer {
            Answer::Accept => {
                scenario::write_regular(&snap, &proposed)
                    .and_then(|_| scenario::remove_regular(new))
                    .map_err(|e| Exit::session(e.to_string()))?;
                accepted += 1;
                super::emit_text(&format!("accepted {}", snap.display()))?;
            }
            Answer::Reject => {
                scenario::remove_regular(new).map_err(|e| Exit::session(e.to_string()))?;
                rejected += 1;
                super::emit_text(&format!("rejected {}", new.display()))?;
            }
            Answer::Skip => skipped += 1,
        }
    }
    let mut tail: Vec<String> = snaps
        .iter()
        .filter(|s| !referenced.contains(*s))
        .map(|s| {
            format!(
                "unreferenced: {} (no scenario compares the screen with it)",
                s.display()
            )
        })
        .collect();
    tail.extend(
        unreadable
            .into_iter()
            .map(|u| format!("not read (its snapshots are not known): {u}")),
    );
    tail.push(format!(
        "review: {accepted} accepted, {rejected} rejected, {skipped} skipped, {} pending before",
        pending.len()
    ));
    super::emit_text(&tail.join("\n"))
}

/// Asks on the terminal: a, r or s (anything else asks again).
fn ask() -> Result<Answer, Exit> {
    let stdin = std::io::stdin();
    loop {
        eprint!("[a]ccept, [r]eject, [s]kip? ");
        let _ = std::io::stderr().flush();
        let mut line = String::new();
        if stdin
            .lock()
            .read_line(&mut line)
            .map_err(|e| Exit::session(e.to_string()))?
            == 0
        {
            return Ok(Answer::Skip);
        }
        match line.trim() {
            "a" | "accept" => return Ok(Answer::Accept),
            "r" | "reject" => return Ok(Answer::Reject),
            "s" | "skip" | "" => return Ok(Answer::Skip),
            _ => continue,
        }
    }
}
