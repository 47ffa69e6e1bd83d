//! A guest's store data: what one running Tick holds (WASI context,
//! terminal, HTTP state, memory budget), and its stderr into the view.

use super::*;

/// What to run, and with what.
#[derive(Debug, Clone)]
pub struct WasmSpec {
    /// The `.wasm` file.
    pub path: PathBuf,
    /// Arguments after `argv[0]` (the file name).
    pub args: Vec<String>,
    /// Everything granted.
    pub grants: Grants,
    /// `TICKLOOP_INSTANCE_ID`; when absent, a fresh one, or under virtual
    /// time the seed's ([`virtual_time::instance_id`]).
    pub instance_id: Option<String>,
    /// How long the guest may take to return by itself once its stdin is
    /// closed, before it is stopped ([`EXIT_GRACE`]).
    pub exit_grace: Duration,
    /// The content the bytes must have ([`digest`](crate::digest)): checked
    /// on the very buffer that is compiled; `None` runs whatever the file
    /// holds.
    pub pin: Option<WasmDigest>,
    /// The audit stream its instances record their start, denials and
    /// limits into (each start gets its own session); `None`: none.
    pub audit: Option<tickbox_telemetry::audit::Audit>,
}

/// Store data of a component guest.
pub struct GuestState {
    pub(crate) ctx: WasiCtx,
    pub(crate) table: ResourceTable,
    pub(crate) term: terminal::TermState,
    pub(crate) limiter: memory::Budget,
    pub(crate) quota: Option<quota::Quota>,
    /// Which grant each descriptor is under: its write quota (`max=SIZE` on a `dir` grant) and its recorded uses.
    pub(crate) grant_handles: quota::GrantHandles,
    /// The names it may look up, each with the grant that names it (for
    /// the audit's record of the lookup).
    pub(crate) lookup_names: Vec<(String, String)>,
    /// Virtual time and seeded randomness (`tickbox test`), or real ones.
    pub(crate) clock: Option<virtual_time::VirtualClock>,
    /// Under virtual time, the directory listings it is reading, sorted.
    pub(crate) listings: virtual_time::listing::Listings,
    /// `wasi:http` state and the origin policy its requests go through.
    pub(crate) http_ctx: wasmtime_wasi_http::WasiHttpCtx,
    pub(crate) http_hooks: http::Hooks,
    /// This instance's audit session (denials are recorded there).
    pub(crate) audit: Option<tickbox_telemetry::audit::Audit>,
}

impl wasmtime_wasi_http::WasiHttpView for GuestState {
    fn http(&mut self) -> wasmtime_wasi_http::WasiHttpCtxView<'_> {
        wasmtime_wasi_http::WasiHttpCtxView {
            ctx: &mut self.http_ctx,
            table: &mut self.table,
            hooks: &mut self.http_hooks,
        }
    }
}

impl WasiView for GuestState {
    fn ctx(&mut self) -> WasiCtxView<'_> {
        WasiCtxView {
            ctx: &mut self.ctx,
            table: &mut self.table,
        }
    }
}

/// Store data of a preview-1 module guest.
pub struct ModuleState {
    pub(crate) wasi: wasmtime_wasi::p1::WasiP1Ctx,
    pub(crate) limiter: memory::Budget,
    /// Under virtual time: file timestamps read as its epoch.
    pub(crate) virtual_files: bool,
}

/// The guest's stderr: it goes to the view, like a native Tick's (§3.1).
#[derive(Clone)]
pub(crate) struct ViewStderr(pub(crate) Arc<View>);

impl IsTerminal for ViewStderr {
    fn is_terminal(&self) -> bool {
        true
    }
}

impl StdoutStream for ViewStderr {
    fn async_stream(&self) -> Box<dyn AsyncWrite + Send + Sync> {
        Box::new(ViewWriter(self.0.clone()))
    }
}

pub(crate) struct ViewWriter(pub(crate) Arc<View>);

impl AsyncWrite for ViewWriter {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<std::io::Result<usize>> {
        // Pending while the view's queue is full: the guest waits, the
        // async worker does not.
        self.0.poll_feed(cx, buf).map(Ok)
    }
    fn poll_flush(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Poll::Ready(Ok(()))
    }
    fn poll_shutdown(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Poll::Ready(Ok(()))
    }
}
