//! Where events come from and where bytes go, per target. Each platform
//! provides `Io::take()` (claim stdout before author code runs), `run()`
//! (the event loop feeding a [`crate::dispatch::Runtime`]) and
//! `restore_terminal()` (for the panic hook and signals).

#[cfg(all(target_os = "wasi", target_env = "p2"))]
mod wasm;
#[cfg(all(target_os = "wasi", target_env = "p2"))]
pub use wasm::*;

#[cfg(all(unix, not(target_os = "wasi")))]
mod native;
#[cfg(all(unix, not(target_os = "wasi")))]
pub use native::*;

#[cfg(not(any(
    all(target_os = "wasi", target_env = "p2"),
    all(unix, not(target_os = "wasi"))
)))]
compile_error!("tickbox-guest supports wasm32-wasip2 and Unix targets");
