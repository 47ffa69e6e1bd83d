//! Scenario tests for Ticks (`tickbox test`): a TOML file names a Tick and
//! lists steps — tool calls, keys, resizes, virtual time, and expectations
//! on the state and the screen — and the runner plays them against a fresh
//! instance and says, on failure, which step expected what and what was
//! there.
//!
//! - `model` — the file format, parsed and checked ([`load`], [`parse`];
//!   schema: `scenario.schema.json` in this directory; docs/guide/testing.md);
//! - `policy` — what the command line lets a file ask for ([`Policy`]:
//!   grant roots, allowed environment variables);
//! - `files` — scenario and snapshot files read and written only as
//!   regular files, never through a symbolic link;
//! - `fixtures` — `[[http]]` answers in place of the network and `[files]`
//!   seeding the scratch directory ([`FixtureTable`], [`seed_files`]);
//! - `keys` — key names to terminal bytes;
//! - `run` — one scenario against one fresh instance ([`run()`]);
//! - `diff` — state and screen comparisons, bounded and escaped;
//! - [`report`] — text, JSON and JUnit;
//! - `record` — a live session recorded as a scenario ([`Recorder`]);
//! - [`trace`] — a run's trace ([`RunOptions::trace`]): the screen as an
//!   asciicast v2 cast with the protocol frames, states and step outcomes
//!   in it, bounded; and reading one back ([`trace::parse`]).
//!
//! The submodules other than [`report`] and [`trace`] are private; what a user of the
//! library needs is re-exported here.
//!
//! A wasm Tick runs with virtual time and seeded randomness by default
//! ([`tickbox_sandbox::virtual_time`]), so its screens and states are
//! the same on every run; a native Tick runs on real time.
//!
//! ```toml
//! [tick]
//! path = "counter.wasm"
//!
//! [[step]]
//! keys = ["+", "+"]
//!
//! [[step]]
//! expect_state = { pointer = "/count", equals = 2 }
//!
//! [[step]]
//! expect_screen = { contains = "Counter: 2" }
//! ```

pub(crate) mod diff;
pub use diff::screen_diff;
pub(crate) mod files;
pub(crate) mod fixtures;
pub(crate) mod keys;
pub(crate) mod model;
pub(crate) mod policy;
pub(crate) mod record;
pub mod report;
pub(crate) mod run;
pub mod trace;

pub use files::{read_regular, remove_regular, write_regular, FileError};
pub use fixtures::{
    seed as seed_files, FixtureTable, HttpFixture, SeedFile, MAX_FIXTURE_BODY, MAX_FIXTURE_HEADERS,
    MAX_FIXTURE_PATH, MAX_FIXTURE_PATH_PARTS, MAX_FIXTURE_TOTAL, MAX_FIXTURE_URL,
    MAX_HTTP_FIXTURES, MAX_SEED_FILE, MAX_SEED_FILES,
};
pub use model::{dir_grant, load, parse, parse_duration, stem, Scenario, ScenarioError};
pub use policy::Policy;
pub use record::{RecordTick, RecordTime, Recorder, KEY_MERGE};
pub use run::{
    pending_path, run, unstarted_trace, Failure, Outcome, Prepared, RunOptions, ScenarioResult,
    TickKind, TimeBudget, DEFAULT_RUN_TIMEOUT, DEFAULT_SCENARIO_TIMEOUT, MAX_SNAPSHOT_BYTES,
    MAX_WAIT_JUMPS,
};

use std::path::{Path, PathBuf};

/// Most scenario files one run takes.
pub const MAX_SCENARIO_FILES: usize = 10_000;
/// Deepest directory level searched below a DIR argument.
pub const MAX_DEPTH: usize = 16;
/// The suffix that marks a scenario file inside a directory.
pub const SUFFIX: &str = ".scenario.toml";

/// The scenario files named by FILE and DIR arguments: a file is taken as
/// it is, a directory is searched (sorted, to [`MAX_DEPTH`], no symlinked
/// directories) for `*.scenario.toml`.
pub fn discover(paths: &[PathBuf]) -> Result<Vec<PathBuf>, String> {
    discover_at_most(paths, MAX_SCENARIO_FILES)
}

/// One of `count` disjoint parts of a suite (part `K/N` is `index` K-1 of
/// `count` N).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Shard {
    pub index: u32,
    pub count: u32,
}

impl Shard {
    /// Parses `K/N` (1 ≤ K ≤ N ≤ 1024).
    pub fn parse(text: &str) -> Result<Shard, String> {
        let bad = || format!("shard {text:?}: give K/N with 1 <= K <= N <= 1024, e.g. 2/4");
        let (k, n) = text.split_once('/').ok_or_else(bad)?;
        let (k, n): (u32, u32) = (
            k.trim().parse().map_err(|_| bad())?,
            n.trim().parse().map_err(|_| bad())?,
        );
        if k == 0 || k > n || n > 1024 {
            return Err(bad());
        }
        Ok(Shard {
            index: k - 1,
            count: n,
        })
    }

    /// Whether a scenario file belongs to this shard: decided by its path
    /// alone (FNV-1a of the path as discovered, which is the same on every
    /// machine of a CI matrix running from the same checkout), so each file
    /// is in exactly one shard and adding a file moves no other.
    pub fn holds(&self, file: &Path) -> bool {
        let mut h: u64 = 0xcbf2_9ce4_8422_2325;
        for b in file.to_string_lossy().bytes() {
            h ^= u64::from(b);
            h = h.wrapping_mul(0x0100_0000_01b3);
        }
        h % u64::from(self.count) == u64::from(self.index)
    }
}

fn discover_at_most(paths: &[PathBuf], max: usize) -> Result<Vec<PathBuf>, String> {
    let mut out = Vec::new();
    for p in paths {
        let meta = std::fs::metadata(p).map_err(|e| format!("{}: {e}", p.display()))?;
        if meta.is_dir() {
            walk(p, 0, max, &mut out)?;
        } else {
            push(&mut out, max, p.clone())?;
        }
    }
    Ok(out)
}

fn push(out: &mut Vec<PathBuf>, max: usize, p: PathBuf) -> Result<(), String> {
    if out.len() >= max {
        return Err(format!(
            "more than {max} scenario files (the limit); name fewer"
        ));
    }
    out.push(p);
    Ok(())
}

fn walk(dir: &Path, depth: usize, max: usize, out: &mut Vec<PathBuf>) -> Result<(), String> {
    if depth > MAX_DEPTH {
        return Ok(());
    }
    let mut entries: Vec<_> = std::fs::read_dir(dir)
        .map_err(|e| format!("{}: {e}", dir.display()))?
        .filter_map(Result::ok)
        .collect();
    entries.sort_by_key(|e| e.file_name());
    for e in entries {
        let path = e.path();
        let Ok(ft) = e.file_type() else { continue };
        if ft.is_dir() {
            walk(&path, depth + 1, max, out)?;
        } else if path
            .file_name()
            .is_some_and(|n| n.to_string_lossy().ends_with(SUFFIX))
        {
            push(out, max, path)?;
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shards_are_disjoint_and_cover_the_suite() {
        let files: Vec<PathBuf> = (0..200)
            .map(|i| PathBuf::from(format!("s/{i}.scenario.toml")))
            .collect();
        for n in [1, 2, 3, 7] {
            let mut seen = vec![0; files.len()];
            for k in 1..=n {
                let shard = Shard::parse(&format!("{k}/{n}")).unwrap();
                for (i, f) in files.iter().enumerate() {
                    seen[i] += usize::from(shard.holds(f));
                }
            }
            assert!(seen.iter().all(|&c| c == 1), "{n} shards");
        }
        // Spread: no shard of 4 is empty or holds most of 200 files.
        for k in 1..=4 {
            let s = Shard::parse(&format!("{k}/4")).unwrap();
            let held = files.iter().filter(|f| s.holds(f)).count();
            assert!((20..=80).contains(&held), "shard {k}/4 holds {held}");
        }
        for bad in ["0/2", "3/2", "1/0", "x/2", "2", "1/2000"] {
            assert!(Shard::parse(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn discovery_takes_files_and_searches_directories() {
        let dir = std::env::temp_dir().join(format!("tickbox-discover-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(dir.join("sub")).unwrap();
        for f in [
            "b.scenario.toml",
            "a.scenario.toml",
            "notes.toml",
            "sub/c.scenario.toml",
        ] {
            std::fs::write(dir.join(f), "").unwrap();
        }
        let found = discover(&[dir.clone(), dir.join("notes.toml")]).unwrap();
        let names: Vec<String> = found
            .iter()
            .map(|p| p.strip_prefix(&dir).unwrap().display().to_string())
            .collect();
        assert_eq!(
            names,
            [
                "a.scenario.toml",
                "b.scenario.toml",
                "sub/c.scenario.toml",
                "notes.toml"
            ]
        );
        assert!(discover(&[dir.join("missing")]).is_err());
        // The file bound: four found, so a bound of three refuses.
        assert_eq!(
            discover_at_most(&[dir.clone(), dir.join("notes.toml")], 4)
                .unwrap()
                .len(),
            4
        );
        let e = discover_at_most(&[dir.clone(), dir.join("notes.toml")], 3).unwrap_err();
        assert!(e.contains("more than 3 scenario files (the limit)"), "{e}");
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
