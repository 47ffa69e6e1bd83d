//! Every number the Tick protocol fixes, in one place.
//!
//! Protocol 3's own tables were lost from the draft; these are the values
//! tickbox's reference notes fill the gaps with. Change them here and nowhere
//! else: the session, the framing and the CLI all read from this module.
//!
//! | constant | value | bounds |
//! |---|---|---|
//! | **the wire** | | |
//! | [`PROTOCOL_VERSION`] | 3 | the only version this host speaks (§4.3) |
//! | [`MAX_LINE_BYTES`] | 8 MiB | one line in either direction, newline excluded (§3.6) |
//! | [`MAX_IN_FLIGHT`] | 8 | requests in flight per Tick (§3.3) |
//! | [`MAX_UINTEGER`] | 2^53 − 1 | a protocol `uinteger` (§2.2) |
//! | **sizes of what a Tick sends** | | |
//! | [`MAX_DESCRIPTOR_BYTES`] | 512 KiB | a tick/describe result, re-encoded (§5.3) |
//! | [`MAX_UPDATE_BYTES`] | 512 KiB | one tick/update's params, re-encoded (§8.2) |
//! | [`MAX_CALL_RESULT_BYTES`] | 8 MiB | a tick/call result, re-encoded (§3.6) |
//! | **time** | | |
//! | [`INIT_TIMEOUT`] | 10 s | start to the end of the first tick/read (§4.2) |
//! | [`REQUEST_TIMEOUT`] | 10 s | each tick/describe and tick/read (§4.2) |
//! | [`CALL_TIMEOUT`] | 60 s | a tick/call, after which its outcome is unknown (§7.3) |
//! | **the view and the environment** | | |
//! | [`INITIAL_COLS`], [`INITIAL_ROWS`] | 120 × 30 | a Tick's view terminal at start (§4.1) |
//! | [`TERM_VALUE`] | `xterm-256color` | `TERM` for every Tick |
//! | [`INSTANCE_ID_VAR`] | `TICKLOOP_INSTANCE_ID` | the variable naming the started instance (§4.1) |
//! | [`SCREEN_EXCERPT_CHARS`] | 256 | the screen shown with an initialization failure (§4.2) |
//! | **subscriptions** | | |
//! | [`DELIVERY_BUDGET_BYTES`] | 16 KiB | one delivery (§6.4) |
//! | [`DELIVERY_ITEM_BUDGET_BYTES`] | 4 KiB | each item when several are delivered (§6.4) |
//! | **input schemas** | | |
//! | [`MAX_PATTERN_BYTES`] | 1 MiB | one compiled `pattern` (§5.3) |
//! | [`PATTERN_DFA_BYTES`] | 256 KiB | one pattern's lazy DFA cache while checking args |
//! | [`PATTERN_BACKTRACK_LIMIT`] | 1,000,000 | backtracking steps of one pattern on one value |
//! | [`MAX_CATALOG_PATTERN_BYTES`] | 8 MiB | every compiled pattern of one catalog (§5.3) |
//! | **catalog revisions** | | |
//! | [`REVISION_BURST`] | 8 | new revisions taken at once after the first |
//! | [`REVISION_INTERVAL`] | 5 s | one more revision once the burst is spent |

use std::time::Duration;

/// The only protocol version this host speaks (§4.3).
pub const PROTOCOL_VERSION: u64 = 3;

/// Requests in flight per Tick, tick/describe and tick/read included (§3.3).
pub const MAX_IN_FLIGHT: usize = 8;

/// One line in either direction, newline excluded (§3.6).
pub const MAX_LINE_BYTES: usize = 8 * 1024 * 1024;

/// A tick/describe result, measured after re-encoding (§5.3).
pub const MAX_DESCRIPTOR_BYTES: usize = 512 * 1024;

/// The params of one tick/update, measured after re-encoding (§8.2).
pub const MAX_UPDATE_BYTES: usize = 512 * 1024;

/// A tick/call result, measured after re-encoding (§3.6).
pub const MAX_CALL_RESULT_BYTES: usize = 8 * 1024 * 1024;

/// From start to the end of the first tick/read (§4.2).
pub const INIT_TIMEOUT: Duration = Duration::from_secs(10);

/// Each tick/describe and tick/read, during initialization and after (§4.2).
pub const REQUEST_TIMEOUT: Duration = Duration::from_secs(10);

/// A tick/call; after this the outcome is unknown (§7.3).
pub const CALL_TIMEOUT: Duration = Duration::from_secs(60);

/// Initial size of a Tick's view terminal (§4.1).
pub const INITIAL_COLS: u16 = 120;
/// Initial size of a Tick's view terminal (§4.1).
pub const INITIAL_ROWS: u16 = 30;

/// `TERM` given to every Tick: its view is an xterm-compatible emulator.
pub const TERM_VALUE: &str = "xterm-256color";

/// The variable that tells a Tick which started instance it is (§4.1).
pub const INSTANCE_ID_VAR: &str = "TICKLOOP_INSTANCE_ID";

/// How much of the view screen accompanies an initialization failure (§4.2).
pub const SCREEN_EXCERPT_CHARS: usize = 256;

/// Subscription delivery budget for the whole delivery (§6.4).
pub const DELIVERY_BUDGET_BYTES: usize = 16 * 1024;

/// Subscription delivery budget per item when several are delivered (§6.4).
pub const DELIVERY_ITEM_BUDGET_BYTES: usize = 4 * 1024;

/// Largest value of a protocol `uinteger` (§2.2).
pub const MAX_UINTEGER: u64 = (1 << 53) - 1;

/// The compiled size of one `pattern` (or `patternProperties` key) in an
/// input schema (§5.3): 1 MiB. A pattern that compiles larger (a Unicode
/// class repeated a few dozen times) is a `describe.schemas` finding, found
/// as soon as compilation passes the bound, not after it finished.
pub const MAX_PATTERN_BYTES: usize = 1024 * 1024;

/// The lazy DFA cache one pattern may grow while it checks call args: 256 KiB.
pub const PATTERN_DFA_BYTES: usize = 256 * 1024;

/// Backtracking steps one pattern may take on one value (patterns with
/// look-around or back-references): 1,000,000.
pub const PATTERN_BACKTRACK_LIMIT: usize = 1_000_000;

/// All compiled patterns of one catalog together, measured, each distinct
/// pattern once (§5.3): 8 MiB. A host keeps at most twice this per Tick
/// (its current catalog's and what it cached from earlier ones), plus
/// [`PATTERN_DFA_BYTES`] per pattern in use.
pub const MAX_CATALOG_PATTERN_BYTES: usize = 8 * 1024 * 1024;

/// New catalog revisions a host takes from a Tick at once (after the
/// first): 8. Past it a new revision waits for [`REVISION_INTERVAL`]; until
/// then the host keeps the catalog it has (calls stay bound to it).
pub const REVISION_BURST: u32 = 8;

/// How often one more catalog revision is taken once the burst is spent: 5 s.
pub const REVISION_INTERVAL: Duration = Duration::from_secs(5);
