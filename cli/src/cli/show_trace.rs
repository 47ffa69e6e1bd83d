//! `tickbox test show-trace FILE`: a trace written by `tickbox test
//! --trace`, replayed step by step: each step's outcome, the screen after
//! it, the state and the protocol frames during it.
//!
//! A trace file is untrusted input (it may have been edited by hand, or
//! come from someone else's CI): it is read with the walls of scenario
//! files (a regular file, never through a symbolic link, at most
//! `MAX_TRACE_BYTES`), a file that is not a trace is refused with one line
//! naming the file and the rule, never its content, and everything printed
//! from it is escaped with the one character policy (the parsed trace
//! carries its strings as `TickText`).

use super::exit::Exit;
use clap::Args;
use std::io::{BufRead, IsTerminal, Write};
use std::path::PathBuf;
use tickbox_runtime::scenario::{self, trace, FileError};

#[derive(Args)]
pub struct ShowTraceArgs {
    /// A trace (NAME.trace.cast, written by `tickbox test --trace`)
    #[arg(value_name = "FILE")]
    pub file: PathBuf,
    /// Print every step without waiting for Enter [the default off a terminal]
    #[arg(long, conflicts_with = "step")]
    pub all: bool,
    /// Print only step N (0 is the start)
    #[arg(long, value_name = "N")]
    pub step: Option<u64>,
}

/// Prints the trace; on a terminal, one step at a time.
pub fn run(args: ShowTraceArgs) -> Result<(), Exit> {
    let shown = args.file.display().to_string();
    let text = scenario::read_regular(&args.file, trace::MAX_TRACE_BYTES as u64).map_err(|e| {
        Exit::usage(match e {
            FileError::Symlink(_) => {
                format!("{shown} is a symbolic link; a trace is never read through one")
            }
            e => e.to_string(),
        })
    })?;
    let view = trace::parse(&text).map_err(|e| Exit::usage(format!("{shown}: {e}")))?;
    let steps: Vec<&trace::TraceStep> = match args.step {
        None => view.steps.iter().collect(),
        Some(n) => {
            let one: Vec<_> = view.steps.iter().filter(|s| s.step == n).collect();
            if one.is_empty() {
                return Err(Exit::usage(format!(
                    "{shown} has no step {n} (it has {} records: see --all)",
                    view.steps.len()
                )));
            }
            one
        }
    };
    let interactive = !args.all
        && args.step.is_none()
        && std::io::stdin().is_terminal()
        && std::io::stdout().is_terminal();
    super::emit_text(&view.heading().join("\n"))?;
    for (i, s) in steps.iter().enumerate() {
        super::emit_text(&s.lines().join("\n"))?;
        if interactive && i + 1 < steps.len() && !next()? {
            break;
        }
    }
    if let Some(why) = &view.cut {
        super::emit_text(&format!("cut: {why}"))?;
    }
    Ok(())
}

/// Waits for Enter (next step) or q (quit) on the terminal; end of input quits.
fn next() -> Result<bool, Exit> {
    eprint!("-- Enter: next step, q: quit -- ");
    let _ = std::io::stderr().flush();
    let mut line = String::new();
    let read = std::io::stdin()
        .lock()
        .read_line(&mut line)
        .map_err(|e| Exit::session(e.to_string()))?;
    Ok(read > 0 && !matches!(line.trim(), "q" | "quit"))
}
