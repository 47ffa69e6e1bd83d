//! Every default and bound of the sandbox, in one table. Grants say what
//! a Tick may reach; these say how much it may spend and how long the
//! host waits. The CLI's help shows the defaults from these constants.
//!
//! | constant | value | bounds |
//! |---|---|---|
//! | **memory** (grant key `max_memory`) | | |
//! | [`DEFAULT_MAX_MEMORY`] | 256 MiB | a Tick's linear memories, tables and compiled schemas, summed ([`crate::memory`]) |
//! | [`MAX_MEMORIES`], [`MAX_TABLES`], [`MAX_INSTANCES`] | 4, 16, 64 | what a wasm may declare and instantiate |
//! | [`TABLE_ELEMENT_BYTES`] | 8 | what one table element counts |
//! | [`HOST_OVERHEAD`] | 16 MiB | host memory per Tick beyond `max_memory` (documented, not enforced) |
//! | **handles** (`max_handles`) | | |
//! | [`DEFAULT_MAX_HANDLES`] | 1024 | WASI handles: files, sockets, streams, pollables |
//! | [`MAX_HANDLES_LIMIT`] | 1,000,000 | highest `max_handles` accepted |
//! | [`HANDLE_RESERVE`] | 16 | handles kept back from opening files at the cap |
//! | **compiling** (`max_wasm_size`, `compile_timeout`, `compile_memory`) | | |
//! | [`DEFAULT_MAX_WASM`] | 64 MiB | the wasm file read |
//! | [`DEFAULT_COMPILE_TIMEOUT`] | 60 s | wall and CPU time of one compile |
//! | [`DEFAULT_COMPILE_MEMORY`] | 4 GiB | the compile worker's memory |
//! | [`MIN_COMPILE_MEMORY`] | 64 MiB | lowest `compile_memory` accepted |
//! | [`SLOW_COMPILE`] | 1 s | when a command says it is compiling |
//! | [`OPTIMIZE_RETRY_AFTER`] | 1 h | how long after one background optimizing compile of a Tick (in any host sharing the cache) another may start |
//! | **files** (`max_write`, `max=` per dir) | | |
//! | [`ENTRY_COST`] | 4 KiB | what each created file or directory costs a write quota |
//! | **outgoing HTTP** (`allow_http`, `http_ca`) | | |
//! | [`MAX_REQUEST_BODY`], [`MAX_RESPONSE_BODY`] | 1 MiB, 8 MiB | bodies sent and read |
//! | [`CONNECT_TIMEOUT`], [`FIRST_BYTE_TIMEOUT`], [`BETWEEN_BYTES_TIMEOUT`] | 10 s, 30 s, 30 s | waits of one request |
//! | [`MAX_CONCURRENT_REQUESTS`] | 8 | requests in flight per Tick |
//! | [`MAX_CA_FILE`] | 1 MiB | the `http_ca` file read |
//! | **random, stdio, terminal** | | |
//! | [`MAX_RANDOM_BYTES`] | 1 MiB | one `get-random-bytes` call |
//! | [`PIPE_CAPACITY`] | 64 KiB | each of stdin and stdout buffered |
//! | [`KEY_QUEUE`] | 256 | key chunks queued for a Tick that does not read them |
//! | **CPU** | | |
//! | [`EPOCH_TICK`], [`IDLE_EPOCH_TICK`] | 1 ms, 10 ms | a guest's slice while guests are CPU-bound, and otherwise |
//! | [`EXIT_GRACE`] | 500 ms | a guest's time to return after its stdin closed |
//! | **virtual time** (`tickbox test`) | | |
//! | [`MAX_ADVANCE`], [`MAX_ADVANCE_FIRINGS`] | 366 days, 100,000 | one `advance` step |
//! | [`MAX_SORTED_LISTINGS`] | 4 MiB | directory entries held to be read in name order, per Tick (within [`HOST_OVERHEAD`]) |
//! | **compile cache** | | |
//! | [`DEFAULT_CACHE_MAX_BYTES`], [`MAX_CACHE_ENTRY_BYTES`] | 1 GiB, 2 GiB | the cache's size cap, the largest entry read |
//! | **trust store** ([`crate::consent`]) | | |
//! | [`MAX_TRUST_STORE_BYTES`] | 4 MiB | the approvals file read |
//!
//! A unit test checks the table's values against the constants.
use std::time::Duration;

// ---- memory and tables (memory.rs) ----

/// Linear memories a Tick may define (all its core modules together).
/// Every toolchain measured defines 1 (see the module docs' table).
pub const MAX_MEMORIES: usize = 4;
/// Tables a Tick may define (all its core modules together). The most
/// measured is 2 (a component's function table and its shim table).
pub const MAX_TABLES: usize = 16;
/// Core instances a Tick's store may create. The most measured is 14
/// (componentize-py 0.25.1).
pub const MAX_INSTANCES: usize = 64;
/// Bytes one table element counts against `max_memory` (a pointer).
pub const TABLE_ELEMENT_BYTES: usize = 8;
/// Default bound on a Tick's WASI handles (open files, directories,
/// sockets, streams, pollables): `max_handles`.
pub const DEFAULT_MAX_HANDLES: usize = 1024;
/// Largest `get-random-bytes` request; larger ones trap.
pub const MAX_RANDOM_BYTES: u64 = 1 << 20;
/// Host memory per Tick beyond `max_memory`, as documented: pipes, the
/// screen model, the handle table at its cap, compiled code aside.
pub const HOST_OVERHEAD: u64 = 16 << 20;

// ---- grants.rs ----

/// Default bound on a guest's linear memories and tables, all together.
pub const DEFAULT_MAX_MEMORY: u64 = 256 * 1024 * 1024;
/// Highest `max_handles` accepted (wasmtime's own table default).
pub const MAX_HANDLES_LIMIT: usize = 1_000_000;
/// Lowest `compile_memory` accepted: below it no real Tick compiles.
pub const MIN_COMPILE_MEMORY: u64 = 64 << 20;

// ---- compile.rs ----

/// Default `compile_timeout`.
pub const DEFAULT_COMPILE_TIMEOUT: Duration = Duration::from_secs(60);
/// Default `compile_memory`.
pub const DEFAULT_COMPILE_MEMORY: u64 = 4 << 30;
/// Default `max_wasm_size` (componentize-py output is about 40 MiB).
pub const DEFAULT_MAX_WASM: u64 = 64 << 20;

// ---- http.rs ----

/// Largest request body sent, in bytes (the body is buffered up to this
/// before the request leaves).
pub const MAX_REQUEST_BODY: u64 = 1 << 20;
/// Largest response body a guest may read, in bytes.
pub const MAX_RESPONSE_BODY: u64 = 8 << 20;
/// Time to connect, including name resolution and the TLS handshake.
pub const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);
/// Time from sending the request to the response head.
pub const FIRST_BYTE_TIMEOUT: Duration = Duration::from_secs(30);
/// Time between two chunks of the response body.
pub const BETWEEN_BYTES_TIMEOUT: Duration = Duration::from_secs(30);
/// Requests one Tick may have in flight (from `handle` until the response
/// body is finished or dropped).
pub const MAX_CONCURRENT_REQUESTS: usize = 8;
/// Largest `http_ca` file read.
pub const MAX_CA_FILE: u64 = 1 << 20;

// ---- handles.rs ----

/// Handles kept back from opening files, for the short-lived handles a
/// guest needs to keep working at its cap.
pub const HANDLE_RESERVE: usize = 16;

// ---- quota.rs ----

/// What creating one entry (a file, a directory or a hard link) costs
/// against a write quota, in bytes: 4 KiB, about what the entry costs on
/// disk (an inode and its share of a directory block on common
/// filesystems), so a quota bounds inodes as well as bytes. With
/// `max_write` N a Tick creates at most N / 4 KiB entries.
pub const ENTRY_COST: u64 = 4096;

// ---- lib.rs ----

/// How long a guest whose stdin closed may take to return by itself, by
/// default ([`crate::WasmSpec::exit_grace`]): the host's one grace for
/// both kinds of Tick.
pub use tickbox_host::limits::EXIT_GRACE;
/// How long a compile may run before a command says it is compiling (the
/// `after` the CLI passes to [`crate::WasmEngine::on_slow_compile`]).
pub const SLOW_COMPILE: Duration = Duration::from_secs(1);

// ---- pipe.rs ----

/// Bytes a pipe buffers before its writer waits.
pub const PIPE_CAPACITY: usize = 64 * 1024;

// ---- terminal.rs ----

/// Key chunks queued for a guest that does not read its keys: the host's
/// one bound for both kinds of Tick.
pub use tickbox_host::limits::KEY_QUEUE;

// ---- slices.rs ----

/// How often the epoch advances while a guest is CPU-bound: the longest a
/// running guest keeps the thread before it yields. Each hop of another
/// Tick's request can wait this long (see the module docs), so it bounds
/// the latency a spinning guest adds to its neighbours; a shorter tick means
/// more yields of a spinning guest.
pub const EPOCH_TICK: Duration = Duration::from_millis(1);
/// How often the epoch advances while no guest has used a whole slice
/// since the last tick. A guest that starts spinning gets at most this
/// long before the fast tick takes over.
pub const IDLE_EPOCH_TICK: Duration = Duration::from_millis(10);

// ---- cache.rs ----

/// How long after a background optimizing compile of a Tick started
/// (recorded in the compile cache, so every host sharing it knows) another
/// may start: one that failed, such as a compile that Cranelift cannot
/// finish within its bounds while Winch can, is not paid again at every
/// start, and hosts starting one Tick together run one compile.
pub const OPTIMIZE_RETRY_AFTER: Duration = Duration::from_secs(60 * 60);

/// Default cap on the cache's total size.
pub const DEFAULT_CACHE_MAX_BYTES: u64 = 1 << 30;
/// Largest entry ever read back (larger files are not ours: refused).
pub const MAX_CACHE_ENTRY_BYTES: u64 = 2 << 30;

// ---- trust store (consent.rs) ----

/// Largest approvals file read: thousands of approvals; a bigger file is
/// refused with one line rather than read into memory.
pub const MAX_TRUST_STORE_BYTES: u64 = 4 << 20;

// ---- virtual_time.rs ----

/// Most timer deadlines one `advance` fires before it gives up.
pub const MAX_ADVANCE_FIRINGS: u64 = 100_000;
/// Longest single `advance`.
pub const MAX_ADVANCE: Duration = Duration::from_secs(366 * 24 * 3600);
/// Under virtual time, the directory entries the host holds for one Tick
/// to give it in name order (each entry's name plus
/// `virtual_time::listing::ENTRY_BYTES`), over every listing it has not
/// finished reading; a listing that would pass it fails with
/// `insufficient-memory` (`nomem` for preview 1). About 60,000 entries of
/// 16-byte names.
pub const MAX_SORTED_LISTINGS: usize = 4 << 20;

#[cfg(test)]
mod tests {
    use super::*;

    /// The module docs' table states each value; a constant that changes
    /// without its row fails here.
    #[test]
    fn the_table_states_every_value() {
        let doc = include_str!("limits.rs");
        let row = |name: &str| {
            tickbox_host::util::limits_row(doc, name).unwrap_or_else(|| panic!("{name} has no row"))
        };
        const MIB: u64 = 1 << 20;
        let checks: &[(&str, String)] = &[
            (
                "DEFAULT_MAX_MEMORY",
                format!("{} MiB", DEFAULT_MAX_MEMORY / MIB),
            ),
            (
                "MAX_MEMORIES",
                format!("{MAX_MEMORIES}, {MAX_TABLES}, {MAX_INSTANCES}"),
            ),
            ("TABLE_ELEMENT_BYTES", format!("| {TABLE_ELEMENT_BYTES} |")),
            ("HOST_OVERHEAD", format!("{} MiB", HOST_OVERHEAD / MIB)),
            ("DEFAULT_MAX_HANDLES", format!("| {DEFAULT_MAX_HANDLES} |")),
            ("HANDLE_RESERVE", format!("| {HANDLE_RESERVE} |")),
            (
                "DEFAULT_MAX_WASM",
                format!("{} MiB", DEFAULT_MAX_WASM / MIB),
            ),
            (
                "DEFAULT_COMPILE_TIMEOUT",
                format!("{} s", DEFAULT_COMPILE_TIMEOUT.as_secs()),
            ),
            (
                "DEFAULT_COMPILE_MEMORY",
                format!("{} GiB", DEFAULT_COMPILE_MEMORY >> 30),
            ),
            (
                "MIN_COMPILE_MEMORY",
                format!("{} MiB", MIN_COMPILE_MEMORY / MIB),
            ),
            ("SLOW_COMPILE", format!("{} s", SLOW_COMPILE.as_secs())),
            (
                "OPTIMIZE_RETRY_AFTER",
                format!("{} h", OPTIMIZE_RETRY_AFTER.as_secs() / 3600),
            ),
            ("ENTRY_COST", format!("{} KiB", ENTRY_COST / 1024)),
            (
                "MAX_REQUEST_BODY",
                format!(
                    "{} MiB, {} MiB",
                    MAX_REQUEST_BODY / MIB,
                    MAX_RESPONSE_BODY / MIB
                ),
            ),
            (
                "CONNECT_TIMEOUT",
                format!(
                    "{} s, {} s, {} s",
                    CONNECT_TIMEOUT.as_secs(),
                    FIRST_BYTE_TIMEOUT.as_secs(),
                    BETWEEN_BYTES_TIMEOUT.as_secs()
                ),
            ),
            (
                "MAX_CONCURRENT_REQUESTS",
                format!("| {MAX_CONCURRENT_REQUESTS} |"),
            ),
            ("MAX_CA_FILE", format!("{} MiB", MAX_CA_FILE / MIB)),
            (
                "MAX_RANDOM_BYTES",
                format!("{} MiB", MAX_RANDOM_BYTES / MIB),
            ),
            ("PIPE_CAPACITY", format!("{} KiB", PIPE_CAPACITY / 1024)),
            ("KEY_QUEUE", format!("| {KEY_QUEUE} |")),
            (
                "EPOCH_TICK",
                format!(
                    "{} ms, {} ms",
                    EPOCH_TICK.as_millis(),
                    IDLE_EPOCH_TICK.as_millis()
                ),
            ),
            ("EXIT_GRACE", format!("{} ms", EXIT_GRACE.as_millis())),
            (
                "MAX_ADVANCE",
                format!("{} days", MAX_ADVANCE.as_secs() / 86_400),
            ),
            (
                "MAX_SORTED_LISTINGS",
                format!("{} MiB", MAX_SORTED_LISTINGS as u64 / MIB),
            ),
            (
                "DEFAULT_CACHE_MAX_BYTES",
                format!(
                    "{} GiB, {} GiB",
                    DEFAULT_CACHE_MAX_BYTES >> 30,
                    MAX_CACHE_ENTRY_BYTES >> 30
                ),
            ),
            (
                "MAX_TRUST_STORE_BYTES",
                format!("{} MiB", MAX_TRUST_STORE_BYTES / MIB),
            ),
        ];
        for (name, want) in checks {
            assert!(
                row(name).contains(want.as_str()),
                "{name}: `{want}` not in `{}`",
                row(name)
            );
        }
        assert!(row("MAX_HANDLES_LIMIT").contains("1,000,000") && MAX_HANDLES_LIMIT == 1_000_000);
        assert!(row("MAX_ADVANCE_FIRINGS").contains("100,000") && MAX_ADVANCE_FIRINGS == 100_000);
    }
}
