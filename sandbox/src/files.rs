//! Files: the linker shadows that keep file access within its bounds
//! (`open-at` at the handle cap, writes metered against the quotas), the
//! audit's record of which grants were used, and the rule that no grant
//! reaches tickbox's own state. The grants themselves are
//! `grants::DirGrant`; the grant area is `grant_area`, the quotas `quota`.
//!
//! **Which grants were used** (a `used` event of kind `dir`, once per
//! grant and kind): a grant is used when a call through one of its
//! descriptors reaches the filesystem, that is, succeeds or fails for
//! another reason than the grant's refusal (a missing file was still
//! looked for there). It is *written* when that call is one a read-only
//! grant refuses before trying: `open-at` creating, truncating or opening
//! for writing, `create-directory-at`, `rename-at`, `link-at`,
//! `unlink-file-at`, `remove-directory-at`, `set-times(-at)`. A write that
//! failed counts too: `create_dir_all` on a directory that exists fails
//! with `exist` through a writable grant and `not-permitted` through a
//! read-only one, and a Tick may take another path on each (the notes
//! example does), so only a grant the Tick never asked to change
//! anything through is one it would run the same under read-only. The
//! calls that read are
//! `open-at`, `stat(-at)`, `readlink-at` and `read-directory` (the
//! shadows of `stat(-at)`, `set-times(-at)` and `read-directory` are
//! virtual time's, which note uses through the same `noted`); the rest
//! (`get-type`, `metadata-hash`, `sync`, `advise`, `is-same-object`) work
//! only on a descriptor one of those made or on the preopen itself, and
//! are not counted alone. Reads and writes of file data go through a
//! descriptor `open-at` made, so its grant is already recorded. A
//! preview-1 module's file calls go through wasmtime-wasi's internals and
//! are not seen: its grants are not recorded.

use super::*;

/// `wasi:filesystem` `open-at` with the handle cap as the guest's error
/// (`insufficient-memory`) rather than a trap.
#[allow(clippy::type_complexity)]
pub(crate) fn open_at_capped(
    mut store: wasmtime::StoreContextMut<'_, GuestState>,
    (fd, path_flags, path, open_flags, flags): (
        Resource<wasmtime_wasi::filesystem::Descriptor>,
        fs_types::PathFlags,
        String,
        fs_types::OpenFlags,
        fs_types::DescriptorFlags,
    ),
) -> Box<
    dyn std::future::Future<
            Output = wasmtime::Result<(
                Result<Resource<wasmtime_wasi::filesystem::Descriptor>, FsErrorCode>,
            )>,
        > + Send
        + '_,
> {
    Box::new(async move {
        let parent = fd.rep();
        let s = store.data_mut();
        // Creating a file is charged to the write quotas (see `quota`).
        let charged = match charge_create(s, parent, path_flags, &path, open_flags).await {
            Ok(charged) => charged,
            Err(code) => return Ok((Err(code),)),
        };
        // Keep the reserve for the guest's short-lived handles (see `handles`).
        let cap = s.table.max_capacity();
        s.table
            .set_max_capacity(cap.saturating_sub(handles::HANDLE_RESERVE));
        // Kept for the audit only when there is one (the path is the guest's).
        let attempted = s.audit.as_ref().map(|_| path.clone());
        let mut view = s.filesystem();
        let opened =
            fs_types::HostDescriptor::open_at(&mut view, fd, path_flags, path, open_flags, flags)
                .await;
        s.table.set_max_capacity(cap);
        if opened.is_err() {
            quota::give_back_all(&charged, quota::ENTRY_COST);
        }
        match opened {
            Ok(r) => {
                // The new descriptor writes under its parent's grant quota.
                s.grant_handles.opened(parent, r.rep());
                note_use(s, parent, opens_for_writing(open_flags, flags));
                Ok((Ok(r),))
            }
            Err(err) => match err.downcast() {
                Ok(code) => {
                    if let (Some(audit), Some(path)) = (&s.audit, &attempted) {
                        audit_refused_path(audit, path, &code);
                    }
                    if !refused(&code) {
                        note_use(s, parent, opens_for_writing(open_flags, flags));
                    }
                    Ok((Err(code),))
                }
                Err(trap) if handles::is_table_full(&trap) => {
                    tracing::info!("a guest at its handle cap tried to open a file");
                    if let Some(audit) = &s.audit {
                        let cap = s.table.max_capacity() as u64;
                        audit.limit(
                            "max_handles",
                            cap,
                            "the guest tried to open a file at its handle cap",
                        );
                    }
                    Ok((Err(FsErrorCode::InsufficientMemory),))
                }
                Err(trap) => Err(trap),
            },
        }
    })
}

/// Whether an `open-at` with these flags is one a read-only grant refuses
/// (wasmtime-wasi's rule: creating, truncating, or opening for writing).
fn opens_for_writing(open: fs_types::OpenFlags, flags: fs_types::DescriptorFlags) -> bool {
    open.intersects(fs_types::OpenFlags::CREATE | fs_types::OpenFlags::TRUNCATE)
        || flags.contains(fs_types::DescriptorFlags::WRITE)
}

/// Whether an error is the grant's refusal (a path leading out, a write
/// through a read-only grant) rather than the filesystem's answer.
fn refused(code: &FsErrorCode) -> bool {
    matches!(code, FsErrorCode::NotPermitted | FsErrorCode::Access)
}

/// Records in the audit that the grant behind handle `rep` was used
/// (`write`: changed through), the first time per grant and kind (see the
/// module docs). Nothing when there is no audit or `rep` is under no grant.
pub(crate) fn note_use(s: &mut GuestState, rep: u32, write: bool) {
    let Some(audit) = &s.audit else {
        return;
    };
    if let Some(p) = s.grant_handles.first_use(rep, write) {
        audit.used(tickbox_telemetry::audit::Use::Dir {
            host: &p.host,
            guest: &p.guest,
            write,
        });
    }
}

/// The guest's answer to a filesystem call through the handles `reps`,
/// recording the use of their grants when it reached the filesystem
/// (`write`: a call a read-only grant refuses; see the module docs).
pub(crate) fn noted<T>(
    s: &mut GuestState,
    reps: &[u32],
    write: bool,
    r: wasmtime_wasi::p2::FsResult<T>,
) -> wasmtime::Result<(Result<T, FsErrorCode>,)> {
    let answer = match r {
        Ok(v) => Ok(v),
        Err(err) => Err(err.downcast()?),
    };
    let reached = match &answer {
        Ok(_) => true,
        Err(code) => !refused(code),
    };
    if reached {
        for &rep in reps {
            note_use(s, rep, write);
        }
    }
    Ok((answer,))
}

/// What a shadowed `wasi:filesystem` method returns to the linker.
type FsCall<'a, T> =
    Box<dyn std::future::Future<Output = wasmtime::Result<(Result<T, FsErrorCode>,)>> + Send + 'a>;

/// Shadows the `wasi:filesystem` methods whose only change is that their
/// grant's use is recorded (see the module docs). Needs `allow_shadowing`.
pub(crate) fn add_use_notes(
    linker: &mut wasmtime::component::Linker<GuestState>,
) -> wasmtime::Result<()> {
    use wasmtime_wasi::filesystem::Descriptor;
    let mut fs = linker.instance("wasi:filesystem/types@0.2.12")?;
    fs.func_wrap_async(
        "[method]descriptor.unlink-file-at",
        |mut store: wasmtime::StoreContextMut<'_, GuestState>,
         (fd, path): (Resource<Descriptor>, String)|
         -> FsCall<'_, ()> {
            Box::new(async move {
                let s = store.data_mut();
                let rep = fd.rep();
                let r =
                    fs_types::HostDescriptor::unlink_file_at(&mut s.filesystem(), fd, path).await;
                noted(s, &[rep], true, r)
            })
        },
    )?;
    fs.func_wrap_async(
        "[method]descriptor.remove-directory-at",
        |mut store: wasmtime::StoreContextMut<'_, GuestState>,
         (fd, path): (Resource<Descriptor>, String)|
         -> FsCall<'_, ()> {
            Box::new(async move {
                let s = store.data_mut();
                let rep = fd.rep();
                let r =
                    fs_types::HostDescriptor::remove_directory_at(&mut s.filesystem(), fd, path)
                        .await;
                noted(s, &[rep], true, r)
            })
        },
    )?;
    fs.func_wrap_async(
        "[method]descriptor.readlink-at",
        |mut store: wasmtime::StoreContextMut<'_, GuestState>,
         (fd, path): (Resource<Descriptor>, String)|
         -> FsCall<'_, String> {
            Box::new(async move {
                let s = store.data_mut();
                let rep = fd.rep();
                let r = fs_types::HostDescriptor::readlink_at(&mut s.filesystem(), fd, path).await;
                noted(s, &[rep], false, r)
            })
        },
    )?;
    Ok(())
}

/// Records an `open-at` the grant refused: `not-permitted` is what a
/// path leading out of its directory (`..`, an absolute path, a link
/// pointing out) and a write through a read-only grant come back as
/// (cap-std's escape check, wasmtime-wasi's permission check). A file
/// that is merely missing is not a denial.
fn audit_refused_path(audit: &tickbox_telemetry::audit::Audit, path: &str, code: &FsErrorCode) {
    if !refused(code) {
        return;
    }
    let detail = if leads_out(path) {
        "leads out of its granted directory"
    } else {
        "refused by its grant (read-only, or a link leading out)"
    };
    audit.denied(tickbox_telemetry::audit::DenialKind::Path, path, detail);
}

/// Whether a path taken relative to a granted directory climbs above it
/// by its own components (a link that points out is found by the open).
pub(crate) fn leads_out(path: &str) -> bool {
    if path.starts_with('/') {
        return true;
    }
    let mut depth: i64 = 0;
    for part in path.split('/') {
        match part {
            "" | "." => {}
            ".." => {
                depth -= 1;
                if depth < 0 {
                    return true;
                }
            }
            _ => depth += 1,
        }
    }
    false
}

/// `descriptor.write`, refused with `quota` past the Tick's write quota or
/// its grant's.
#[allow(clippy::type_complexity)]
pub(crate) fn write_metered(
    mut store: wasmtime::StoreContextMut<'_, GuestState>,
    (fd, buf, offset): (
        Resource<wasmtime_wasi::filesystem::Descriptor>,
        Vec<u8>,
        u64,
    ),
) -> Box<dyn std::future::Future<Output = wasmtime::Result<(Result<u64, FsErrorCode>,)>> + Send + '_>
{
    Box::new(async move {
        let s = store.data_mut();
        let quotas = s.grant_handles.for_write(s.quota.as_ref(), fd.rep());
        if let Err(q) = quota::take_all(&quotas, buf.len() as u64) {
            q.exceeded();
            return Ok((Err(FsErrorCode::Quota),));
        }
        let mut view = s.filesystem();
        match fs_types::HostDescriptor::write(&mut view, fd, buf, offset).await {
            Ok(n) => Ok((Ok(n),)),
            Err(err) => err.downcast().map(|code| (Err(code),)),
        }
    })
}

/// `descriptor.write-via-stream` (`offset` Some) or `append-via-stream`,
/// with the stream metered by the Tick's write quota and its grant's.
#[allow(clippy::type_complexity)]
pub(crate) fn stream_metered(
    mut store: wasmtime::StoreContextMut<'_, GuestState>,
    fd: Resource<wasmtime_wasi::filesystem::Descriptor>,
    offset: Option<u64>,
) -> Box<
    dyn std::future::Future<
            Output = wasmtime::Result<(
                Result<Resource<wasmtime_wasi::p2::DynOutputStream>, FsErrorCode>,
            )>,
        > + Send
        + '_,
> {
    Box::new(async move {
        let s = store.data_mut();
        let quotas = s.grant_handles.for_write(s.quota.as_ref(), fd.rep());
        let mut view = s.filesystem();
        let opened = match offset {
            Some(o) => fs_types::HostDescriptor::write_via_stream(&mut view, fd, o),
            None => fs_types::HostDescriptor::append_via_stream(&mut view, fd),
        };
        let stream = match opened {
            Ok(r) => r,
            Err(err) => return err.downcast().map(|code| (Err(code),)),
        };
        if !quotas.is_empty() {
            // Wrap the stream in place: its table entry (and its link to
            // the descriptor) stays the same.
            let slot = s.table.get_mut(&stream)?;
            let inner =
                std::mem::replace(slot, Box::new(wasmtime_wasi::p2::pipe::ClosedOutputStream));
            *slot = Box::new(quota::QuotaStream { inner, quotas });
        }
        Ok((Ok(stream),))
    })
}

/// WASI preview 1's errno `perm` (operation not permitted).
pub(crate) const P1_ERRNO_PERM: i32 = 63;
/// Told the path and size of a Tick whose compile is taking a while.
pub(crate) type SlowCompile = Box<dyn Fn(&Path, usize) + Send + Sync>;

/// tickbox's own state directories, which no grant may overlap: the compile
/// cache, the live-instance directory (which holds the grant area), the
/// trust store (a Tick that could write it could approve itself) and
/// whatever else the engine was told is tickbox's (`more`).
pub(crate) fn own_state(cache_dir: Option<&Path>, more: &[PathBuf]) -> Vec<PathBuf> {
    let mut own = Vec::new();
    own.extend(cache::default_dir());
    own.extend(cache_dir.map(Path::to_path_buf));
    own.extend(crate::consent::default_dir());
    own.extend(more.iter().cloned());
    if let Ok(r) = tickbox_host::live::Registry::open() {
        own.push(r.dir().to_path_buf());
    }
    own
}

// ---- quotas: entries and moves (see `quota`'s module docs) ----
// Here, with the other shadows that take the guest's store, so that
// `quota` stays the bookkeeping that store holds (issue 40).

use crate::quota::{give_back_all, take_all, Quota, ENTRY_COST};
use wasmtime::component::{Linker as ComponentLinker, Resource};
use wasmtime_wasi::filesystem::{Descriptor, WasiFilesystemView};
use wasmtime_wasi::p2::bindings::filesystem::types::{
    ErrorCode as FsErrorCode, HostDescriptor, OpenFlags, PathFlags,
};

/// Shadows the `wasi:filesystem` methods that create entries or move them
/// between grants (`open-at` is [`open_at_capped`], which calls
/// [`charge_create`]). Needs `allow_shadowing`.
pub(crate) fn add_entry_shadows(linker: &mut ComponentLinker<GuestState>) -> wasmtime::Result<()> {
    let mut fs = linker.instance("wasi:filesystem/types@0.2.12")?;
    fs.func_wrap_async(
        "[method]descriptor.create-directory-at",
        create_directory_metered,
    )?;
    fs.func_wrap_async("[method]descriptor.rename-at", rename_within_grant)?;
    fs.func_wrap_async("[method]descriptor.link-at", link_metered)?;
    Ok(())
}

/// Spends [`ENTRY_COST`] from `quotas`, or says `quota`.
fn charge_entry(quotas: &[Quota]) -> Result<(), FsErrorCode> {
    take_all(quotas, ENTRY_COST).map_err(|q| {
        tracing::info!(cost = ENTRY_COST, "creating an entry");
        q.exceeded();
        FsErrorCode::Quota
    })
}

/// Charges [`ENTRY_COST`] for an `open-at` through handle `parent` that
/// may create a file: one with `create` whose path names nothing yet (with
/// `exclusive` too, it creates or fails, so it is charged without asking).
/// Returns what it charged, to give back with [`give_back_all`] if the open
/// then fails; `quota` when a quota has too little left.
async fn charge_create(
    s: &mut GuestState,
    parent: u32,
    path_flags: PathFlags,
    path: &str,
    open_flags: OpenFlags,
) -> Result<Vec<Quota>, FsErrorCode> {
    if !open_flags.contains(OpenFlags::CREATE) {
        return Ok(Vec::new());
    }
    if s.grant_handles
        .single_file(parent)
        .is_some_and(|file| path != file)
    {
        return Err(beside_a_granted_file("create a file"));
    }
    let quotas = s.grant_handles.for_write(s.quota.as_ref(), parent);
    if quotas.is_empty() {
        return Ok(quotas);
    }
    if !open_flags.contains(OpenFlags::EXCLUSIVE) {
        let mut view = s.filesystem();
        // Something is there (the same symlink rule as the open's): the
        // open will not create an entry. Any error, the open decides, and
        // is charged meanwhile.
        let exists = HostDescriptor::stat_at(
            &mut view,
            Resource::new_borrow(parent),
            path_flags,
            path.to_string(),
        )
        .await
        .is_ok();
        if exists {
            return Ok(Vec::new());
        }
    }
    charge_entry(&quotas)?;
    Ok(quotas)
}

/// The refusal of what a single-file grant does not give: another entry
/// beside the granted file, in its private directory (tickbox's own area).
fn beside_a_granted_file(what: &str) -> FsErrorCode {
    tracing::info!("refused to {what} beside a granted file: the grant is that file alone");
    FsErrorCode::NotPermitted
}

/// `descriptor.create-directory-at`, charged [`ENTRY_COST`].
fn create_directory_metered(
    mut store: wasmtime::StoreContextMut<'_, GuestState>,
    (fd, path): (Resource<Descriptor>, String),
) -> FsCall<'_, ()> {
    Box::new(async move {
        let s = store.data_mut();
        if s.grant_handles.single_file(fd.rep()).is_some() {
            return Ok((Err(beside_a_granted_file("create a directory")),));
        }
        let quotas = s.grant_handles.for_write(s.quota.as_ref(), fd.rep());
        if let Err(code) = charge_entry(&quotas) {
            return Ok((Err(code),));
        }
        let rep = fd.rep();
        let r = HostDescriptor::create_directory_at(&mut s.filesystem(), fd, path).await;
        if r.is_err() {
            give_back_all(&quotas, ENTRY_COST);
        }
        noted(s, &[rep], true, r)
    })
}

/// The refusal of a rename or link between grants (see the module docs).
fn cross_grant(what: &str) -> FsErrorCode {
    tracing::info!("refused a {what} between grants where one has a write quota (cross-device)");
    FsErrorCode::CrossDevice
}

/// `descriptor.rename-at`, refused between grants when either has its own
/// quota.
fn rename_within_grant(
    mut store: wasmtime::StoreContextMut<'_, GuestState>,
    (fd, old_path, new_fd, new_path): (Resource<Descriptor>, String, Resource<Descriptor>, String),
) -> FsCall<'_, ()> {
    Box::new(async move {
        let s = store.data_mut();
        let reps = [fd.rep(), new_fd.rep()];
        if s.grant_handles.crosses_a_metered_grant(reps[0], reps[1]) {
            return Ok((Err(cross_grant("rename")),));
        }
        if s.grant_handles.touches_a_single_file(reps[0], reps[1]) {
            return Ok((Err(beside_a_granted_file("rename an entry")),));
        }
        let r =
            HostDescriptor::rename_at(&mut s.filesystem(), fd, old_path, new_fd, new_path).await;
        noted(s, &reps, true, r)
    })
}

/// `descriptor.link-at`: refused between grants when either has its own
/// quota, and the new entry charged [`ENTRY_COST`].
#[allow(clippy::type_complexity)]
fn link_metered(
    mut store: wasmtime::StoreContextMut<'_, GuestState>,
    (fd, old_flags, old_path, new_fd, new_path): (
        Resource<Descriptor>,
        PathFlags,
        String,
        Resource<Descriptor>,
        String,
    ),
) -> FsCall<'_, ()> {
    Box::new(async move {
        let s = store.data_mut();
        let reps = [fd.rep(), new_fd.rep()];
        if s.grant_handles.crosses_a_metered_grant(reps[0], reps[1]) {
            return Ok((Err(cross_grant("hard link")),));
        }
        if s.grant_handles.touches_a_single_file(reps[0], reps[1]) {
            return Ok((Err(beside_a_granted_file("link an entry")),));
        }
        let quotas = s.grant_handles.for_write(s.quota.as_ref(), reps[1]);
        if let Err(code) = charge_entry(&quotas) {
            return Ok((Err(code),));
        }
        let r = HostDescriptor::link_at(
            &mut s.filesystem(),
            fd,
            old_flags,
            old_path,
            new_fd,
            new_path,
        )
        .await;
        if r.is_err() {
            give_back_all(&quotas, ENTRY_COST);
        }
        noted(s, &reps, true, r)
    })
}
