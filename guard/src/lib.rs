//! tickbox-guard: the door of every HTTP server tickbox runs.
//!
//! Three servers face the network: the MCP facade over Streamable HTTP
//! (`tickbox mcp --http`), its `/metrics` page (`--metrics`) and the
//! inspector's page (`tickbox inspect`). Each is a different program
//! behind the same walls, so the walls are here, once, with tests of
//! their own, and each server builds its door from them:
//!
//! - [`door`] — accepting connections, the bearer token (in constant
//!   time; a header, or a query where a server allows it; never a
//!   cookie), connection slots counted per server ([`door::Gate`]: in
//!   all, per peer, and unauthenticated connections, the oldest closed
//!   first), and the timeouts that keep a silent or slow peer from
//!   holding one;
//! - [`origin`] — the `Host` and `Origin` checks that keep a web page in
//!   a person's browser from reaching a server on their loopback (DNS
//!   rebinding, another origin);
//! - [`body`] — a request body read whole within its bytes, time,
//!   nesting and count of JSON values;
//! - [`limits`] — every bound of the above, in one table.
//!
//! Why a crate of its own: the inspector is the application layer's and
//! the MCP facade is a layer of its own; neither should reach into the
//! other for its walls, and the walls need nothing of either (no Tick,
//! no session, no MCP). What a request is for is each server's business.
//!
//! A server's door, in short:
//!
//! ```no_run
//! # async fn demo(listener: tokio::net::TcpListener) {
//! use std::sync::Arc;
//! use tickbox_guard::door::{self, Gate, TokenIn};
//! use tickbox_guard::door::DEFAULT_BOUNDS;
//! let gate = Arc::new(Gate::new("example", DEFAULT_BOUNDS));
//! let token = Arc::new(String::from("a long random token"));
//! let handle = {
//!     let gate = gate.clone();
//!     move |req: hyper::Request<hyper::body::Incoming>, conn: Arc<door::Conn>| {
//!         let (gate, token) = (gate.clone(), token.clone());
//!         async move {
//!             if !door::authorized(&req, &token, TokenIn::Header) {
//!                 return door::unauthorized("unauthorized: send the token");
//!             }
//!             if let Err(refused) = gate.admit(&conn) {
//!                 return *refused;
//!             }
//!             door::plain(hyper::StatusCode::OK, "hello")
//!         }
//!     }
//! };
//! let close = tokio_util::sync::CancellationToken::new();
//! door::accept(listener, gate, handle, close, std::future::pending()).await;
//! # }
//! ```

pub mod body;
pub mod door;
pub mod limits;
pub mod origin;
