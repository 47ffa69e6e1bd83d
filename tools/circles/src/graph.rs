//! One crate's files as a graph, and its circles.
//!
//! The rule, in one place:
//!
//! - A node is a file of the crate's module tree, found from its root
//!   (`src/lib.rs`, `src/main.rs`, `src/bin/*`) by following `mod x;`
//!   (`x.rs` or `x/mod.rs` beside or below the declaring file, as rustc
//!   does). Inline `mod x { … }` modules belong to their file.
//! - An edge A → B is a path written in A that names an item of B: a `use`
//!   declaration, or a path with `::` in code (`crate::x::f()`,
//!   `super::T`, `self::m::g`, or `m::g` where `m` is a module declared in
//!   A's module or reachable through a glob import). `crate`, `super` and
//!   `self` resolve as rustc resolves them, inline modules included.
//! - Parent and child: a child naming an item of its parent or any
//!   ancestor (`super::f`, `crate::T` defined in `lib.rs`, a helper in a
//!   `mod.rs`) is an edge like any other. A module naming items of its own
//!   descendants is not: that is a whole using its parts (a `mod.rs` that
//!   dispatches to its children, a `lib.rs` that re-exports), so a
//!   `mod.rs` that both dispatches to its children and serves them helpers
//!   is not a circle, while two siblings (or cousins) that name each
//!   other, directly or through a re-export, are.
//! - Declaring a child (`mod x;`) is not an edge, and neither is a
//!   re-export (`pub use`, `pub(…) use`) unless the file also uses the
//!   name itself: a path that reaches an item through a re-export (or a
//!   plain `use`, or a glob `use`) is followed to the file that defines
//!   the item, so a facade `lib.rs` does not join every file to every
//!   other.
//! - A glob import (`use super::*;`) is an edge to the glob's module, and
//!   to each file that defines (at module level) an item whose name the
//!   file mentions and the glob brings in, followed as above. A bare name
//!   that is also a module's name is taken as the module, which a bare
//!   name cannot use: no edge.
//! - Paths into other crates, `$crate::` paths in macros and macro calls
//!   without a path are not edges. Comments and literals are dropped first.
//!   Everything else in the file counts, `#[cfg(test)]` modules included:
//!   a test that reaches into a sibling imports it like any other code.
//!
//! A circle is a strongly connected component with more than one file.

use crate::scan::{self, Facts, RawPath};
use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet, VecDeque};
use std::path::{Path, PathBuf};

/// A module's absolute path in its crate (`[]` is the crate root).
type ModPath = Vec<String>;

struct Module {
    file: usize,
    children: BTreeSet<String>,
    items: BTreeSet<String>,
    /// Bound name → absolute path it names (`None`: another crate's).
    bindings: HashMap<String, Option<ModPath>>,
    globs: Vec<ModPath>,
}

/// How a path was resolved to its file.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Found {
    /// It names a module (its file).
    Module,
    /// It names an item defined at module level in that file.
    Item,
    /// No definition was found; the module that should hold it.
    Guess,
}

/// A crate's module tree with its files' facts.
pub struct Crate {
    /// Files, in the order they were found (the root first).
    pub files: Vec<PathBuf>,
    facts: Vec<Facts>,
    /// Each file's module path.
    file_module: Vec<ModPath>,
    modules: BTreeMap<ModPath, Module>,
}

/// Reads the module tree under `root`. Errors name the file or the `mod`
/// declaration that could not be followed.
pub fn load(root: &Path) -> Result<Crate, String> {
    let mut c = Crate {
        files: Vec::new(),
        facts: Vec::new(),
        file_module: Vec::new(),
        modules: BTreeMap::new(),
    };
    let mut queue = VecDeque::from([(root.to_path_buf(), ModPath::new(), true)]);
    while let Some((path, module, owns_dir)) = queue.pop_front() {
        let src = std::fs::read_to_string(&path)
            .map_err(|e| format!("cannot read {}: {e}", path.display()))?;
        let facts = scan::facts(&src);
        if facts.path_attribute {
            return Err(format!(
                "{}: #[path] is not followed by this check; declare modules where rustc looks for them",
                path.display()
            ));
        }
        let file = c.files.len();
        // Where this file's children live: beside it for a crate root or a
        // mod.rs, in a directory named after it otherwise.
        let dir = if owns_dir {
            path.parent().unwrap_or(Path::new(".")).to_path_buf()
        } else {
            path.with_extension("")
        };
        c.modules.insert(module.clone(), Module::new(file));
        for (parent, name) in &facts.inline_modules {
            let p = join(&module, parent);
            c.modules
                .insert(join(&p, std::slice::from_ref(name)), Module::new(file));
            c.modules
                .get_mut(&p)
                .map(|m| m.children.insert(name.clone()));
        }
        for (inline, name) in &facts.child_files {
            let mut base = dir.clone();
            inline.iter().for_each(|n| base.push(n));
            let flat = base.join(format!("{name}.rs"));
            let nested = base.join(name).join("mod.rs");
            let (child, owns) = if flat.is_file() {
                (flat, false)
            } else if nested.is_file() {
                (nested, true)
            } else {
                return Err(format!(
                    "{}: `mod {name};` has neither {} nor {}",
                    path.display(),
                    flat.display(),
                    nested.display()
                ));
            };
            let parent = join(&module, inline);
            c.modules
                .get_mut(&parent)
                .map(|m| m.children.insert(name.clone()));
            queue.push_back((child, join(&parent, std::slice::from_ref(name)), owns));
        }
        for (inline, name) in &facts.items {
            let p = join(&module, inline);
            c.modules.get_mut(&p).map(|m| m.items.insert(name.clone()));
        }
        c.files.push(path);
        c.facts.push(facts);
        c.file_module.push(module);
    }
    // Children are all known now, so relative paths can be made absolute.
    for file in 0..c.files.len() {
        for u in &c.facts[file].uses {
            let abs = c.absolute(file, &u.path);
            let m = c
                .modules
                .get_mut(&c.module_of(file, &u.path))
                .expect("scanned module");
            match (&u.binding, abs) {
                (_, Some(abs)) if u.glob => m.globs.push(abs),
                (Some(b), abs) => _ = m.bindings.insert(b.clone(), abs),
                _ => {}
            }
        }
    }
    Ok(c)
}

impl Module {
    fn new(file: usize) -> Self {
        Module {
            file,
            children: BTreeSet::new(),
            items: BTreeSet::new(),
            bindings: HashMap::new(),
            globs: Vec::new(),
        }
    }
}

fn join(a: &[String], b: &[String]) -> ModPath {
    a.iter().chain(b).cloned().collect()
}

impl Crate {
    fn module_of(&self, file: usize, p: &RawPath) -> ModPath {
        join(&self.file_module[file], &p.inline)
    }

    /// The absolute path `p` names, or `None` for a path into another
    /// crate (or anything that is not a module path of this crate).
    fn absolute(&self, file: usize, p: &RawPath) -> Option<ModPath> {
        let mut here = self.module_of(file, p);
        let segs = &p.segments;
        let first = segs.first()?;
        match first.as_str() {
            "crate" => Some(segs[1..].to_vec()),
            "self" => Some(join(&here, &segs[1..])),
            "super" => {
                let mut k = 0;
                while segs.get(k).map(String::as_str) == Some("super") {
                    here.pop()?;
                    k += 1;
                }
                Some(join(&here, &segs[k..]))
            }
            _ => {
                let m = self.modules.get(&here)?;
                if m.children.contains(first) {
                    return Some(join(&here, segs));
                }
                // A child module of a glob-imported module (`use super::*;`
                // then `sibling::f()`).
                self.facts[file]
                    .uses
                    .iter()
                    .filter(|u| u.glob && u.path.inline == p.inline)
                    .filter_map(|u| self.absolute_glob(file, &u.path))
                    .find(|g| {
                        self.modules
                            .get(g)
                            .is_some_and(|gm| gm.children.contains(first))
                    })
                    .map(|g| join(&g, segs))
            }
        }
    }

    /// A glob's module, made absolute without looking at globs again.
    fn absolute_glob(&self, file: usize, p: &RawPath) -> Option<ModPath> {
        let first = p.segments.first()?;
        if matches!(first.as_str(), "crate" | "self" | "super") {
            self.absolute(file, p)
        } else {
            let here = self.module_of(file, p);
            let m = self.modules.get(&here)?;
            m.children.contains(first).then(|| join(&here, &p.segments))
        }
    }

    /// The file that defines what `path` names, following `use` bindings
    /// and globs, and how it was found.
    fn resolve(&self, path: &[String]) -> Option<(usize, Found)> {
        self.resolve_from(path, &mut HashSet::new())
    }

    /// `resolve`, never looking up one path twice (globs and re-exports
    /// may lead in circles: `use super::*` in a child of a glob's module).
    fn resolve_from(&self, path: &[String], seen: &mut HashSet<ModPath>) -> Option<(usize, Found)> {
        if !seen.insert(path.to_vec()) {
            return None;
        }
        let k = (0..=path.len())
            .rev()
            .find(|k| self.modules.contains_key(&path[..*k]))?;
        let (module, rest) = (&self.modules[&path[..k]], &path[k..]);
        // A module itself: found, but not an item.
        let Some(name) = rest.first() else {
            return Some((module.file, Found::Module));
        };
        if module.items.contains(name) {
            return Some((module.file, Found::Item));
        }
        match module.bindings.get(name) {
            Some(Some(target)) => return self.resolve_from(&join(target, &rest[1..]), seen),
            // A name imported from another crate: no edge at all.
            Some(None) => return None,
            None => {}
        }
        for g in &module.globs {
            if let Some(found @ (_, Found::Item)) = self.resolve_from(&join(g, rest), seen) {
                return Some(found);
            }
        }
        Some((module.file, Found::Guess))
    }

    /// Edges between files (no self-loops), each with the first path that
    /// made it, as written.
    pub fn edges(&self) -> Vec<BTreeMap<usize, String>> {
        let mut out = vec![BTreeMap::new(); self.files.len()];
        for (file, facts) in self.facts.iter().enumerate() {
            let uses = facts.uses.iter().filter(|u| {
                // A re-export is an edge only when the file uses the name.
                !u.public
                    || u.binding
                        .as_ref()
                        .is_some_and(|b| facts.idents_outside_use.contains_key(b))
            });
            // Names a private glob brings in, wherever they are defined.
            for glob in facts.uses.iter().filter(|u| u.glob && !u.public) {
                let Some(g) = self.absolute(file, &glob.path) else {
                    continue;
                };
                for name in facts.idents_outside_use.keys() {
                    // Only an item: a bare name that is a module's (a method
                    // `spawn` beside `mod spawn`) is no use of it.
                    let Some((to, Found::Item)) =
                        self.resolve(&join(&g, std::slice::from_ref(name)))
                    else {
                        continue;
                    };
                    let below = self.file_module[to].starts_with(&self.file_module[file]);
                    if to != file && !below {
                        let why = format!("{}::{name}", glob.path.segments.join("::"));
                        out[file].entry(to).or_insert(why);
                    }
                }
            }
            let paths = uses.map(|u| &u.path).chain(&facts.paths);
            for p in paths {
                let Some(abs) = self.absolute(file, p) else {
                    continue;
                };
                if let Some((to, _)) = self.resolve(&abs) {
                    // A module naming its own descendants is a whole using
                    // its parts (dispatch, re-exports): containment, not a
                    // dependency between peers.
                    let below = self.file_module[to].starts_with(&self.file_module[file]);
                    if to != file && !below {
                        out[file].entry(to).or_insert_with(|| p.segments.join("::"));
                    }
                }
            }
        }
        out
    }
}

/// Circles of `edges`: for each strongly connected component of more than
/// one node, shortest cycles through its nodes until every node of it is
/// on one (each a list of nodes, first repeated at the end).
pub fn circles(edges: &[BTreeMap<usize, String>]) -> Vec<Vec<usize>> {
    let mut out = Vec::new();
    for scc in components(edges) {
        if scc.len() < 2 {
            continue;
        }
        let inside: BTreeSet<usize> = scc.iter().copied().collect();
        let mut covered = BTreeSet::new();
        for &start in &inside {
            if covered.contains(&start) {
                continue;
            }
            let cycle = shortest_cycle(edges, &inside, start);
            covered.extend(cycle.iter().copied());
            out.push(cycle);
        }
    }
    out
}

fn shortest_cycle(
    edges: &[BTreeMap<usize, String>],
    inside: &BTreeSet<usize>,
    start: usize,
) -> Vec<usize> {
    let mut prev: HashMap<usize, usize> = HashMap::new();
    let mut queue = VecDeque::from([start]);
    while let Some(n) = queue.pop_front() {
        for &m in edges[n].keys().filter(|m| inside.contains(m)) {
            if m == start {
                // Back from `n` to `start`, then turned around and closed.
                let mut cycle = vec![n];
                while *cycle.last().expect("not empty") != start {
                    cycle.push(prev[cycle.last().expect("not empty")]);
                }
                cycle.reverse();
                cycle.push(start);
                return cycle;
            }
            if let std::collections::hash_map::Entry::Vacant(e) = prev.entry(m) {
                e.insert(n);
                queue.push_back(m);
            }
        }
    }
    unreachable!("every node of a strongly connected component is on a cycle")
}

/// Tarjan's strongly connected components.
fn components(edges: &[BTreeMap<usize, String>]) -> Vec<Vec<usize>> {
    struct State<'a> {
        edges: &'a [BTreeMap<usize, String>],
        index: Vec<Option<usize>>,
        low: Vec<usize>,
        on_stack: Vec<bool>,
        stack: Vec<usize>,
        next: usize,
        out: Vec<Vec<usize>>,
    }
    fn visit(s: &mut State, v: usize) {
        s.index[v] = Some(s.next);
        s.low[v] = s.next;
        s.next += 1;
        s.stack.push(v);
        s.on_stack[v] = true;
        for &w in s.edges[v].keys() {
            match s.index[w] {
                None => {
                    visit(s, w);
                    s.low[v] = s.low[v].min(s.low[w]);
                }
                Some(iw) if s.on_stack[w] => s.low[v] = s.low[v].min(iw),
                Some(_) => {}
            }
        }
        if Some(s.low[v]) == s.index[v] {
            let mut scc = Vec::new();
            loop {
                let w = s.stack.pop().expect("v is on the stack");
                s.on_stack[w] = false;
                scc.push(w);
                if w == v {
                    break;
                }
            }
            scc.sort_unstable();
            s.out.push(scc);
        }
    }
    let n = edges.len();
    let mut s = State {
        edges,
        index: vec![None; n],
        low: vec![0; n],
        on_stack: vec![false; n],
        stack: Vec::new(),
        next: 0,
        out: Vec::new(),
    };
    for v in 0..n {
        if s.index[v].is_none() {
            visit(&mut s, v);
        }
    }
    s.out.sort();
    s.out
}
