//! `tickbox`: run Ticks from the shell.
//!
//! Each command starts the Tick, initializes it, does one thing and shuts it
//! down. Stdout carries only the command's JSON result (or the screen text for
//! `screen`); everything else goes to stderr. See `tickbox --help` for the
//! exit codes, which `cli::exit` defines.

// The commands' doc comments are their `--help` text (clap), written for
// a terminal: `[ARGS]` there is usage syntax, not a rustdoc link.
#![allow(rustdoc::broken_intra_doc_links)]

mod cli;

fn main() -> std::process::ExitCode {
    cli::main()
}
