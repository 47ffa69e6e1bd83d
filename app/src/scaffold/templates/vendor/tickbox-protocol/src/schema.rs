//! Compiling a Tick's input schemas within bounds (§5.3).
//!
//! A schema is the Tick's code run by the host: its `pattern`s become
//! regular expressions the host compiles and runs on every call's args.
//! Compiled without bounds, a few kilobytes of patterns (Unicode classes
//! with large repetition counts) cost the host gigabytes and seconds.
//! Here every pattern is compiled under a size bound
//! ([`MAX_PATTERN_BYTES`]), the memory of all of a catalog's patterns is
//! measured and bounded together ([`MAX_CATALOG_PATTERN_BYTES`]), matching
//! is bounded ([`PATTERN_DFA_BYTES`], [`PATTERN_BACKTRACK_LIMIT`]), and a
//! [`SchemaCache`] keeps compiled schemas by content, so a Tick that
//! changes its revision without changing a schema costs a lookup. A
//! compile can be abandoned ([`SchemaCache::abandon_with`]): whoever
//! stopped waiting for it (a start deadline) raises a flag, and the compile
//! stops before its next pattern or schema, so the work outlives its
//! deadline by one pattern's compile at most, which the bounds above cap.

use crate::limits::{
    MAX_CATALOG_PATTERN_BYTES, MAX_PATTERN_BYTES, PATTERN_BACKTRACK_LIMIT, PATTERN_DFA_BYTES,
};
use serde_json::Value;
use std::collections::{HashMap, HashSet};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

/// Schemas kept by a [`SchemaCache`] (default 256); past it the cache starts
/// over. The patterns it keeps compiled are bounded too: past
/// [`MAX_CATALOG_PATTERN_BYTES`] (measured) it starts over before the next
/// catalog, so a Tick's host keeps at most that for its earlier catalogs
/// plus its current catalog's own.
pub const MAX_CACHED_SCHEMAS: usize = 256;

/// Compiled schemas by their exact content (the serialized JSON) and
/// compiled patterns by their text, each compiled once. One per Tick: what
/// it holds is that Tick's cost, and it is bounded.
pub struct SchemaCache {
    schemas: HashMap<String, Arc<jsonschema::Validator>>,
    /// The measured cost of every pattern the regex cache holds.
    patterns: HashMap<String, usize>,
    /// Their sum.
    pattern_bytes: usize,
    /// The patterns of the catalog being validated, each counted once.
    catalog: HashSet<String>,
    /// Their sum.
    catalog_bytes: usize,
    /// The catalog being validated already has a pattern past a bound:
    /// it is refused, and its other patterns are not compiled (each could
    /// cost as much again, for no different verdict).
    catalog_refused: bool,
    /// jsonschema's compiled regexes, shared by every schema built here.
    regexes: jsonschema::PatternCache,
    /// Raised when nobody waits for the compile in progress any more.
    abandoned: Arc<AtomicBool>,
}

impl Default for SchemaCache {
    fn default() -> SchemaCache {
        SchemaCache {
            schemas: HashMap::new(),
            patterns: HashMap::new(),
            pattern_bytes: 0,
            catalog: HashSet::new(),
            catalog_bytes: 0,
            catalog_refused: false,
            regexes: jsonschema::PatternCache::new(),
            abandoned: Arc::default(),
        }
    }
}

impl std::fmt::Debug for SchemaCache {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SchemaCache")
            .field("schemas", &self.schemas.len())
            .field("patterns", &self.patterns.len())
            .field("pattern_bytes", &self.pattern_bytes)
            .finish()
    }
}

impl SchemaCache {
    /// An empty cache.
    pub fn new() -> SchemaCache {
        SchemaCache::default()
    }

    /// How many compiled schemas it holds.
    pub fn len(&self) -> usize {
        self.schemas.len()
    }

    /// Whether it holds none.
    pub fn is_empty(&self) -> bool {
        self.schemas.is_empty()
    }

    /// The measured memory of the compiled patterns it holds, in bytes.
    pub fn pattern_bytes(&self) -> usize {
        self.pattern_bytes
    }

    /// Starts counting a new catalog's patterns (each once, against
    /// [`MAX_CATALOG_PATTERN_BYTES`]); starts the cache over first if what
    /// it keeps from earlier catalogs passed its bounds.
    pub(crate) fn begin_catalog(&mut self) {
        if self.pattern_bytes > MAX_CATALOG_PATTERN_BYTES
            || self.schemas.len() >= MAX_CACHED_SCHEMAS
        {
            let abandoned = self.abandoned.clone();
            *self = SchemaCache::default();
            self.abandoned = abandoned;
        }
        self.catalog.clear();
        self.catalog_bytes = 0;
        self.catalog_refused = false;
    }

    /// The compiles that follow stop, before their next pattern or schema,
    /// once `flag` is raised: the caller raises it when it stops waiting.
    pub fn abandon_with(&mut self, flag: Arc<AtomicBool>) {
        self.abandoned = flag;
    }

    fn check_abandoned(&self) -> Result<(), String> {
        match self.abandoned.load(Ordering::Relaxed) {
            true => Err("not compiled: the describe was abandoned (its deadline passed)".into()),
            false => Ok(()),
        }
    }

    /// The schema compiled, from the cache when this exact schema was
    /// compiled before; or why it cannot be (one sentence naming the bound).
    pub(crate) fn compile(&mut self, schema: &Value) -> Result<Arc<jsonschema::Validator>, String> {
        self.check_abandoned()?;
        let mut found = Vec::new();
        collect_patterns(schema, &mut found);
        if self.catalog_refused && !found.is_empty() {
            return Err("not compiled: an earlier pattern of this catalog passed its bound".into());
        }
        let refused = |cache: &mut SchemaCache, why: String| {
            cache.catalog_refused = true;
            Err(why)
        };
        for p in found {
            if self.catalog.contains(p) {
                continue;
            }
            let cost = match self.patterns.get(p) {
                Some(c) => *c,
                None => {
                    self.check_abandoned()?;
                    let c = match pattern_cost(p) {
                        Ok(c) => c,
                        Err(why) => return refused(self, why),
                    };
                    self.patterns.insert(p.to_string(), c);
                    self.pattern_bytes += c;
                    c
                }
            };
            self.catalog.insert(p.to_string());
            self.catalog_bytes += cost;
            if self.catalog_bytes > MAX_CATALOG_PATTERN_BYTES {
                return refused(
                    self,
                    format!(
                        "the catalog's patterns compile to more than {MAX_CATALOG_PATTERN_BYTES} \
                         bytes (MAX_CATALOG_PATTERN_BYTES)"
                    ),
                );
            }
        }
        let key = schema.to_string();
        if let Some(c) = self.schemas.get(&key) {
            return Ok(c.clone());
        }
        self.check_abandoned()?;
        let options = jsonschema::PatternOptions::fancy_regex()
            .size_limit(MAX_PATTERN_BYTES)
            .dfa_size_limit(PATTERN_DFA_BYTES)
            .backtrack_limit(PATTERN_BACKTRACK_LIMIT);
        let validator = jsonschema::options()
            .with_pattern_options(options)
            .with_pattern_cache(self.regexes.clone())
            .build(schema)
            .map_err(|e| format!("input_schema is not a valid JSON Schema: {e}"))?;
        let validator = Arc::new(validator);
        self.schemas.insert(key, validator.clone());
        Ok(validator)
    }
}

/// The largest catalog (encoded) a host may compile where it stands,
/// without handing the work to another thread, if it has no patterns
/// (default 16 KiB): compiling it costs well under a millisecond, less than
/// the hand-off itself.
pub const INLINE_CATALOG_BYTES: usize = 16 * 1024;

/// Whether compiling this tick/describe result is cheap by construction: at
/// most [`INLINE_CATALOG_BYTES`] encoded, and no pattern anywhere. Anything
/// else is compiled off the async workers.
pub fn is_cheap(raw: &Value) -> bool {
    let mut patterns = Vec::new();
    crate::message::encoded_len(raw) <= INLINE_CATALOG_BYTES && {
        collect_patterns(raw, &mut patterns);
        patterns.is_empty()
    }
}

/// Compiles one input schema on its own (a fresh cache).
#[cfg(test)]
fn compile(schema: &Value) -> Result<Arc<jsonschema::Validator>, String> {
    let mut cache = SchemaCache::new();
    cache.begin_catalog();
    cache.compile(schema)
}

/// The memory one pattern takes compiled, or why it is refused. Patterns
/// the linear-time engine cannot read (look-around, back-references) are
/// charged the most a pattern may take, since the backtracking engine
/// that runs them is bounded by the same size limits.
fn pattern_cost(pattern: &str) -> Result<usize, String> {
    use regex_automata::meta;
    let config = meta::Config::new()
        .nfa_size_limit(Some(MAX_PATTERN_BYTES))
        .onepass_size_limit(Some(MAX_PATTERN_BYTES))
        .dfa(false)
        .hybrid_cache_capacity(PATTERN_DFA_BYTES);
    // Measured as jsonschema compiles it: ECMA 262 syntax translated
    // (`\\w`, `\\d` are ASCII there, which keeps them small).
    let Ok(translated) = jsonschema_regex::to_rust_regex(pattern) else {
        return Ok(MAX_PATTERN_BYTES + pattern.len());
    };
    match meta::Builder::new().configure(config).build(&translated) {
        Ok(re) => Ok(re.memory_usage() + pattern.len()),
        Err(e) if e.size_limit().is_some() => Err(format!(
            "a pattern compiles to more than {MAX_PATTERN_BYTES} bytes (MAX_PATTERN_BYTES)"
        )),
        Err(_) => Ok(MAX_PATTERN_BYTES + pattern.len()),
    }
}

/// Every regular expression a schema holds: `pattern` values and
/// `patternProperties` keys, at any depth.
fn collect_patterns<'a>(v: &'a Value, out: &mut Vec<&'a str>) {
    match v {
        Value::Object(map) => {
            for (k, v) in map {
                match (k.as_str(), v) {
                    ("pattern", Value::String(p)) => out.push(p),
                    ("patternProperties", Value::Object(props)) => {
                        out.extend(props.keys().map(String::as_str));
                        props.values().for_each(|v| collect_patterns(v, out));
                    }
                    _ => collect_patterns(v, out),
                }
            }
        }
        Value::Array(items) => items.iter().for_each(|v| collect_patterns(v, out)),
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// A pattern like the red team's: a Unicode class, repeated.
    fn costly(n: usize) -> Value {
        json!({"type": "object", "properties": {"a": {"type": "string", "pattern": format!("^\\p{{L}}{{{n}}}$")}}})
    }

    #[test]
    fn ordinary_patterns_compile_and_check_args() {
        let c = compile(&json!({"type": "object", "properties": {
            "name": {"type": "string", "pattern": "^[a-z0-9_-]{1,64}$"},
            "word": {"type": "string", "pattern": "^\\w{1,64}$"},
            "line": {"type": "string", "pattern": "^.{0,256}$"}},
            "patternProperties": {"^x-": {"type": "string"}}}))
        .unwrap();
        assert!(c.is_valid(&json!({"name": "ok_1"})));
        assert!(!c.is_valid(&json!({"name": "NOT OK"})));
        // Look-around still works (the backtracking engine, bounded).
        let la = compile(&json!({"type": "string", "pattern": "^(?!admin).*$"})).unwrap();
        assert!(la.is_valid(&json!("user")));
        assert!(!la.is_valid(&json!("admin")));
    }

    #[test]
    fn after_one_pattern_past_its_bound_the_catalogs_others_are_not_compiled() {
        let mut cache = SchemaCache::new();
        cache.begin_catalog();
        let first = cache.compile(&costly(5000)).unwrap_err();
        assert!(first.contains("MAX_PATTERN_BYTES"), "{first}");
        // Another costly one is not even measured: the catalog is refused.
        let next = cache.compile(&costly(4999)).unwrap_err();
        assert!(next.starts_with("not compiled"), "{next}");
        // Schemas without patterns still compile (their findings are real).
        assert!(cache.compile(&json!({"type": "object"})).is_ok());
        // A new catalog is judged afresh (control).
        cache.begin_catalog();
        assert!(cache.compile(&costly(2)).is_ok());
    }

    /// `n` distinct legal patterns, each a Unicode class a few times.
    fn catalog_schemas(n: usize) -> Vec<Value> {
        (0..n)
            .map(|i| json!({"type": "string", "pattern": format!("^\\p{{L}}{{3}}-{i}$")}))
            .collect()
    }

    /// Compiles `schemas` as one catalog; the first error, if any.
    fn compile_all(cache: &mut SchemaCache, schemas: &[Value]) -> Result<(), String> {
        cache.begin_catalog();
        schemas
            .iter()
            .try_for_each(|s| cache.compile(s).map(|_| ()))
    }

    #[test]
    fn an_abandoned_compile_stops_before_its_next_pattern() {
        let schemas = catalog_schemas(24);
        // Raised before: nothing is compiled at all.
        let mut cache = SchemaCache::new();
        let flag = Arc::new(AtomicBool::new(true));
        cache.abandon_with(flag.clone());
        let e = compile_all(&mut cache, &schemas).unwrap_err();
        assert!(e.contains("abandoned"), "{e}");
        assert_eq!((cache.len(), cache.pattern_bytes()), (0, 0));
        // The positive control, timed: the whole catalog compiles.
        let mut full = SchemaCache::new();
        let t0 = std::time::Instant::now();
        compile_all(&mut full, &schemas).unwrap();
        let whole = t0.elapsed();
        assert_eq!(full.len(), schemas.len());
        // Raised a tenth of the way through, from another thread (as a
        // start deadline does): the compile stops there, with part of the
        // catalog compiled.
        let mut cache = SchemaCache::new();
        let flag = Arc::new(AtomicBool::new(false));
        cache.abandon_with(flag.clone());
        let worker = std::thread::spawn(move || {
            let r = compile_all(&mut cache, &catalog_schemas(24));
            (r, cache.len())
        });
        std::thread::sleep(whole / 10);
        flag.store(true, Ordering::Relaxed);
        let (r, compiled) = worker.join().unwrap();
        assert!(r.unwrap_err().contains("abandoned"));
        assert!(compiled < schemas.len(), "{compiled} of {}", schemas.len());
    }

    #[test]
    fn a_costly_pattern_is_refused_naming_the_bound() {
        let e = compile(&costly(5000)).expect_err("refused");
        assert!(e.contains("MAX_PATTERN_BYTES"), "{e}");
        // The positive control: the same class a few times is fine.
        assert!(compile(&costly(4)).is_ok());
    }

    #[test]
    fn many_patterns_together_are_bounded_by_the_catalog_budget() {
        let single = pattern_cost("^\\p{L}{4}$").unwrap();
        assert!(single < MAX_PATTERN_BYTES, "{single}");
        let n = MAX_CATALOG_PATTERN_BYTES / single + 2;
        let props: serde_json::Map<String, Value> = (0..n)
            .map(|i| {
                (
                    format!("p{i}"),
                    json!({"type": "string", "pattern": format!("^\\p{{L}}{{4}}-{i}$")}),
                )
            })
            .collect();
        let e = compile(&json!({"type": "object", "properties": props})).expect_err("refused");
        assert!(e.contains("MAX_CATALOG_PATTERN_BYTES"), "{e}");
        // The same pattern many times is one pattern.
        let same: serde_json::Map<String, Value> = (0..n)
            .map(|i| {
                (
                    format!("p{i}"),
                    json!({"type": "string", "pattern": "^\\p{L}{4}$"}),
                )
            })
            .collect();
        assert!(compile(&json!({"type": "object", "properties": same})).is_ok());
    }

    #[test]
    fn only_small_catalogs_without_patterns_are_cheap() {
        assert!(is_cheap(
            &json!({"tools": [{"input_schema": {"type": "object"}}]})
        ));
        assert!(!is_cheap(&json!({"tools": [{"input_schema": costly(1)}]})));
        let big = "x".repeat(INLINE_CATALOG_BYTES);
        assert!(!is_cheap(&json!({"description": big})));
    }

    #[test]
    fn the_cache_compiles_a_schema_once_and_stays_bounded() {
        let mut cache = SchemaCache::new();
        cache.begin_catalog();
        let a = cache.compile(&costly(3)).unwrap();
        let b = cache.compile(&costly(3)).unwrap();
        assert!(Arc::ptr_eq(&a, &b));
        assert_eq!(cache.len(), 1);
        let c = cache.compile(&costly(2)).unwrap();
        assert!(!Arc::ptr_eq(&a, &c));
        assert_eq!(cache.len(), 2);
        // Catalog after catalog of new patterns: the cache starts over
        // rather than grow past its bound.
        for round in 0..30 {
            cache.begin_catalog();
            for i in 0..10 {
                let s =
                    json!({"type": "string", "pattern": format!("^\\p{{L}}{{4}}-{round}-{i}$")});
                cache.compile(&s).unwrap();
            }
            assert!(cache.pattern_bytes() <= 2 * MAX_CATALOG_PATTERN_BYTES);
        }
    }
}
