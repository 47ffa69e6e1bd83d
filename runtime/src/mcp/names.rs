//! MCP tool names for Tick tools and the facade's own tools.
//!
//! MCP clients accept tool names matching `^[A-Za-z0-9_.-]{1,64}$`; a Tick's
//! tool name is any non-empty string. The mapping is deterministic:
//!
//! - every character outside `A-Z a-z 0-9 _ . -` becomes `_`;
//! - with several Ticks, the name is prefixed with the Tick's name and `_`
//!   (`counter_increment`);
//! - a name longer than 64 characters is refused, never truncated;
//! - two tools that end up with the same name are a clash, refused at start.
//!
//! A catalog that changes while the server runs cannot be refused any more:
//! its offending tools are left out of the listing and logged instead
//! ([`map_tools`] returns them as errors alongside the names that work).

use crate::protocol::Descriptor;
use std::collections::HashMap;

/// The longest tool name MCP clients accept.
pub const MAX_TOOL_NAME: usize = 64;

/// The facade tool that returns a Tick's state.
pub const STATE_TOOL: &str = "tick_state";
/// The facade tool that returns a Tick's screen as text.
pub const SCREEN_TOOL: &str = "tick_screen";

/// A tool name that cannot be offered to MCP clients.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[non_exhaustive]
pub enum NameError {
    /// The mapped name is longer than MCP allows.
    #[error("tool `{tool}` of Tick `{tick}` maps to `{mapped}`, {len} characters; MCP allows at most {MAX_TOOL_NAME}")]
    TooLong {
        tick: String,
        tool: String,
        mapped: String,
        len: usize,
    },
    /// Two tools map to the same name.
    #[error("tool name clash: `{mapped}` would name both {first} and {second}; rename a Tick in the config so their prefixes differ")]
    Clash {
        mapped: String,
        first: String,
        second: String,
    },
}

/// What an MCP tool name stands for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Target {
    /// A tool of the Tick's catalog, by its Tick name.
    Tick(String),
    /// The facade's state tool.
    State,
    /// The facade's screen tool.
    Screen,
}

/// One MCP tool: its name, the Tick it belongs to (an index) and its target.
#[derive(Debug, Clone, PartialEq)]
pub struct Mapped {
    /// The name MCP clients see.
    pub name: String,
    /// Index of the Tick in the hosted list.
    pub tick: usize,
    /// What a call to it does.
    pub target: Target,
}

/// Whether a name is a valid MCP tool name.
pub fn is_valid(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= MAX_TOOL_NAME
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'.' | b'-'))
}

/// Replaces every character MCP does not allow in a tool name with `_`.
pub fn sanitize(name: &str) -> String {
    name.chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || matches!(c, '_' | '.' | '-') {
                c
            } else {
                '_'
            }
        })
        .collect()
}

/// Maps the tools of every hosted Tick (name, catalog) to MCP names, in
/// order: each Tick's own tools, then its state and screen tools. Prefixes
/// are used when `prefixed`. Returns the usable names and, separately, the
/// tools that could not be named (too long, or clashing with an earlier one).
pub fn map_tools(ticks: &[(&str, &Descriptor)], prefixed: bool) -> (Vec<Mapped>, Vec<NameError>) {
    let mut out: Vec<Mapped> = Vec::new();
    let mut errors = Vec::new();
    let mut owner: HashMap<String, String> = HashMap::new();
    for (index, (tick, descriptor)) in ticks.iter().enumerate() {
        let prefix = if prefixed {
            format!("{}_", sanitize(tick))
        } else {
            String::new()
        };
        let targets = descriptor
            .tools
            .iter()
            .map(|t| (t.name.clone(), Target::Tick(t.name.clone())))
            .chain([
                (STATE_TOOL.to_string(), Target::State),
                (SCREEN_TOOL.to_string(), Target::Screen),
            ]);
        for (tool, target) in targets {
            let mapped = format!("{prefix}{}", sanitize(&tool));
            let what = match target {
                Target::Tick(_) => format!("tool `{tool}` of Tick `{tick}`"),
                _ => format!("the facade tool `{tool}` of Tick `{tick}`"),
            };
            if mapped.len() > MAX_TOOL_NAME {
                errors.push(NameError::TooLong {
                    tick: tick.to_string(),
                    tool,
                    len: mapped.len(),
                    mapped,
                });
                continue;
            }
            if let Some(first) = owner.get(&mapped) {
                errors.push(NameError::Clash {
                    mapped,
                    first: first.clone(),
                    second: what,
                });
                continue;
            }
            owner.insert(mapped.clone(), what);
            out.push(Mapped {
                name: mapped,
                tick: index,
                target,
            });
        }
    }
    (out, errors)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn catalog(tools: &[&str]) -> Descriptor {
        let tools: Vec<_> = tools
            .iter()
            .map(|n| json!({"name": n, "description": "", "input_schema": {"type": "object"}, "mutates": false}))
            .collect();
        Descriptor::parse(
            json!({"protocol": 3, "kind": "k", "title": "T", "description": "",
            "revision": "1", "tools": tools}),
        )
        .unwrap()
    }

    fn names(m: &[Mapped]) -> Vec<&str> {
        m.iter().map(|m| m.name.as_str()).collect()
    }

    #[test]
    fn one_tick_keeps_its_names_and_gets_facade_tools() {
        let d = catalog(&["increment", "history"]);
        let (m, e) = map_tools(&[("counter", &d)], false);
        assert!(e.is_empty(), "{e:?}");
        assert_eq!(
            names(&m),
            ["increment", "history", "tick_state", "tick_screen"]
        );
        assert_eq!(m[0].target, Target::Tick("increment".into()));
    }

    #[test]
    fn several_ticks_are_prefixed_and_invalid_characters_replaced() {
        let a = catalog(&["add item", "ok"]);
        let b = catalog(&["ok"]);
        let (m, e) = map_tools(&[("a", &a), ("b", &b)], true);
        assert!(e.is_empty(), "{e:?}");
        assert_eq!(
            names(&m),
            [
                "a_add_item",
                "a_ok",
                "a_tick_state",
                "a_tick_screen",
                "b_ok",
                "b_tick_state",
                "b_tick_screen"
            ]
        );
        assert!(m.iter().all(|m| is_valid(&m.name)));
        assert_eq!(m[0].target, Target::Tick("add item".into()));
    }

    #[test]
    fn clashes_and_long_names_are_reported() {
        let a = catalog(&["x y", "x_y", "tick_state", &"n".repeat(65)]);
        let (m, e) = map_tools(&[("a", &a)], false);
        assert_eq!(names(&m), ["x_y", "tick_state", "tick_screen"]);
        assert_eq!(e.len(), 3, "{e:?}");
        assert!(e[0].to_string().contains("clash: `x_y`"), "{}", e[0]);
        assert!(e[1].to_string().contains("at most 64"), "{}", e[1]);
        assert!(
            e[2].to_string().contains("facade tool `tick_state`"),
            "{}",
            e[2]
        );
    }
}
