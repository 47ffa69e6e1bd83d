//! `tickbox-protocol`: the Tick protocol, version 3, in one place.
//!
//! Every rule of the protocol that tickbox enforces or checks lives here
//! once: the message envelope, the error codes, every limit as a named
//! constant, the line framer, and the validators for the descriptor (§5.3),
//! state and reads (§6.2, §6.3) and updates (§8.2). Validators return
//! [`Finding`]s naming a [`rules::Rule`] by its stable id (the ids
//! [`rules::ALL`] lists), so the host (which turns a finding into a
//! refusal or a violation) and the checker (which turns it into a verdict)
//! share one implementation. The guest SDK uses the codes, limits
//! and framing with the default `validate` feature off, which drops the JSON
//! Schema engine.
//!
//! # The wire
//!
//! Each message is one line of UTF-8 JSON ending in `\n`, JSON-RPC 2.0 with
//! `"jsonrpc":"2.0"` and no batches. The host writes requests with unsigned
//! integer ids; the Tick answers each exactly once with the same id and
//! exactly one of `result` and `error`. The Tick's only notification is
//! `tick/update`, whose params are its complete state.
//!
//! | method | direction | params | result |
//! |---|---|---|---|
//! | `tick/describe` | host → Tick | `{}` | the catalog ([`Descriptor`]) |
//! | `tick/read` | host → Tick | `{}` | the state ([`TickState`]) |
//! | `tick/call` | host → Tick | `{tool, args, revision}` | any JSON |
//! | `tick/update` | Tick → host | the state | (notification) |
//!
//! A session, as the host writes (→) and reads (←) it:
//!
//! ```text
//! → {"jsonrpc":"2.0","id":1,"method":"tick/describe","params":{}}
//! ← {"jsonrpc":"2.0","id":1,"result":{"protocol":3,"kind":"example.counter",...,"revision":"1","tools":[...]}}
//! → {"jsonrpc":"2.0","id":2,"method":"tick/read","params":{}}
//! ← {"jsonrpc":"2.0","id":2,"result":{"seq":0,"data":{"value":0,"recent":[]}}}
//! → {"jsonrpc":"2.0","id":3,"method":"tick/call","params":{"tool":"increment","args":{"amount":2},"revision":"1"}}
//! ← {"jsonrpc":"2.0","method":"tick/update","params":{"seq":1,"data":{"value":2,"recent":[...]}}}
//! ← {"jsonrpc":"2.0","id":3,"result":{"value":2}}
//! ```
//!
//! Where to start: [`message`] classifies lines, [`descriptor`] checks the
//! catalog (§5.3), [`state`] checks updates and reads (§6.3, §8.2), [`limits`]
//! holds every number, [`codes`] the error codes, [`framing`] splits lines,
//! and [`rules`] is the table of rule ids.

pub mod codes;
#[cfg(feature = "validate")]
pub mod descriptor;
pub mod finding;
pub mod framing;
pub mod limits;
pub mod message;
pub mod rules;
#[cfg(feature = "validate")]
pub mod schema;
#[cfg(feature = "validate")]
pub mod state;
pub mod text;

#[cfg(feature = "validate")]
pub use descriptor::{Descriptor, DescriptorError, PrepareError, PreparedCall, Tool};
pub use finding::Finding;
pub use message::{Incoming, RequestId, ResponseBody, RpcError, Violation};
#[cfg(feature = "validate")]
pub use state::TickState;
pub use text::{TickData, TickText};
