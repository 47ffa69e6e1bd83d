//! The tool catalog: what a Tick declares, and how a call reaches the
//! author's typed handler.
//!
//! Authors list their tools in [`crate::Tick::tools`] with [`Tools::add`].
//! Every tool states its [`Effect`] as a required argument, so forgetting to
//! say whether a tool mutates is a compile error, not a silent default (§5.6).
//! The input schema comes from the argument type through `schemars`, and the
//! SDK closes it (`additionalProperties: false`) and checks arguments itself
//! before a handler runs (§7.2).

use crate::ctx::Ctx;
use schemars::JsonSchema;
use serde::de::DeserializeOwned;
use serde::Serialize;
use serde_json::{Map, Value};
use std::any::TypeId;
use std::cell::RefCell;
use std::collections::HashMap;
use std::fmt;
use std::rc::Rc;

/// Whether a tool can change anything beyond its own result (§5.6): the
/// Tick's state, files, remote services. There is deliberately no default.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Effect {
    /// The tool only reads: `mutates: false`. Calls need no approval, so
    /// declaring a mutating tool this way bypasses the user's consent (§10).
    /// The view is not redrawn after it unless the state changed or the
    /// tool calls [`crate::Ctx::redraw`].
    ReadOnly,
    /// The tool can change something: `mutates: true`.
    Mutates,
}

/// A tool failed. What the host may conclude about effects follows from the
/// constructor the author picks (docs/PROTOCOL.md, the error codes):
///
/// - [`ToolError::failed`] (-32000): the tool started and may have had
///   partial effects. This is also what `?` on any `std::error::Error` gives,
///   because an unexpected error must not be reported as "nothing happened";
/// - [`ToolError::rejected`] (-32602): the call was refused before it had any
///   effect (say, the named note does not exist);
/// - [`ToolError::code`]: a Tick-defined code, which hosts treat as executed.
#[derive(Debug, Clone, PartialEq)]
pub struct ToolError {
    pub(crate) code: i64,
    pub(crate) message: String,
    pub(crate) data: Option<Value>,
}

/// The JSON-RPC code of a tool that failed after starting.
pub const EXECUTED: i64 = -32000;
/// The JSON-RPC code for an unknown tool or invalid arguments: not executed.
pub const INVALID_PARAMS: i64 = -32602;

impl ToolError {
    /// The tool started and failed; it may have had partial effects (-32000).
    pub fn failed(message: impl Into<String>) -> ToolError {
        ToolError {
            code: EXECUTED,
            message: message.into(),
            data: None,
        }
    }

    /// The call was refused before it had any effect (-32602). Only use this
    /// when nothing at all happened: hosts rely on it (§3.4).
    pub fn rejected(message: impl Into<String>) -> ToolError {
        ToolError {
            code: INVALID_PARAMS,
            message: message.into(),
            data: None,
        }
    }

    /// A Tick-defined code; hosts treat it as "executed" (may have had effects).
    pub fn code(code: i64, message: impl Into<String>) -> ToolError {
        ToolError {
            code,
            message: message.into(),
            data: None,
        }
    }

    /// Attaches structured details (`error.data`).
    pub fn with_data(mut self, data: impl Serialize) -> ToolError {
        self.data = serde_json::to_value(data).ok();
        self
    }

    /// The JSON-RPC error code this becomes.
    pub fn error_code(&self) -> i64 {
        self.code
    }
}

impl fmt::Display for ToolError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} (code {})", self.message, self.code)
    }
}

// Not `impl Error for ToolError`: that would make this blanket impl overlap
// with `From<T> for T`. The blanket impl is what lets handlers use `?`.
impl<E: std::error::Error> From<E> for ToolError {
    fn from(e: E) -> ToolError {
        ToolError::failed(e.to_string())
    }
}

/// Arguments of a tool that takes none: `{}` and nothing else. Its schema is
/// `{"type":"object","additionalProperties":false}`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct NoArgs;

impl<'de> serde::Deserialize<'de> for NoArgs {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<NoArgs, D::Error> {
        // Only an empty object is valid; the SDK already rejects unknown
        // keys, so any map that reaches here is empty.
        let map = Map::<String, Value>::deserialize(d)?;
        if let Some(key) = map.keys().next() {
            return Err(serde::de::Error::custom(format!(
                "unknown field `{key}`: this tool takes no arguments"
            )));
        }
        Ok(NoArgs)
    }
}

impl JsonSchema for NoArgs {
    fn schema_name() -> std::borrow::Cow<'static, str> {
        "NoArgs".into()
    }
    fn json_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
        schemars::json_schema!({"type": "object", "additionalProperties": false})
    }
}

type Handler<T> = Box<dyn Fn(&mut T, Value, &mut Ctx) -> Result<Value, ToolError>>;

/// One declared tool.
pub(crate) struct ToolDef<T> {
    pub name: String,
    pub description: String,
    /// Shared with the per-type cache: rebuilding the catalog after every
    /// event clones a pointer, not a schema.
    pub schema: Rc<Value>,
    pub mutates: bool,
    pub run: Handler<T>,
}

impl<T> ToolDef<T> {
    /// The catalog entry, as `tick/describe` lists it (§5.2).
    pub fn entry(&self) -> Value {
        serde_json::json!({
            "name": self.name,
            "description": self.description,
            "input_schema": *self.schema,
            "mutates": self.mutates,
        })
    }
}

/// The tools a Tick offers right now. Built afresh from
/// [`crate::Tick::tools`] after every event, so a catalog may depend on
/// state; the SDK notices any change and assigns a new revision (§5.5).
pub struct Tools<T> {
    pub(crate) list: Vec<ToolDef<T>>,
}

impl<T> Default for Tools<T> {
    fn default() -> Self {
        Tools { list: Vec::new() }
    }
}

impl<T: 'static> Tools<T> {
    /// Declares a tool. `A` is its argument type (derive `Deserialize` and
    /// `JsonSchema`, and add `#[serde(deny_unknown_fields)]` to nested
    /// structs; use [`NoArgs`] for none); `R` is its result, any
    /// `Serialize`. `effect` is required: see [`Effect`].
    ///
    /// Doc comments on `A`'s fields become property descriptions in the
    /// schema, which is what a model reads when filling in arguments.
    pub fn add<A, R, F>(
        &mut self,
        name: &str,
        description: &str,
        effect: Effect,
        handler: F,
    ) -> &mut Self
    where
        A: DeserializeOwned + JsonSchema + 'static,
        R: Serialize,
        F: Fn(&mut T, A, &mut Ctx) -> Result<R, ToolError> + 'static,
    {
        let schema = cached_schema::<A>();
        let check = schema.clone();
        let run: Handler<T> = Box::new(move |tick, args, ctx| {
            check_closed(&check, &args)?;
            let args: A = serde_json::from_value(args)
                .map_err(|e| ToolError::rejected(format!("invalid arguments: {e}")))?;
            let result = handler(tick, args, ctx)?;
            serde_json::to_value(result).map_err(|e| {
                // The tool ran, so its effects (if any) happened: executed.
                ToolError::failed(format!(
                    "the tool ran but its result cannot be encoded: {e}"
                ))
            })
        });
        self.list.push(ToolDef {
            name: name.to_string(),
            description: description.to_string(),
            schema,
            mutates: effect == Effect::Mutates,
            run,
        });
        self
    }

    pub(crate) fn get(&self, name: &str) -> Option<&ToolDef<T>> {
        self.list.iter().find(|t| t.name == name)
    }
}

/// [`schema_for`], generated once per argument type. `Tick::tools` runs
/// after every event (so a catalog may follow the state), and generating a
/// schema costs far more than most calls it describes; a type's schema never
/// changes while the program runs.
fn cached_schema<A: JsonSchema + 'static>() -> Rc<Value> {
    thread_local! {
        static SCHEMAS: RefCell<HashMap<TypeId, Rc<Value>>> = RefCell::new(HashMap::new());
    }
    SCHEMAS.with(|schemas| {
        schemas
            .borrow_mut()
            .entry(TypeId::of::<A>())
            .or_insert_with(|| Rc::new(schema_for::<A>()))
            .clone()
    })
}

/// The closed input schema of an argument type.
///
/// Subschemas are inlined so a model sees one self-contained document, and
/// the generator's bookkeeping (`$schema`, the Rust type name as `title`,
/// the type's doc comment, Rust integer widths as `format`) is dropped: `{"type":"integer"}` is what
/// a host or a model needs. Unsigned types keep their `minimum: 0`.
pub fn schema_for<A: JsonSchema>() -> Value {
    let mut settings = schemars::generate::SchemaSettings::draft2020_12();
    settings.inline_subschemas = true;
    settings.meta_schema = None;
    let schema = settings.into_generator().into_root_schema_for::<A>();
    let mut v = schema.to_value();
    if let Value::Bool(true) = v {
        // `serde_json::Value` and friends: free-form, but still an object.
        v = Value::Object(Map::new());
    }
    if let Value::Object(top) = &mut v {
        // The tool's own description says what it does; the argument type's
        // name and doc comment are the author's business.
        top.remove("title");
        top.remove("description");
        // A struct's arguments are closed: an unknown key is an error, not
        // something silently ignored. A free-form type stays open.
        if top.get("type").and_then(Value::as_str) == Some("object") {
            top.entry("additionalProperties")
                .or_insert(Value::Bool(false));
        }
        // Arguments are always a JSON object (§7.1), whatever the type says.
        top.entry("type").or_insert(Value::from("object"));
    }
    strip_formats(&mut v);
    v
}

fn strip_formats(v: &mut Value) {
    const RUST_FORMATS: &[&str] = &[
        "int8", "int16", "int32", "int64", "int", "uint8", "uint16", "uint32", "uint64", "uint",
        "float", "double",
    ];
    match v {
        Value::Object(map) => {
            if map
                .get("format")
                .and_then(Value::as_str)
                .is_some_and(|f| RUST_FORMATS.contains(&f))
            {
                map.remove("format");
            }
            map.values_mut().for_each(strip_formats);
        }
        Value::Array(items) => items.iter_mut().for_each(strip_formats),
        _ => {}
    }
}

/// The top-level checks that serde alone would not make: `args` is an object
/// and has no keys the closed schema does not list. Nested objects are left
/// to serde (`deny_unknown_fields`).
fn check_closed(schema: &Value, args: &Value) -> Result<(), ToolError> {
    let Value::Object(args) = args else {
        return Err(ToolError::rejected(
            "invalid arguments: args must be an object",
        ));
    };
    if schema.get("additionalProperties") != Some(&Value::Bool(false)) {
        return Ok(());
    }
    let known = schema.get("properties").and_then(Value::as_object);
    for key in args.keys() {
        if !known.is_some_and(|k| k.contains_key(key)) {
            return Err(ToolError::rejected(format!(
                "invalid arguments: unknown field `{key}`"
            )));
        }
    }
    Ok(())
}
