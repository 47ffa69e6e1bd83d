//! Every number the Tick protocol fixes, in one place.
//!
//! Protocol 3's own tables were lost from the draft; these are the values
//! tickbox's reference notes fill the gaps with. Change them here and nowhere
//! else: the session, the framing and the CLI all read from this module.

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
