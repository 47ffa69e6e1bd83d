//! The linker shadows that make a guest see virtual time (`tickbox
//! test`): `wasi:clocks/monotonic-clock`, `wasi:io/poll` and
//! `wasi:io/streams` that know about a [`VirtualClock`], file timestamps
//! at [`FILE_TIME`] and directory listings in name order, for components
//! and preview-1 modules. What they do is documented with the clock
//! (`crate::virtual_time`).
//!
//! Apart from the clock because these take the guest's store
//! ([`GuestState`], [`ModuleState`]), which holds the clock: here, the
//! store imports the clock and the shadows import both, with no circle
//! (issue 40).

use crate::limits::MAX_SORTED_LISTINGS;
use crate::virtual_time::listing::{self, cost};
use crate::virtual_time::{watched, VirtualClock, FILE_TIME, START_MONOTONIC, START_WALL};
use crate::{GuestState, ModuleState};
use wasmtime::component::{HasData, Linker, Resource, ResourceTable};
use wasmtime_wasi::clocks::WasiClocksCtxView;
use wasmtime_wasi::filesystem::WasiFilesystemView;
use wasmtime_wasi::p2::bindings::clocks::monotonic_clock;
use wasmtime_wasi::p2::bindings::filesystem::types::ErrorCode;
use wasmtime_wasi::p2::bindings::filesystem::types::{
    DirectoryEntryStream, HostDirectoryEntryStream,
};
use wasmtime_wasi::p2::bindings::io::{poll, streams};
use wasmtime_wasi::p2::FsResult;
use wasmtime_wasi::p2::{DynInputStream, DynOutputStream, DynPollable, StreamResult};
use wasmtime_wasi::WasiCtx;

/// `wasi:clocks/monotonic-clock` for one store: virtual when the guest has a
/// [`VirtualClock`], wasmtime-wasi's own otherwise.
pub(crate) struct ClockView<'a> {
    ctx: &'a mut WasiCtx,
    table: &'a mut ResourceTable,
    clock: Option<&'a VirtualClock>,
}

struct Clocks;
impl HasData for Clocks {
    type Data<'a> = ClockView<'a>;
}

fn clock_view(s: &mut GuestState) -> ClockView<'_> {
    ClockView {
        ctx: &mut s.ctx,
        table: &mut s.table,
        clock: s.clock.as_ref(),
    }
}

impl ClockView<'_> {
    fn real(&mut self) -> WasiClocksCtxView<'_> {
        WasiClocksCtxView {
            ctx: self.ctx.clocks(),
            table: self.table,
        }
    }
}

impl monotonic_clock::Host for ClockView<'_> {
    fn now(&mut self) -> wasmtime::Result<monotonic_clock::Instant> {
        match self.clock {
            Some(c) => Ok(c.now_monotonic()),
            None => monotonic_clock::Host::now(&mut self.real()),
        }
    }

    fn resolution(&mut self) -> wasmtime::Result<monotonic_clock::Instant> {
        match self.clock {
            Some(_) => Ok(1),
            None => monotonic_clock::Host::resolution(&mut self.real()),
        }
    }

    fn subscribe_instant(
        &mut self,
        when: monotonic_clock::Instant,
    ) -> wasmtime::Result<Resource<DynPollable>> {
        match self.clock {
            Some(c) => {
                let c = c.clone();
                c.subscribe(self.table, when.saturating_sub(START_MONOTONIC))
            }
            None => monotonic_clock::Host::subscribe_instant(&mut self.real(), when),
        }
    }

    fn subscribe_duration(
        &mut self,
        duration: monotonic_clock::Duration,
    ) -> wasmtime::Result<Resource<DynPollable>> {
        match self.clock {
            Some(c) => {
                let c = c.clone();
                let deadline = c.elapsed_nanos().saturating_add(duration);
                c.subscribe(self.table, deadline)
            }
            None => monotonic_clock::Host::subscribe_duration(&mut self.real(), duration),
        }
    }
}

/// `wasi:io/poll` for one store: wasmtime-wasi-io's, counting the guest's
/// waits when it has a [`VirtualClock`] (for [`VirtualClock::wait_idle`]).
pub(crate) struct PollView<'a> {
    table: &'a mut ResourceTable,
    clock: Option<&'a VirtualClock>,
}

struct Polls;
impl HasData for Polls {
    type Data<'a> = PollView<'a>;
}

fn poll_view(s: &mut GuestState) -> PollView<'_> {
    PollView {
        table: &mut s.table,
        clock: s.clock.as_ref(),
    }
}

impl poll::Host for PollView<'_> {
    async fn poll(&mut self, list: Vec<Resource<DynPollable>>) -> wasmtime::Result<Vec<u32>> {
        watched(self.clock, poll::Host::poll(&mut *self.table, list)).await
    }
}

impl poll::HostPollable for PollView<'_> {
    async fn block(&mut self, p: Resource<DynPollable>) -> wasmtime::Result<()> {
        watched(self.clock, poll::HostPollable::block(&mut *self.table, p)).await
    }
    async fn ready(&mut self, p: Resource<DynPollable>) -> wasmtime::Result<bool> {
        poll::HostPollable::ready(&mut *self.table, p).await
    }
    fn drop(&mut self, p: Resource<DynPollable>) -> wasmtime::Result<()> {
        poll::HostPollable::drop(&mut *self.table, p)
    }
}

/// `wasi:io/streams` for one store: wasmtime-wasi-io's, counting a guest's
/// blocking reads (`input-stream.blocking-read`, `blocking-skip`) as waits
/// when it has a [`VirtualClock`]: a guest blocked reading its stdin (or its
/// keys) waits for input, exactly like one blocked in `poll` on them.
/// Blocking writes, flushes and splices are not counted: they wait for the
/// host to take output, which it does on its own.
pub(crate) struct StreamsView<'a> {
    table: &'a mut ResourceTable,
    clock: Option<&'a VirtualClock>,
}

struct Streams;
impl HasData for Streams {
    type Data<'a> = StreamsView<'a>;
}

fn streams_view(s: &mut GuestState) -> StreamsView<'_> {
    StreamsView {
        table: &mut s.table,
        clock: s.clock.as_ref(),
    }
}

impl streams::Host for StreamsView<'_> {
    fn convert_stream_error(
        &mut self,
        err: wasmtime_wasi::p2::StreamError,
    ) -> wasmtime::Result<streams::StreamError> {
        streams::Host::convert_stream_error(&mut *self.table, err)
    }
}

impl streams::HostInputStream for StreamsView<'_> {
    async fn drop(&mut self, s: Resource<DynInputStream>) -> wasmtime::Result<()> {
        streams::HostInputStream::drop(&mut *self.table, s).await
    }
    fn read(&mut self, s: Resource<DynInputStream>, len: u64) -> StreamResult<Vec<u8>> {
        streams::HostInputStream::read(&mut *self.table, s, len)
    }
    async fn blocking_read(
        &mut self,
        s: Resource<DynInputStream>,
        len: u64,
    ) -> StreamResult<Vec<u8>> {
        let read = streams::HostInputStream::blocking_read(&mut *self.table, s, len);
        watched(self.clock, read).await
    }
    fn skip(&mut self, s: Resource<DynInputStream>, len: u64) -> StreamResult<u64> {
        streams::HostInputStream::skip(&mut *self.table, s, len)
    }
    async fn blocking_skip(&mut self, s: Resource<DynInputStream>, len: u64) -> StreamResult<u64> {
        let skip = streams::HostInputStream::blocking_skip(&mut *self.table, s, len);
        watched(self.clock, skip).await
    }
    fn subscribe(
        &mut self,
        s: Resource<DynInputStream>,
    ) -> wasmtime::Result<Resource<DynPollable>> {
        streams::HostInputStream::subscribe(&mut *self.table, s)
    }
}

impl streams::HostOutputStream for StreamsView<'_> {
    async fn drop(&mut self, s: Resource<DynOutputStream>) -> wasmtime::Result<()> {
        streams::HostOutputStream::drop(&mut *self.table, s).await
    }
    fn check_write(&mut self, s: Resource<DynOutputStream>) -> StreamResult<u64> {
        streams::HostOutputStream::check_write(&mut *self.table, s)
    }
    fn write(&mut self, s: Resource<DynOutputStream>, bytes: Vec<u8>) -> StreamResult<()> {
        streams::HostOutputStream::write(&mut *self.table, s, bytes)
    }
    async fn blocking_write_and_flush(
        &mut self,
        s: Resource<DynOutputStream>,
        bytes: Vec<u8>,
    ) -> StreamResult<()> {
        streams::HostOutputStream::blocking_write_and_flush(&mut *self.table, s, bytes).await
    }
    fn flush(&mut self, s: Resource<DynOutputStream>) -> StreamResult<()> {
        streams::HostOutputStream::flush(&mut *self.table, s)
    }
    async fn blocking_flush(&mut self, s: Resource<DynOutputStream>) -> StreamResult<()> {
        streams::HostOutputStream::blocking_flush(&mut *self.table, s).await
    }
    fn subscribe(
        &mut self,
        s: Resource<DynOutputStream>,
    ) -> wasmtime::Result<Resource<DynPollable>> {
        streams::HostOutputStream::subscribe(&mut *self.table, s)
    }
    fn write_zeroes(&mut self, s: Resource<DynOutputStream>, len: u64) -> StreamResult<()> {
        streams::HostOutputStream::write_zeroes(&mut *self.table, s, len)
    }
    async fn blocking_write_zeroes_and_flush(
        &mut self,
        s: Resource<DynOutputStream>,
        len: u64,
    ) -> StreamResult<()> {
        streams::HostOutputStream::blocking_write_zeroes_and_flush(&mut *self.table, s, len).await
    }
    fn splice(
        &mut self,
        dst: Resource<DynOutputStream>,
        src: Resource<DynInputStream>,
        len: u64,
    ) -> StreamResult<u64> {
        streams::HostOutputStream::splice(&mut *self.table, dst, src, len)
    }
    async fn blocking_splice(
        &mut self,
        dst: Resource<DynOutputStream>,
        src: Resource<DynInputStream>,
        len: u64,
    ) -> StreamResult<u64> {
        streams::HostOutputStream::blocking_splice(&mut *self.table, dst, src, len).await
    }
}

/// Shadows `wasi:clocks/monotonic-clock`, `wasi:io/poll` and
/// `wasi:io/streams` in a component linker that already has wasmtime-wasi
/// (shadowing must be allowed).
pub(crate) fn add_to_linker(l: &mut Linker<GuestState>) -> wasmtime::Result<()> {
    monotonic_clock::add_to_linker::<GuestState, Clocks>(l, clock_view)?;
    poll::add_to_linker::<GuestState, Polls>(l, poll_view)?;
    streams::add_to_linker::<GuestState, Streams>(l, streams_view)?;
    files::add_to_linker(l)
}

/// Preview 1's `fd_filestat_get` and `path_filestat_get` for a module
/// under virtual time: wasmtime-wasi's own, then the three timestamps of
/// the `filestat` it wrote overwritten with [`FILE_TIME`]; and its
/// `fd_readdir`, in name order ([`listing`]).
pub(crate) fn add_p1_to_linker(l: &mut wasmtime::Linker<ModuleState>) -> wasmtime::Result<()> {
    use wasmtime::Caller;
    use wasmtime_wasi::p1::wasi_snapshot_preview1 as p1;
    /// Where `atim`, `mtim` and `ctim` lie in a preview-1 `filestat`
    /// (dev, ino, filetype, nlink and size come first, 8 bytes each).
    const TIME_OFFSETS: [u32; 3] = [40, 48, 56];
    /// Runs `$call` (wasmtime-wasi's ABI function, given `$wasi` and
    /// `$mem`) with the guest's memory, then writes the epoch into the
    /// `filestat` at `$buf` if it succeeded under virtual time. The
    /// preamble is wiggle's (`handles::preview1_call`).
    macro_rules! with_epoch {
        ($caller:ident, $buf:expr, |$wasi:ident, $mem:ident| $call:expr) => {{
            let export = $caller.get_export("memory");
            let (mut $mem, st) = crate::handles::preview1_call(&mut $caller, &export)?;
            let virt = st.virtual_files;
            let $wasi = &mut st.wasi;
            let errno: i32 = $call.await?;
            if errno == 0 && virt {
                let nanos = u64::try_from(FILE_TIME.as_nanos()).unwrap_or(u64::MAX);
                for off in TIME_OFFSETS {
                    let at = ($buf as u32).wrapping_add(off);
                    $mem.write(wiggle::GuestPtr::<u64>::new(at), nanos)?;
                }
            }
            Ok(errno)
        }};
    }
    l.func_wrap_async(
        "wasi_snapshot_preview1",
        "fd_filestat_get",
        |mut caller: Caller<'_, ModuleState>, (fd, buf): (i32, i32)| {
            Box::new(async move {
                with_epoch!(caller, buf, |wasi, mem| p1::fd_filestat_get(
                    &mut *wasi, &mut mem, fd, buf
                ))
            })
        },
    )?;
    l.func_wrap_async(
        "wasi_snapshot_preview1",
        "path_filestat_get",
        |mut caller: Caller<'_, ModuleState>,
         (fd, flags, path, len, buf): (i32, i32, i32, i32, i32)| {
            Box::new(async move {
                with_epoch!(caller, buf, |wasi, mem| p1::path_filestat_get(
                    &mut *wasi, &mut mem, fd, flags, path, len, buf
                ))
            })
        },
    )?;
    l.func_wrap_async(
        "wasi_snapshot_preview1",
        "fd_readdir",
        |mut caller: Caller<'_, ModuleState>,
         (fd, buf, len, cookie, used): (i32, i32, i32, i64, i32)| {
            Box::new(async move {
                let export = caller.get_export("memory");
                let (mut mem, st) = crate::handles::preview1_call(&mut caller, &export)?;
                let wasi = &mut st.wasi;
                if st.virtual_files {
                    listing::p1_readdir(wasi, &mut mem, fd, buf, len, cookie, used).await
                } else {
                    p1::fd_readdir(&mut *wasi, &mut mem, fd, buf, len, cookie, used).await
                }
            })
        },
    )?;
    Ok(())
}

/// File timestamps and directory order under virtual time (see the module
/// docs): `stat`, `stat-at`, `set-times`, `set-times-at`,
/// `read-directory` and `read-directory-entry` of `wasi:filesystem`, which
/// are wasmtime-wasi's own (with the grant's use noted) when the store has
/// no [`VirtualClock`].
mod files {
    use super::{GuestState, VirtualClock, FILE_TIME};
    use wasmtime::component::{Linker, Resource};
    use wasmtime::StoreContextMut;
    use wasmtime_wasi::filesystem::{Descriptor, WasiFilesystemView};
    use wasmtime_wasi::p2::bindings::clocks::wall_clock::Datetime;
    use wasmtime_wasi::p2::bindings::filesystem::types::{
        DescriptorStat, DirectoryEntry, DirectoryEntryStream, ErrorCode, HostDescriptor,
        HostDirectoryEntryStream, NewTimestamp, PathFlags,
    };

    type FsCall<'a, T> = Box<
        dyn std::future::Future<Output = wasmtime::Result<(Result<T, ErrorCode>,)>> + Send + 'a,
    >;

    pub(super) fn add_to_linker(l: &mut Linker<GuestState>) -> wasmtime::Result<()> {
        let mut fs = l.instance("wasi:filesystem/types@0.2.12")?;
        fs.func_wrap_async("[method]descriptor.stat", stat)?;
        fs.func_wrap_async("[method]descriptor.stat-at", stat_at)?;
        fs.func_wrap_async("[method]descriptor.set-times", set_times)?;
        fs.func_wrap_async("[method]descriptor.set-times-at", set_times_at)?;
        fs.func_wrap_async("[method]descriptor.read-directory", read_directory)?;
        fs.func_wrap_async(
            "[method]directory-entry-stream.read-directory-entry",
            read_directory_entry,
        )?;
        Ok(())
    }

    fn read_directory(
        mut store: StoreContextMut<'_, GuestState>,
        (fd,): (Resource<Descriptor>,),
    ) -> FsCall<'_, Resource<DirectoryEntryStream>> {
        Box::new(async move {
            let s = store.data_mut();
            let rep = fd.rep();
            let r = HostDescriptor::read_directory(&mut s.filesystem(), fd).await;
            let r = match r {
                Ok(stream) if s.clock.is_some() => super::sort(s, stream).await,
                r => r,
            };
            crate::files::noted(s, &[rep], false, r)
        })
    }

    fn read_directory_entry(
        mut store: StoreContextMut<'_, GuestState>,
        (stream,): (Resource<DirectoryEntryStream>,),
    ) -> FsCall<'_, Option<DirectoryEntry>> {
        Box::new(async move {
            let s = store.data_mut();
            if let Some(next) = s.listings.next(stream.rep()) {
                return Ok((Ok(next),));
            }
            let r =
                HostDirectoryEntryStream::read_directory_entry(&mut s.filesystem(), stream).await;
            Ok((match r {
                Ok(v) => Ok(v),
                Err(e) => Err(e.downcast()?),
            },))
        })
    }

    fn datetime(d: std::time::Duration) -> Datetime {
        Datetime {
            seconds: d.as_secs(),
            nanoseconds: d.subsec_nanos(),
        }
    }

    /// A stat as a guest under virtual time sees it: every timestamp the
    /// virtual epoch; the rest (type, links, size) as the host's.
    pub(in super::super) fn epoch_stat(stat: DescriptorStat) -> DescriptorStat {
        let t = Some(datetime(FILE_TIME));
        DescriptorStat {
            data_access_timestamp: t,
            data_modification_timestamp: t,
            status_change_timestamp: t,
            ..stat
        }
    }

    /// `now` as the guest's clock reads it.
    fn virtual_now(clock: Option<&VirtualClock>, t: NewTimestamp) -> NewTimestamp {
        match (clock, t) {
            (Some(c), NewTimestamp::Now) => {
                NewTimestamp::Timestamp(datetime(super::START_WALL + c.elapsed()))
            }
            (_, t) => t,
        }
    }

    fn stat(
        mut store: StoreContextMut<'_, GuestState>,
        (fd,): (Resource<Descriptor>,),
    ) -> FsCall<'_, DescriptorStat> {
        Box::new(async move {
            let s = store.data_mut();
            let virt = s.clock.is_some();
            let rep = fd.rep();
            let r = HostDescriptor::stat(&mut s.filesystem(), fd).await;
            let r = r.map(|st| if virt { epoch_stat(st) } else { st });
            crate::files::noted(s, &[rep], false, r)
        })
    }

    fn stat_at(
        mut store: StoreContextMut<'_, GuestState>,
        (fd, flags, path): (Resource<Descriptor>, PathFlags, String),
    ) -> FsCall<'_, DescriptorStat> {
        Box::new(async move {
            let s = store.data_mut();
            let virt = s.clock.is_some();
            let rep = fd.rep();
            let r = HostDescriptor::stat_at(&mut s.filesystem(), fd, flags, path).await;
            let r = r.map(|st| if virt { epoch_stat(st) } else { st });
            crate::files::noted(s, &[rep], false, r)
        })
    }

    fn set_times(
        mut store: StoreContextMut<'_, GuestState>,
        (fd, atim, mtim): (Resource<Descriptor>, NewTimestamp, NewTimestamp),
    ) -> FsCall<'_, ()> {
        Box::new(async move {
            let s = store.data_mut();
            let (atim, mtim) = (
                virtual_now(s.clock.as_ref(), atim),
                virtual_now(s.clock.as_ref(), mtim),
            );
            let rep = fd.rep();
            let r = HostDescriptor::set_times(&mut s.filesystem(), fd, atim, mtim).await;
            crate::files::noted(s, &[rep], true, r)
        })
    }

    #[allow(clippy::type_complexity)]
    fn set_times_at(
        mut store: StoreContextMut<'_, GuestState>,
        (fd, flags, path, atim, mtim): (
            Resource<Descriptor>,
            PathFlags,
            String,
            NewTimestamp,
            NewTimestamp,
        ),
    ) -> FsCall<'_, ()> {
        Box::new(async move {
            let s = store.data_mut();
            let (atim, mtim) = (
                virtual_now(s.clock.as_ref(), atim),
                virtual_now(s.clock.as_ref(), mtim),
            );
            let rep = fd.rep();
            let r = HostDescriptor::set_times_at(&mut s.filesystem(), fd, flags, path, atim, mtim)
                .await;
            crate::files::noted(s, &[rep], true, r)
        })
    }
}

/// Reads the listing behind `stream` whole and holds it sorted, so that
/// `read-directory-entry` gives it out by name. The stream comes back
/// drained; on an error (a read failing, or the bound) it is dropped.
pub(crate) async fn sort(
    s: &mut GuestState,
    stream: Resource<DirectoryEntryStream>,
) -> FsResult<Resource<DirectoryEntryStream>> {
    // Listings whose stream the guest dropped before their end.
    let gone: Vec<u32> = (s.listings.held.keys().copied())
        .filter(|&rep| {
            s.table
                .get(&Resource::<DirectoryEntryStream>::new_borrow(rep))
                .is_err()
        })
        .collect();
    for rep in gone {
        s.listings.release(rep);
    }
    let rep = stream.rep();
    s.listings.release(rep);
    let mut entries = Vec::new();
    let mut bytes = 0;
    let failure = loop {
        let borrowed = Resource::new_borrow(rep);
        let next =
            HostDirectoryEntryStream::read_directory_entry(&mut s.filesystem(), borrowed).await;
        match next {
            Ok(Some(e)) => {
                bytes += cost(&e);
                if s.listings.bytes + bytes > MAX_SORTED_LISTINGS {
                    tracing::info!(
                        "a directory listing passed MAX_SORTED_LISTINGS ({MAX_SORTED_LISTINGS} bytes) under virtual time"
                    );
                    break ErrorCode::InsufficientMemory.into();
                }
                entries.push(e);
            }
            Ok(None) => {
                entries.sort_by(|a, b| a.name.cmp(&b.name));
                s.listings.bytes += bytes;
                s.listings.held.insert(rep, entries.into());
                return Ok(stream);
            }
            Err(e) => break e,
        }
    };
    s.table.delete(stream)?;
    Err(failure)
}
