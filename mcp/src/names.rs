//! MCP tool names for Tick tools and the facade's own tools.
//!
//! MCP clients accept tool names matching `^[A-Za-z0-9_.-]{1,64}$`; a Tick's
//! tool name is any non-empty string. The mapping is deterministic:
//!
//! - every character outside `A-Z a-z 0-9 _ . -` becomes `_`;
//! - with several Ticks, the name is prefixed with the Tick's name and `_`
//!   (`counter_increment`);
//! - a name longer than 64 characters is refused, never truncated;
//! - two tools that end up with the same name are a clash, refused at start;
//! - the facade's own tools (`tick_state`, `tick_screen`, prefixed like the
//!   rest) are named first: a Tick tool of that name is a clash.
//!
//! A catalog that changes while the server runs is held to the same rules:
//! a Tick whose new catalog has a name that is too long or clashes (with
//! the facade's tools, another Tick's names, or itself) has all its own
//! tools withheld from the listing, and the reason is logged and shown in
//! its `tick_state` tool's description ([`Mapping::withheld`]).

use std::collections::HashMap;
use tickbox_protocol::Descriptor;

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
#[cfg(test)]
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

/// The MCP names of every hosted Tick's tools.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Mapping {
    /// The usable names, in listing order: each Tick's own tools, then its
    /// state and screen tools.
    pub names: Vec<Mapped>,
    /// Every tool that could not be named.
    pub errors: Vec<NameError>,
    /// Per Tick: why its own tools are withheld (`None`: they are listed).
    pub withheld: Vec<Option<String>>,
    /// Where each name is in `names`: a call finds its tool in constant
    /// time however many Ticks a host holds.
    at: std::collections::HashMap<String, usize>,
}

impl Mapping {
    /// The usable name `name`, if it is one.
    pub fn find(&self, name: &str) -> Option<&Mapped> {
        self.at.get(name).map(|&i| &self.names[i])
    }
}

/// Maps the tools of every hosted Tick (name, catalog) to MCP names.
/// Prefixes are used when `prefixed`.
///
/// The facade's own tools are named first, so no Tick can take them; then
/// the Ticks whose catalog did not change (`changed[i]` false) keep the
/// names they had; then the changed ones are mapped. A Tick with any tool
/// that cannot be named (too long, or a clash with any name taken before)
/// has all its own tools withheld, never a part of them: a half catalog
/// would offer tools whose companions are missing. At start every catalog
/// counts as changed, and any error refuses the start.
pub fn map_tools(ticks: &[(&str, &Descriptor)], prefixed: bool, changed: &[bool]) -> Mapping {
    let mut errors = Vec::new();
    let mut owner: HashMap<String, String> = HashMap::new();
    let prefix = |tick: &str| {
        if prefixed {
            format!("{}_", sanitize(tick))
        } else {
            String::new()
        }
    };
    for (tick, _) in ticks {
        for tool in [STATE_TOOL, SCREEN_TOOL] {
            let mapped = format!("{}{tool}", prefix(tick));
            let what = format!("the facade tool `{tool}` of Tick `{tick}`");
            if let Some(first) = owner.get(&mapped) {
                errors.push(NameError::Clash {
                    mapped,
                    first: first.clone(),
                    second: what,
                });
            } else {
                owner.insert(mapped, what);
            }
        }
    }
    let mut order: Vec<usize> = (0..ticks.len()).collect();
    order.sort_by_key(|i| changed.get(*i).copied().unwrap_or(true));
    let mut own: Vec<Vec<Mapped>> = vec![Vec::new(); ticks.len()];
    let mut withheld = vec![None; ticks.len()];
    for index in order {
        let (tick, descriptor) = ticks[index];
        let mut mine: Vec<Mapped> = Vec::new();
        let mut taken: HashMap<String, String> = HashMap::new();
        let mut problems = Vec::new();
        for t in &descriptor.tools {
            let mapped = format!("{}{}", prefix(tick), sanitize(t.name.wire()));
            let what = format!("tool `{}` of Tick `{tick}`", t.name);
            if mapped.len() > MAX_TOOL_NAME {
                problems.push(NameError::TooLong {
                    tick: tick.to_string(),
                    tool: t.name.line(),
                    len: mapped.len(),
                    mapped,
                });
                continue;
            }
            if let Some(first) = owner.get(&mapped).or_else(|| taken.get(&mapped)) {
                problems.push(NameError::Clash {
                    mapped,
                    first: first.clone(),
                    second: what,
                });
                continue;
            }
            taken.insert(mapped.clone(), what);
            mine.push(Mapped {
                name: mapped,
                tick: index,
                target: Target::Tick(t.name.wire().to_string()),
            });
        }
        if problems.is_empty() {
            owner.extend(taken);
            own[index] = mine;
        } else {
            withheld[index] = Some(
                problems
                    .iter()
                    .map(ToString::to_string)
                    .collect::<Vec<_>>()
                    .join("; "),
            );
            errors.extend(problems);
        }
    }
    let mut names = Vec::new();
    for (index, (tick, _)) in ticks.iter().enumerate() {
        names.append(&mut own[index]);
        for (tool, target) in [(STATE_TOOL, Target::State), (SCREEN_TOOL, Target::Screen)] {
            names.push(Mapped {
                name: format!("{}{tool}", prefix(tick)),
                tick: index,
                target,
            });
        }
    }
    let at = names
        .iter()
        .enumerate()
        .map(|(i, m)| (m.name.clone(), i))
        .collect();
    Mapping {
        names,
        errors,
        withheld,
        at,
    }
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
    fn find_gives_each_usable_name_its_own_entry_and_nothing_else() {
        let a = catalog(&["ok", "add item"]);
        let b = catalog(&["ok"]);
        let m = map_tools(&[("a", &a), ("b", &b)], true, &[true, true]);
        assert_eq!(m.names.len(), 7, "{:?}", names(&m.names));
        for entry in &m.names {
            assert_eq!(m.find(&entry.name), Some(entry));
        }
        for unknown in ["ok", "a_", "c_ok", "a_add item", ""] {
            assert_eq!(m.find(unknown), None, "{unknown}");
        }
    }

    #[test]
    fn one_tick_keeps_its_names_and_gets_facade_tools() {
        let d = catalog(&["increment", "history"]);
        let Mapping {
            names: m,
            errors: e,
            ..
        } = map_tools(&[("counter", &d)], false, &[true]);
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
        let Mapping {
            names: m,
            errors: e,
            ..
        } = map_tools(&[("a", &a), ("b", &b)], true, &[true, true]);
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
    fn clashes_and_long_names_withhold_the_whole_tick() {
        let a = catalog(&["x y", "x_y", "tick_state", &"n".repeat(65), "fine"]);
        let m = map_tools(&[("a", &a)], false, &[true]);
        assert_eq!(names(&m.names), ["tick_state", "tick_screen"]);
        assert_eq!(
            m.names[0].target,
            Target::State,
            "the facade keeps its name"
        );
        assert_eq!(m.errors.len(), 3, "{:?}", m.errors);
        assert!(
            m.errors[0].to_string().contains("clash: `x_y`"),
            "{}",
            m.errors[0]
        );
        assert!(
            m.errors[1].to_string().contains("facade tool `tick_state`"),
            "{}",
            m.errors[1]
        );
        assert!(
            m.errors[2].to_string().contains("at most 64"),
            "{}",
            m.errors[2]
        );
        assert!(m.withheld[0].as_deref().is_some_and(|w| w.contains("x_y")));
    }

    #[test]
    fn a_changed_catalog_cannot_take_an_unchanged_ticks_names() {
        // Tick `a` offers `b_x` (as `a_b_x`); Tick `a_b` then adds `x`,
        // which would also be `a_b_x`. The one that changed loses.
        let a = catalog(&["b_x"]);
        let ab = catalog(&["x", "y"]);
        let m = map_tools(&[("a", &a), ("a_b", &ab)], true, &[false, true]);
        assert_eq!(
            names(&m.names),
            [
                "a_b_x",
                "a_tick_state",
                "a_tick_screen",
                "a_b_tick_state",
                "a_b_tick_screen"
            ]
        );
        assert_eq!(m.withheld[0], None);
        assert!(m.withheld[1]
            .as_deref()
            .is_some_and(|w| w.contains("`a_b_x`")));
        // Had `a` changed instead, `a_b` would keep its tools.
        let m = map_tools(&[("a", &a), ("a_b", &ab)], true, &[true, false]);
        assert!(m.withheld[0].is_some() && m.withheld[1].is_none());
        assert!(names(&m.names).contains(&"a_b_y"));
    }
}
