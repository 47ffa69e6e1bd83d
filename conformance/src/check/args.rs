//! Arguments for the calls the checker makes: args a tool accepts (from the
//! user's sample file, or the smallest object its schema allows) and args
//! its schema rejects (to see the Tick reject them too, §7.2).

use serde_json::{json, Map, Value};
use std::collections::BTreeMap;
use tickbox_protocol::Tool;

/// Args the tool's own schema accepts: the user's sample if given, else `{}`,
/// else an object filling each required property with a simple value of its
/// declared type. `None` when nothing simple fits.
pub fn valid_args(tool: &Tool, samples: &BTreeMap<String, Value>) -> Option<Value> {
    if let Some(v) = samples.get(tool.name.wire()) {
        return tool.check_args(v).is_ok().then(|| v.clone());
    }
    let empty = json!({});
    if tool.check_args(&empty).is_ok() {
        return Some(empty);
    }
    let schema = tool.input_schema.as_object()?;
    let props = schema.get("properties").and_then(Value::as_object);
    let mut args = Map::new();
    for name in schema
        .get("required")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(Value::as_str)
    {
        let prop = props.and_then(|p| p.get(name));
        args.insert(name.to_string(), example(prop)?);
    }
    let args = Value::Object(args);
    tool.check_args(&args).is_ok().then_some(args)
}

fn example(schema: Option<&Value>) -> Option<Value> {
    let s = schema?.as_object()?;
    if let Some(c) = s.get("const") {
        return Some(c.clone());
    }
    if let Some(first) = s
        .get("enum")
        .and_then(Value::as_array)
        .and_then(|e| e.first())
    {
        return Some(first.clone());
    }
    if let Some(d) = s.get("default") {
        return Some(d.clone());
    }
    let ty = match s.get("type") {
        Some(Value::String(t)) => t.as_str(),
        Some(Value::Array(ts)) => ts.first().and_then(Value::as_str)?,
        _ => return None,
    };
    Some(match ty {
        "integer" => json!(s.get("minimum").and_then(Value::as_i64).unwrap_or(1)),
        "number" => json!(s.get("minimum").and_then(Value::as_f64).unwrap_or(1.0)),
        "string" => json!("tickbox-check"),
        "boolean" => json!(false),
        "array" => json!([]),
        "object" => json!({}),
        "null" => Value::Null,
        _ => return None,
    })
}

/// Args the tool's schema rejects, built from `base` (args it accepts, or
/// `{}`): an unexpected property, a property of the wrong type, or a missing
/// required property. `None` when the schema rejects none of these (a schema
/// of `{"type":"object"}` accepts every object).
pub fn invalid_args(tool: &Tool, base: Option<&Value>) -> Option<(Value, String)> {
    let base = base.and_then(Value::as_object).cloned().unwrap_or_default();
    let mut candidates: Vec<(Value, String)> = Vec::new();
    let mut extra = base.clone();
    extra.insert("tickbox_check_unexpected".into(), json!(true));
    candidates.push((Value::Object(extra), "an undeclared property".into()));
    if let Some(props) = tool
        .input_schema
        .get("properties")
        .and_then(Value::as_object)
    {
        for (name, prop) in props {
            let wrong = match prop.get("type").and_then(Value::as_str) {
                Some("integer") | Some("number") => json!("not a number"),
                Some("string") => json!(12345),
                Some("boolean") => json!("not a boolean"),
                Some("array") | Some("object") => json!(0),
                _ => continue,
            };
            let mut args = base.clone();
            args.insert(name.clone(), wrong);
            candidates.push((Value::Object(args), format!("`{name}` of the wrong type")));
        }
    }
    candidates.push((json!({}), "no properties (missing required ones)".into()));
    candidates
        .into_iter()
        .find(|(args, _)| tool.check_args(args).is_err())
}

#[cfg(test)]
mod tests {
    use super::*;
    use tickbox_protocol::Descriptor;

    fn tool(schema: Value) -> Tool {
        let d = Descriptor::parse(json!({"protocol":3,"kind":"a.b","title":"t","description":"d",
            "revision":"1","tools":[{"name":"t","description":"d","input_schema":schema,"mutates":false}]}))
        .unwrap();
        d.tools[0].clone()
    }

    #[test]
    fn valid_args_fill_required_properties() {
        let t = tool(
            json!({"type":"object","properties":{"amount":{"type":"integer"},
            "mode":{"enum":["a","b"]}},"required":["amount","mode"],"additionalProperties":false}),
        );
        assert_eq!(
            valid_args(&t, &BTreeMap::new()),
            Some(json!({"amount":1,"mode":"a"}))
        );
        let mut samples = BTreeMap::new();
        samples.insert("t".to_string(), json!({"amount": 5, "mode": "b"}));
        assert_eq!(
            valid_args(&t, &samples),
            Some(json!({"amount":5,"mode":"b"}))
        );
    }

    #[test]
    fn invalid_args_are_rejected_by_the_schema() {
        let t = tool(
            json!({"type":"object","properties":{"amount":{"type":"integer"}},
            "required":["amount"]}),
        );
        let (args, what) = invalid_args(&t, Some(&json!({"amount":1}))).unwrap();
        assert!(t.check_args(&args).is_err());
        assert!(what.contains("amount"), "{what}");
        assert!(invalid_args(&tool(json!({"type":"object"})), None).is_none());
    }
}
