//! One memory budget per Tick, and the counts a Tick may declare.
//!
//! `max_memory` bounds the **sum** of everything a Tick's store holds in
//! linear memories and tables (each table element counted as
//! [`TABLE_ELEMENT_BYTES`]), not each memory by itself: a guest declaring
//! several memories or tables cannot multiply its bound. The [`Budget`]
//! limiter sees every creation and growth (creation is growth from 0) and
//! traps the guest with a message naming `max_memory` when the sum would
//! pass it. Growth that wasmtime approves but then fails is given back.
//!
//! Before compiling, [`check_declared`] counts the memories and tables that
//! every core module inside the wasm defines and refuses more than
//! [`MAX_MEMORIES`] / [`MAX_TABLES`] with a one-line error. Real toolchains
//! need far less. Measured (defined memories / defined tables / core
//! modules / core instances, all nested modules counted with wasmparser):
//!
//! | toolchain | memories | tables | modules | instances |
//! |---|---|---|---|---|
//! | C, wasi-libc, wasm32-wasip1 (`examples/c`) | 1 | 1 | 1 | — |
//! | Rust 1.95 wasm32-wasip2 (the test guests) | 1 | 2 | 3 | 3 |
//! | componentize-py 0.25.1, a trivial `tick` app (18.4 MB) | 1 | 2 | 14 | 14 |
//! | componentize-js 0.23.0, a trivial `tick` app (13.9 MB) | 1 | 2 | 4 | 4 |
//!
//! The componentize tools link their core modules around one shared memory
//! and one shared function table (imported by the others: 10 imported
//! memories and tables in the Python one), plus wit-component's shim
//! table. So the caps leave room of 4× for memories, 8× for tables and
//! more than 4× for instances over the largest real case. The limiter
//! enforces the same counts at instantiation (and [`MAX_INSTANCES`] core
//! instances) for a module instantiated more than once.
//!
//! What the host allocates on the guest's behalf is bounded by constants
//! outside `max_memory`: WASI handles by `max_handles` (default
//! [`crate::limits::DEFAULT_MAX_HANDLES`]), one random-bytes call by [`crate::limits::MAX_RANDOM_BYTES`],
//! each stdio pipe by `pipe::PIPE_CAPACITY` (64 KiB), the view by its
//! fixed-size screen model. A Tick's host-side footprint is therefore
//! `max_memory` plus about [`crate::limits::HOST_OVERHEAD`], which the docs state.

use crate::limits::{MAX_INSTANCES, MAX_MEMORIES, MAX_TABLES, TABLE_ELEMENT_BYTES};
use std::sync::Arc;
use tickbox_host::backend::MemoryCharge;
use wasmparser::{Parser, Payload};

/// How many memories and tables a wasm file's core modules define.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Declared {
    /// Defined (not imported) linear memories.
    pub memories: usize,
    /// Defined (not imported) tables.
    pub tables: usize,
}

/// Counts what every core module of `wasm` (nested ones included) defines.
/// Malformed input is left to the compiler, which reports it better.
pub fn declared(wasm: &[u8]) -> Declared {
    let mut d = Declared::default();
    for payload in Parser::new(0).parse_all(wasm) {
        match payload {
            Ok(Payload::MemorySection(s)) => d.memories += s.count() as usize,
            Ok(Payload::TableSection(s)) => d.tables += s.count() as usize,
            Ok(_) => {}
            Err(_) => break,
        }
    }
    d
}

/// Refuses a wasm file that defines more memories or tables than a Tick
/// may have; the error is one line naming the bound.
pub fn check_declared(wasm: &[u8]) -> Result<Declared, String> {
    let d = declared(wasm);
    if d.memories > MAX_MEMORIES {
        return Err(format!(
            "it defines {} linear memories; a Tick may define at most {MAX_MEMORIES}",
            d.memories
        ));
    }
    if d.tables > MAX_TABLES {
        return Err(format!(
            "it defines {} tables; a Tick may define at most {MAX_TABLES}",
            d.tables
        ));
    }
    Ok(d)
}

/// The per-Tick memory budget (a wasmtime `ResourceLimiter`).
pub struct Budget {
    /// The bound, shared with the session, which charges what the host
    /// keeps for this Tick (its compiled schemas) to it.
    charge: Arc<MemoryCharge>,
    used: usize,
    /// The last approved growth, given back if wasmtime then fails it.
    last_memory: usize,
    last_table: usize,
    /// Where running into the bound is recorded (`limit`).
    audit: Option<tickbox_telemetry::audit::Audit>,
}

impl Budget {
    /// A budget of `max` bytes.
    pub fn new(max: u64) -> Budget {
        Budget::charging(MemoryCharge::new(max))
    }

    /// A budget that shares its bound with the host's charges.
    pub fn charging(charge: Arc<MemoryCharge>) -> Budget {
        Budget {
            charge,
            used: 0,
            last_memory: 0,
            last_table: 0,
            audit: None,
        }
    }

    /// Records running into the bound in `audit` (a `limit` event).
    pub fn audited(mut self, audit: Option<tickbox_telemetry::audit::Audit>) -> Budget {
        self.audit = audit;
        self
    }

    /// The bound this budget counts against.
    pub fn charge(&self) -> &Arc<MemoryCharge> {
        &self.charge
    }

    /// Bytes currently counted.
    pub fn used(&self) -> usize {
        self.used
    }

    fn take(&mut self, delta: usize, what: std::fmt::Arguments<'_>) -> wasmtime::Result<()> {
        let total = self.used.saturating_add(delta);
        let host = self.charge.host();
        if total.saturating_add(host) > self.charge.max() {
            if let Some(audit) = &self.audit {
                let max = self.charge.max() as u64;
                audit.limit("max_memory", max, &format!("the guest asked to {what}"));
            }
            // An error (not `Ok(false)`) traps the guest with this message,
            // which then becomes the session's end reason.
            wasmtime::bail!(
                "memory limit exceeded: the guest asked to {what}, which would bring its memories and tables to {total} bytes; max_memory is {} bytes for all of them together and the {host} bytes the host keeps for this Tick (its compiled catalog)",
                self.charge.max()
            );
        }
        self.used = total;
        self.charge.set_guest(total);
        Ok(())
    }
}

impl wasmtime::ResourceLimiter for Budget {
    fn memory_growing(
        &mut self,
        current: usize,
        desired: usize,
        _max: Option<usize>,
    ) -> wasmtime::Result<bool> {
        let delta = desired.saturating_sub(current);
        self.take(
            delta,
            format_args!("grow a linear memory from {current} to {desired} bytes"),
        )?;
        self.last_memory = delta;
        Ok(true)
    }

    fn memory_grow_failed(&mut self, _error: wasmtime::Error) -> wasmtime::Result<()> {
        self.used = self
            .used
            .saturating_sub(std::mem::take(&mut self.last_memory));
        self.charge.set_guest(self.used);
        Ok(())
    }

    fn table_growing(
        &mut self,
        current: usize,
        desired: usize,
        _max: Option<usize>,
    ) -> wasmtime::Result<bool> {
        let delta = desired
            .saturating_sub(current)
            .saturating_mul(TABLE_ELEMENT_BYTES);
        self.take(
            delta,
            format_args!("grow a table from {current} to {desired} elements"),
        )?;
        self.last_table = delta;
        Ok(true)
    }

    fn table_grow_failed(&mut self, _error: wasmtime::Error) -> wasmtime::Result<()> {
        self.used = self
            .used
            .saturating_sub(std::mem::take(&mut self.last_table));
        self.charge.set_guest(self.used);
        Ok(())
    }

    fn instances(&self) -> usize {
        MAX_INSTANCES
    }
    fn tables(&self) -> usize {
        MAX_TABLES
    }
    fn memories(&self) -> usize {
        MAX_MEMORIES
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use wasmtime::ResourceLimiter;

    #[test]
    fn the_budget_is_the_sum_of_memories_and_tables() {
        let mut b = Budget::new(100 << 20);
        assert!(b.memory_growing(0, 40 << 20, None).unwrap());
        assert!(b.memory_growing(0, 40 << 20, None).unwrap());
        let e = b.memory_growing(0, 40 << 20, None).unwrap_err().to_string();
        assert!(e.contains("max_memory is 104857600 bytes"), "{e}");
        assert_eq!(b.used(), 80 << 20);
        // Tables count too: 20 MiB left is 2.6M elements.
        assert!(b.table_growing(0, 2 << 20, None).unwrap());
        assert!(b.table_growing(2 << 20, 3 << 20, None).is_err());
        // A growth that wasmtime then fails is given back.
        assert!(b.memory_growing(40 << 20, 41 << 20, None).unwrap());
        b.memory_grow_failed(wasmtime::format_err!("no")).unwrap();
        assert_eq!(b.used(), (80 << 20) + (16 << 20));
    }
}
