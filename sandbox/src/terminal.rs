//! The host side of `wit/terminal.wit`: drawing, size, keys and resize
//! events of a wasm Tick's view.
//!
//! Keys typed in a view and resizes of it arrive through [`WasmTerminal`]
//! (the [`Terminal`] of the Tick's [`View`]); the guest reads them through a
//! `wasi:io` input stream and pollable, so they fit in the same `poll` call as
//! stdin. What the guest draws goes straight into the view.

pub use crate::limits::KEY_QUEUE;
use bytes::Bytes;
use std::sync::Arc;
use tickbox_host::view::{Terminal, View};
use tokio::sync::{mpsc, watch, Mutex};
use wasmtime::component::{HasData, Resource, ResourceTable};
use wasmtime_wasi::p2::{
    DynInputStream, DynPollable, InputStream, Pollable, StreamError, StreamResult,
};

pub(crate) mod bindings {
    wasmtime::component::bindgen!({
        path: "wit",
        world: "tick-host",
        with: { "wasi:io": wasmtime_wasi::p2::bindings::io },
        imports: { default: async | trappable },
    });
}

use bindings::tickbox::terminal::terminal::Size;

/// The terminal size and its resize generation.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct SizeInfo {
    pub cols: u16,
    pub rows: u16,
    pub generation: u64,
}

/// The view's end: keys in, resizes in.
pub struct WasmTerminal {
    keys: mpsc::Sender<Vec<u8>>,
    size: watch::Sender<SizeInfo>,
    /// Keys dropped (the Tick's own terminal queries answered by the view
    /// too, which a Tick can ask in a loop): logged, not a line each.
    dropped: tickbox_host::throttle::Throttle,
}

impl Terminal for WasmTerminal {
    fn send_input(&self, bytes: &[u8]) {
        if self.keys.try_send(bytes.to_vec()).is_err() {
            if let Some(more) = self.dropped.hit() {
                tracing::warn!(more, "dropping keys: the Tick is not reading its terminal");
            }
        }
    }

    fn resize(&self, cols: u16, rows: u16) {
        self.size.send_modify(|s| {
            s.cols = cols;
            s.rows = rows;
            s.generation += 1;
        });
    }
}

/// The guest's end, kept in the store.
pub struct TermState {
    view: Arc<View>,
    keys: Arc<Mutex<mpsc::Receiver<Vec<u8>>>>,
    size: watch::Receiver<SizeInfo>,
}

/// Creates both ends for a view of the given initial size.
pub fn pair(cols: u16, rows: u16) -> (WasmTerminal, impl FnOnce(Arc<View>) -> TermState) {
    let (keys_tx, keys_rx) = mpsc::channel(KEY_QUEUE);
    let (size_tx, size_rx) = watch::channel(SizeInfo {
        cols,
        rows,
        generation: 0,
    });
    let term = WasmTerminal {
        keys: keys_tx,
        size: size_tx,
        dropped: Default::default(),
    };
    let guest = move |view| TermState {
        view,
        keys: Arc::new(Mutex::new(keys_rx)),
        size: size_rx,
    };
    (term, guest)
}

/// What the generated `Host` trait is implemented on.
pub struct TermView<'a> {
    pub state: &'a mut TermState,
    pub table: &'a mut ResourceTable,
}

/// Marker for `add_to_linker`.
pub struct TermData;

impl HasData for TermData {
    type Data<'a> = TermView<'a>;
}

impl bindings::tickbox::terminal::terminal::Host for TermView<'_> {
    async fn draw(&mut self, bytes: Vec<u8>) -> wasmtime::Result<()> {
        // Waits while the view's queue is full: a flood holds back only this guest.
        self.state.view.draw(&bytes).await;
        Ok(())
    }

    async fn get_size(&mut self) -> wasmtime::Result<Size> {
        let s = *self.state.size.borrow();
        Ok(Size {
            cols: s.cols,
            rows: s.rows,
            generation: s.generation,
        })
    }

    async fn keys(&mut self) -> wasmtime::Result<Resource<DynInputStream>> {
        let stream: DynInputStream = Box::new(KeyStream {
            rx: self.state.keys.clone(),
            buf: Bytes::new(),
        });
        Ok(self.table.push(stream)?)
    }

    async fn subscribe_resize(&mut self, seen: u64) -> wasmtime::Result<Resource<DynPollable>> {
        let watch = self.table.push(ResizeWatch {
            rx: self.state.size.clone(),
            seen,
        })?;
        wasmtime_wasi::p2::subscribe(self.table, watch)
    }
}

struct KeyStream {
    rx: Arc<Mutex<mpsc::Receiver<Vec<u8>>>>,
    buf: Bytes,
}

#[wasmtime_wasi::async_trait]
impl Pollable for KeyStream {
    async fn ready(&mut self) {
        if !self.buf.is_empty() {
            return;
        }
        match self.rx.lock().await.recv().await {
            Some(b) => self.buf = Bytes::from(b),
            // The view is gone: the session is ending and the guest will be
            // stopped; never report readiness that a read cannot honour.
            None => std::future::pending().await,
        }
    }
}

impl InputStream for KeyStream {
    fn read(&mut self, size: usize) -> StreamResult<Bytes> {
        if self.buf.is_empty() {
            if let Ok(mut rx) = self.rx.try_lock() {
                match rx.try_recv() {
                    Ok(b) => self.buf = Bytes::from(b),
                    Err(mpsc::error::TryRecvError::Empty) => {}
                    Err(mpsc::error::TryRecvError::Disconnected) => {
                        return Err(StreamError::Closed)
                    }
                }
            }
        }
        let n = size.min(self.buf.len());
        Ok(self.buf.split_to(n))
    }
}

struct ResizeWatch {
    rx: watch::Receiver<SizeInfo>,
    seen: u64,
}

#[wasmtime_wasi::async_trait]
impl Pollable for ResizeWatch {
    async fn ready(&mut self) {
        let seen = self.seen;
        if self.rx.wait_for(|s| s.generation > seen).await.is_err() {
            std::future::pending::<()>().await;
        }
    }
}

/// Links the terminal interface for a store whose data yields a [`TermView`].
pub fn add_to_linker<T: Send + 'static>(
    linker: &mut wasmtime::component::Linker<T>,
    get: fn(&mut T) -> TermView<'_>,
) -> wasmtime::Result<()> {
    bindings::tickbox::terminal::terminal::add_to_linker::<T, TermData>(linker, get)
}
