//! The counter of the protocol's Appendix A, written with tickbox-guest.
//!
//! A person presses `+` or `-` in the view; an Agent calls `increment`. Both
//! change the same value, and every change becomes one `tick/update`.
//! `history` is the `recover_with` tool: subscriptions deliver only the
//! latest state, so a client that missed changes reads them there.
//!
//! Run it sandboxed: `tickbox call counter.wasm increment '{"amount":2}' --yes`

use tickbox_guest::prelude::*;

/// How many changes `history` keeps.
const HISTORY: usize = 256;
/// How many of them the state carries: state should stay a few KiB (§6.4).
const IN_STATE: usize = 32;

#[derive(Default)]
struct Counter {
    value: i64,
    /// Numbers the changes. It matches the state's seq while each change is
    /// its own update: keys pasted in one read are one update (the SDK looks
    /// at the state once per read), so then it runs ahead.
    changes: u64,
    history: Vec<Change>,
}

#[derive(Serialize, Clone)]
struct Change {
    seq: u64,
    value: i64,
}

/// Arguments of `increment`. A plain struct with one integer gives the
/// schema of Appendix A: `{"type":"object","properties":{"amount":
/// {"type":"integer"}},"required":["amount"],"additionalProperties":false}`.
#[derive(Deserialize, JsonSchema)]
struct Increment {
    amount: i64,
}

impl Counter {
    /// The one place the value changes, for keys and tools alike.
    fn change(&mut self, by: i64) -> i64 {
        self.value += by;
        self.changes += 1;
        self.history.push(Change {
            seq: self.changes,
            value: self.value,
        });
        if self.history.len() > HISTORY {
            self.history.remove(0);
        }
        self.value
    }

    fn increment(&mut self, args: Increment, _: &mut Ctx) -> Result<Value, ToolError> {
        if self.value.checked_add(args.amount).is_none() {
            // Refused before anything changed, so "not executed" is true.
            return Err(ToolError::rejected("the counter would overflow"));
        }
        Ok(json!({ "value": self.change(args.amount) }))
    }

    fn history(&mut self, _: NoArgs, _: &mut Ctx) -> Result<Value, ToolError> {
        Ok(json!({ "recent": self.history }))
    }
}

impl Tick for Counter {
    const KIND: &'static str = "example.counter";
    const TITLE: &'static str = "Counter";
    const DESCRIPTION: &'static str = "Keyboard and tool calls share one value.";
    const RECOVER_WITH: Option<&'static str> = Some("history");
    const SERIES: &'static [Series] = &[Series::newest_last("/recent")];

    fn state(&self) -> impl Serialize {
        let start = self.history.len().saturating_sub(IN_STATE);
        json!({ "value": self.value, "recent": &self.history[start..] })
    }

    fn tools(&self, tools: &mut Tools<Self>) {
        tools
            .add(
                "increment",
                "Add an integer to the counter.",
                Effect::Mutates,
                Self::increment,
            )
            .add(
                "history",
                "Read the last 256 changes.",
                Effect::ReadOnly,
                Self::history,
            );
    }

    fn on_key(&mut self, key: Key, _: &mut Ctx) {
        match key {
            Key::Char('+') => {
                self.change(1);
            }
            Key::Char('-') => {
                self.change(-1);
            }
            _ => {}
        }
    }

    fn view(&self, frame: &mut Frame) {
        let text = vec![
            Line::from(vec!["Counter: ".into(), self.value.to_string().bold()]),
            Line::from(""),
            Line::from("[+] add one  [-] subtract one".dim()),
        ];
        let block = Block::default().borders(Borders::ALL).title(" Counter ");
        frame.render_widget(Paragraph::new(text).block(block), frame.area());
    }
}

tickbox_guest::main!(Counter);
