//! Tick-supplied text made safe for its sink: the one character policy and
//! [`TickText`] live in `tickbox_protocol::text` (the protocol crate, so
//! that parsed messages can carry Tick text as the type); this module is
//! the same items under the runtime's name.

pub use tickbox_protocol::text::*;
