//! `tickbox cache ls|clean`: the compile cache of wasm Ticks, and the store
//! of Ticks pulled from registries.

use super::exit::Exit;
use clap::{Args, Subcommand};
use serde_json::json;
use tickbox_runtime::backend::wasm::cache::Cache;
use tickbox_runtime::backend::wasm::grants::parse_size;

/// The exit codes and where the cache lives.
pub const HELP: &str = "\
The cache is $TICKBOX_CACHE_DIR, else $XDG_CACHE_HOME/tickbox/wasm, else
~/.cache/tickbox/wasm; its size cap is $TICKBOX_CACHE_MAX_SIZE (default 1GiB).
Ticks pulled from registries are in the store ($TICKBOX_STORE_DIR, else
`oci` beside the cache), listed under `store`; `clean` without --keep
empties it too (a pinned reference then pulls again).

Exit codes:
  0    success (stdout: one JSON document; `ls` on a terminal: a table, unless --json)
  2    usage error
  3    the cache or store directory is missing its owner/mode guarantees, or unreadable";

#[derive(Args)]
pub struct CacheArgs {
    #[command(subcommand)]
    pub command: CacheCommand,
    /// Pretty-print JSON output
    #[arg(long, global = true)]
    pub pretty: bool,
    /// JSON also on a terminal (`ls` prints a table there otherwise)
    #[arg(long, global = true)]
    pub json: bool,
}

#[derive(Subcommand)]
pub enum CacheCommand {
    /// List entries, least recently used first, with the cache's size and cap
    Ls,
    /// Remove every entry, or with --keep only the least recently used ones beyond SIZE
    Clean {
        /// Keep the most recently used entries up to this total size
        #[arg(long, value_name = "SIZE")]
        keep: Option<String>,
    },
}

pub fn run(args: CacheArgs) -> Result<(), Exit> {
    let dir = super::env::cache_dir()
        .ok_or_else(|| Exit::usage("no cache directory: set TICKBOX_CACHE_DIR or HOME"))?;
    // The engine hash only names new entries; listing and cleaning need none.
    let cache = Cache::open(dir, 0)
        .map_err(Exit::session)?
        .with_max_bytes(super::env::cache_max_bytes());
    use std::io::IsTerminal;
    let table = !args.json && !args.pretty && std::io::stdout().is_terminal();
    let v = match args.command {
        CacheCommand::Ls if table => return super::emit_text(&ls_table(&cache)?),
        CacheCommand::Ls => {
            let entries = cache.entries();
            let total: u64 = entries.iter().map(|e| e.bytes).sum();
            json!({
                "dir": cache.dir(),
                "max_bytes": cache.max_bytes(),
                "total_bytes": total,
                "entries": entries,
                "store": store_listing()?,
            })
        }
        CacheCommand::Clean { keep } => {
            let (removed, freed) = match keep {
                None => {
                    let (files, bytes) = match store()? {
                        Some(s) => s.clean(),
                        None => (0, 0),
                    };
                    let (r, f) = cache.clean();
                    (r + files, f + bytes)
                }
                Some(k) => {
                    let cap = parse_size(&k)
                        .or((k.trim() == "0").then_some(0))
                        .ok_or_else(|| {
                            Exit::usage(format!("--keep {k}: expected a size such as 512MiB"))
                        })?;
                    cache.evict_to(cap, None)
                }
            };
            json!({"dir": cache.dir(), "removed": removed, "freed_bytes": freed})
        }
    };
    super::emit(&v, args.pretty)
}

/// The store, when there is a directory for it and it exists (listing and
/// cleaning never create it).
fn store() -> Result<Option<tickbox_registry::Store>, Exit> {
    match super::env::store_dir() {
        Some(d) if d.exists() => tickbox_registry::Store::open(d)
            .map(Some)
            .map_err(Exit::session),
        _ => Ok(None),
    }
}

fn store_listing() -> Result<serde_json::Value, Exit> {
    Ok(match store()? {
        Some(s) => {
            let entries = s.entries();
            let total: u64 = entries.iter().map(|e| e.bytes).sum();
            json!({"dir": s.dir(), "total_bytes": total, "entries": entries})
        }
        None => json!({"dir": super::env::store_dir(), "total_bytes": 0, "entries": []}),
    })
}

/// `cache ls` for a person: sizes in MB, the most recently used first.
fn ls_table(cache: &Cache) -> Result<String, Exit> {
    use std::fmt::Write;
    let mb = |b: u64| format!("{:.1} MB", b as f64 / 1e6);
    let mut entries = cache.entries();
    entries.reverse();
    let total: u64 = entries.iter().map(|e| e.bytes).sum();
    let mut out = String::new();
    let _ = writeln!(
        out,
        "compile cache {}: {} entries, {} of {}",
        cache.dir().display(),
        entries.len(),
        mb(total),
        mb(cache.max_bytes())
    );
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    for e in &entries {
        let ago = now.saturating_sub(e.last_used);
        let ago = match ago {
            s if s < 120 => format!("{s} s ago"),
            s if s < 7200 => format!("{} min ago", s / 60),
            s if s < 172_800 => format!("{} h ago", s / 3600),
            s => format!("{} days ago", s / 86_400),
        };
        let compiler = e.holds();
        let _ = writeln!(
            out,
            "  {:.16}…  {compiler:9} {:>10}  used {ago}",
            e.key,
            mb(e.bytes)
        );
    }
    match store()? {
        Some(s) => {
            let blobs = s.entries();
            let total: u64 = blobs.iter().map(|b| b.bytes).sum();
            let _ = writeln!(
                out,
                "store {}: {} blobs, {}",
                s.dir().display(),
                blobs.len(),
                mb(total)
            );
        }
        None => {
            let _ = writeln!(out, "store: empty");
        }
    }
    Ok(out.trim_end().to_string())
}
