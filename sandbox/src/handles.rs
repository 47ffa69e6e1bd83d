//! What a guest at its handle cap (`max_handles`) gets: an error it can
//! handle, never a trap, and enough headroom to keep answering.
//!
//! wasmtime-wasi traps a guest whose resource table is full, wherever the
//! push happens. Opening files is the one way a guest piles up handles by
//! itself, so the open calls are wrapped (`open-at` for a component, in
//! `mod.rs`; `path_open` for a preview-1 module, here): while they run the
//! table's cap is lowered by [`HANDLE_RESERVE`], and a full table becomes
//! the guest's error (`insufficient-memory` for a component, errno `mfile`
//! for a preview-1 module: `EMFILE`, "no file descriptors available" in
//! wasi-libc's words). The reserve is left for the handles a guest needs for a moment
//! to go on working (a stream for a read, a pollable for a wait), so a guest
//! that holds as many files as it may still reads its stdin and answers.
//!
//! What can go wrong: if an open is cancelled mid-call (the session ends
//! and drops the guest's future) the lowered cap stays, but the store is
//! dropped with it. Preview 1's `sock_accept` is not implemented by
//! wasmtime-wasi (it returns `notsock`), so it spends no handle.

use super::ModuleState;
pub use crate::limits::HANDLE_RESERVE;
use wasmtime::component::ResourceTableError;
use wasmtime::{AsContextMut, Caller, Extern, Linker};
use wasmtime_wasi::p1::wasi_snapshot_preview1 as p1;
use wasmtime_wasi::WasiView;

/// WASI preview 1's errno `mfile` (too many open files).
pub const P1_ERRNO_MFILE: i32 = 33;

/// Whether an error is a full resource table.
pub fn is_table_full(e: &wasmtime::Error) -> bool {
    e.chain().any(|c| {
        matches!(
            c.downcast_ref::<ResourceTableError>(),
            Some(ResourceTableError::Full)
        )
    })
}

/// The preamble of wiggle's generated glue, for the preview-1 shadows that
/// call wasmtime-wasi's own ABI functions: the guest's memory (`export`, the
/// caller's `memory` export) and the store's state, with this call's
/// hostcall fuel handed to its WASI context.
pub(crate) fn preview1_call<'a>(
    caller: &'a mut Caller<'_, ModuleState>,
    export: &'a Option<Extern>,
) -> wasmtime::Result<(wiggle::GuestMemory<'a>, &'a mut ModuleState)> {
    let fuel = caller.as_context_mut().hostcall_fuel();
    let (mem, st) = match export {
        Some(Extern::Memory(m)) => {
            let (mem, st) = m.data_and_store_mut(caller);
            (wiggle::GuestMemory::Unshared(mem), st)
        }
        Some(Extern::SharedMemory(m)) => (wiggle::GuestMemory::Shared(m.data()), caller.data_mut()),
        _ => wasmtime::bail!("missing required memory export"),
    };
    p1::WasiSnapshotPreview1::set_hostcall_fuel(&mut st.wasi, fuel);
    Ok((mem, st))
}

/// Shadows preview 1's `path_open` with one that keeps the reserve and
/// answers `mfile` at the cap. It calls wasmtime-wasi's own `path_open`
/// (the ABI-level function the linker would have called), so everything
/// else about opening stays wasmtime-wasi's.
pub fn add_path_open(linker: &mut Linker<ModuleState>) -> wasmtime::Result<()> {
    type Args = (i32, i32, i32, i32, i32, i64, i64, i32, i32);
    linker.func_wrap_async(
        "wasi_snapshot_preview1",
        "path_open",
        |mut caller: Caller<'_, ModuleState>,
         (fd, dirflags, path, len, oflags, base, inh, fdflags, out): Args| {
            Box::new(async move {
                let export = caller.get_export("memory");
                let (mut mem, st) = preview1_call(&mut caller, &export)?;
                let wasi = &mut st.wasi;
                let cap = wasi.ctx().table.max_capacity();
                wasi.ctx()
                    .table
                    .set_max_capacity(cap.saturating_sub(HANDLE_RESERVE));
                let opened = p1::path_open(
                    &mut *wasi, &mut mem, fd, dirflags, path, len, oflags, base, inh, fdflags, out,
                )
                .await;
                wasi.ctx().table.set_max_capacity(cap);
                match opened {
                    Err(e) if is_table_full(&e) => {
                        tracing::info!("a preview-1 guest at its handle cap tried to open a file");
                        Ok(P1_ERRNO_MFILE)
                    }
                    other => other,
                }
            })
        },
    )?;
    Ok(())
}
