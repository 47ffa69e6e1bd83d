//! # tickbox-guest: write a Tick in Rust
//!
//! A Tick is a terminal program that a person uses in a view while an Agent
//! reads its state and calls its tools over stdin/stdout (Tick protocol 3).
//! With this crate you write the business logic (state, tools, keys, a
//! ratatui view) as one [`Tick`] impl, and [`main!`] wires it up. The same
//! source builds as a native binary and for `wasm32-wasip2`, where tickbox
//! runs it sandboxed.
//!
//! ```no_run
//! use tickbox_guest::prelude::*;
//!
//! #[derive(Default)]
//! struct Counter {
//!     value: i64,
//! }
//!
//! /// Arguments of `increment`: doc comments become schema descriptions.
//! #[derive(Deserialize, JsonSchema)]
//! struct Increment {
//!     /// How much to add (negative to subtract).
//!     amount: i64,
//! }
//!
//! impl Tick for Counter {
//!     const KIND: &'static str = "example.counter";
//!     const TITLE: &'static str = "Counter";
//!     const DESCRIPTION: &'static str = "Keyboard and tool calls share one value.";
//!
//!     // The business state: every change becomes one tick/update.
//!     fn state(&self) -> impl Serialize {
//!         json!({ "value": self.value })
//!     }
//!
//!     fn tools(&self, tools: &mut Tools<Self>) {
//!         tools.add("increment", "Add an integer to the counter.", Effect::Mutates,
//!             |c: &mut Counter, a: Increment, _ctx: &mut Ctx| {
//!                 c.value += a.amount;
//!                 Ok(json!({ "value": c.value }))
//!             });
//!     }
//!
//!     fn on_key(&mut self, key: Key, _ctx: &mut Ctx) {
//!         match key {
//!             Key::Char('+') => self.value += 1,
//!             Key::Char('-') => self.value -= 1,
//!             _ => {}
//!         }
//!     }
//!
//!     fn view(&self, frame: &mut Frame) {
//!         let text = format!("Counter: {}\n[+] add one  [-] subtract one", self.value);
//!         frame.render_widget(Paragraph::new(text), frame.area());
//!     }
//! }
//!
//! tickbox_guest::main!(Counter);
//! ```
//!
//! Build it with `cargo build --target wasm32-wasip2` and run it with
//! `tickbox call target/wasm32-wasip2/debug/counter.wasm increment '{"amount":2}' --yes`.
//!
//! ## What the SDK does for you
//!
//! Everything the protocol asks of a Tick (see `dispatch` for the details):
//! newline framing, every frame written whole (in wasm, the answers to the
//! requests of one read in one write); exactly one response per
//! request and never `id: null`; `tick/describe` from [`Tick::KIND`] and
//! friends plus the tools' schemas; `seq` and `tick/update` whenever
//! [`Tick::state`] serializes differently (and only then); the 512 KiB limit
//! checked before anything is sent, with a message naming the rule;
//! revision checks (-32004), unknown tools and invalid arguments (-32602),
//! unknown methods (-32601); a new revision whenever [`Tick::tools`] yields
//! a different catalog; one event loop over protocol input, keys, resizes
//! and timers; and a ratatui view redrawn after every event and resize
//! (after a read-only call only when something changed, or the tool called
//! [`Ctx::redraw`]).
//!
//! ## Rules for authors
//!
//! - **Never print to stdout.** Stdout carries the protocol; one stray line
//!   ends the session. `println!` is the classic mistake. Natively the SDK
//!   moves stdout aside at startup, so stray prints land in the view instead;
//!   in wasm it cannot, so a stray print corrupts the protocol. Use [`log!`],
//!   which writes a line to stderr (the view).
//! - **Tell the truth about effects.** [`Effect`] is a required argument of
//!   every tool; pick [`Effect::Mutates`] if a call can change anything,
//!   including the Tick's own state.
//! - **Keep handlers short.** One thread runs everything, so a slow handler
//!   delays `tick/read`. Work that takes long (more than the host's 60 s call
//!   timeout in particular, §7.3) starts from a tool that returns at once,
//!   continues in [`Tick::on_timer`] steps, and reports through state.
//! - **Return the right error.** [`ToolError::rejected`] means "nothing
//!   happened"; [`ToolError::failed`] (and `?`) means "may have had effects".
//! - **Panics end the Tick.** The SDK's panic hook writes the panic to
//!   stderr (the view) and exits with status 101; a half-applied change is
//!   never left running.
//!
//! ## Platforms
//!
//! - `wasm32-wasip2`: stdin/stdout are WASI streams, the view is tickbox's
//!   `terminal` interface (`wit/terminal.wit`); the loop is one
//!   `wasi:io/poll` over stdin, keys, resize and a monotonic-clock timer.
//! - native (Unix): the view is the controlling terminal (`/dev/tty`, put in
//!   cbreak mode so keys arrive one at a time); threads feed stdin lines,
//!   keys and SIGWINCH into one channel; SIGTERM, SIGINT and SIGHUP restore
//!   the terminal and exit. Without a controlling terminal the Tick runs
//!   headless: no view, no keys.

mod catalog;
mod ctx;
mod dispatch;
mod draw;
#[doc(hidden)]
pub mod fuzzing;
pub mod http;
mod key;
mod platform;

pub use catalog::{schema_for, Effect, NoArgs, ToolError, Tools};
pub use ctx::{Ctx, TimerId};
pub use dispatch::{MAX_ENCODED, PROTOCOL};
pub use draw::AnsiBackend;
pub use key::Key;
pub use ratatui;
pub use schemars;
pub use serde;
pub use serde_json;

use ratatui::Frame;
use serde::Serialize;

/// Everything an author usually needs, in one `use`.
pub mod prelude {
    pub use crate::{log, Ctx, Effect, Key, NoArgs, Series, Tick, TimerId, ToolError, Tools};
    pub use ratatui::layout::{Constraint, Layout, Rect};
    pub use ratatui::style::{Color, Modifier, Style, Stylize};
    pub use ratatui::text::{Line, Span, Text};
    pub use ratatui::widgets::{Block, Borders, List, ListItem, Paragraph, Sparkline, Wrap};
    pub use ratatui::Frame;
    pub use schemars::JsonSchema;
    pub use serde::{Deserialize, Serialize};
    pub use serde_json::{json, Value};
}

/// Which end of a series holds its newest element.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Newest {
    First,
    Last,
}

/// A chronological array in the state (§5.2 `state.series`), so hosts that
/// trim state keep its newest end.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Series {
    /// A JSON Pointer into the state: `""` or starting with `/`.
    pub path: &'static str,
    pub newest: Newest,
}

impl Series {
    /// A series whose newest element is last (appended to).
    pub const fn newest_last(path: &'static str) -> Series {
        Series {
            path,
            newest: Newest::Last,
        }
    }

    /// A series whose newest element is first (prepended to).
    pub const fn newest_first(path: &'static str) -> Series {
        Series {
            path,
            newest: Newest::First,
        }
    }
}

/// A Tick: declarations, state, tools, and how it reacts and looks.
///
/// Only the constants and [`Tick::state`] are required. Every method runs on
/// the SDK's one thread, after which the SDK compares state and catalog and
/// redraws (after an [`Effect::ReadOnly`] tool only when the state or the
/// catalog changed, or the tool called [`Ctx::redraw`]).
pub trait Tick: Sized + 'static {
    /// What the program is, lowercase and dotted with the publisher first,
    /// e.g. `example.counter` (§5.4).
    const KIND: &'static str;
    /// A short name shown to people and models.
    const TITLE: &'static str;
    /// One or two sentences on what the Tick shows and does.
    const DESCRIPTION: &'static str;
    /// A read-only tool that rebuilds what latest-only delivery dropped (§9).
    const RECOVER_WITH: Option<&'static str> = None;
    /// The chronological arrays in the state.
    const SERIES: &'static [Series] = &[];

    /// The complete business state: no cursor, scroll or colours (§6.4).
    /// Serializing to `null` means "no content yet". Keep it to a few KiB.
    fn state(&self) -> impl Serialize;

    /// Declares the current tools. May depend on `self`: a different
    /// catalog gets a new revision automatically.
    fn tools(&self, tools: &mut Tools<Self>) {
        let _ = tools;
    }

    /// Runs once before the first request: set timers here.
    fn on_start(&mut self, ctx: &mut Ctx) {
        let _ = ctx;
    }

    /// A key typed in a view. The keys that arrive in one read (a paste, a
    /// fast typist) are handled together: `on_key` runs for each, then the
    /// state is looked at once, so they make at most one update.
    fn on_key(&mut self, key: Key, ctx: &mut Ctx) {
        let _ = (key, ctx);
    }

    /// A timer set with [`Ctx::every`] or [`Ctx::after`] fired.
    fn on_timer(&mut self, timer: TimerId, ctx: &mut Ctx) {
        let _ = (timer, ctx);
    }

    /// Draws the view. The default shows the title and the state as JSON.
    fn view(&self, frame: &mut Frame) {
        let state = serde_json::to_string_pretty(&self.state()).unwrap_or_default();
        let text = format!("{}\n\n{state}", Self::TITLE);
        frame.render_widget(ratatui::widgets::Paragraph::new(text), frame.area());
    }
}

/// Writes one line to stderr, which is the Tick's view (never stdout).
///
/// The line shows on the screen until the view repaints over it, so it is
/// meant for occasional diagnostics; keep detailed logs in a file.
#[macro_export]
macro_rules! log {
    ($($arg:tt)*) => {
        $crate::__log(::core::format_args!($($arg)*))
    };
}

#[doc(hidden)]
pub fn __log(args: std::fmt::Arguments<'_>) {
    use std::io::Write;
    // "\r\n": the terminal is in cbreak mode natively, where a bare "\n"
    // would not return to column 0. One write keeps the line whole.
    let line = format!("{args}\r\n");
    let _ = std::io::stderr().lock().write_all(line.as_bytes());
    // The line moved the view's cursor: the next frame places it again.
    draw::note_foreign_write();
}

/// Defines `main` for a Tick: `main!(Counter)` starts `Counter::default()`;
/// `main!(Notes, Notes::open())` starts the given value.
#[macro_export]
macro_rules! main {
    ($tick:ty) => {
        $crate::main!($tick, <$tick as ::core::default::Default>::default());
    };
    ($tick:ty, $init:expr) => {
        fn main() {
            $crate::__run::<$tick>(|| $init)
        }
    };
}

#[doc(hidden)]
pub fn __run<T: Tick>(init: impl FnOnce() -> T) {
    install_panic_hook(T::KIND);
    // Natively, stdout is moved aside before any author code runs, so a
    // stray print cannot corrupt the protocol.
    let io = platform::Io::take();
    let tick = init();
    platform::run(tick, io)
}

fn install_panic_hook(kind: &'static str) {
    std::panic::set_hook(Box::new(move |info| {
        platform::restore_terminal();
        crate::__log(format_args!("\r\n{kind}: the Tick panicked: {info}"));
        // Exiting here, before unwinding, means no half-handled request
        // goes on and nothing more reaches stdout. 101 is Rust's panic status.
        std::process::exit(101);
    }));
}

#[cfg(test)]
mod tests;
