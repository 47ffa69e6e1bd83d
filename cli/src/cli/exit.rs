//! Exit codes, and the one stderr line that goes with every failure.

/// The command did what was asked.
pub const OK: u8 = 0;
/// The tool returned an error (stdout: `{"code","message","data","executed"}`).
pub const TOOL_ERROR: u8 = 1;
/// Usage error, bad args, or approval refused: a mutating call without
/// `--yes`, or a manifest's requests not approved (nothing was sent or started).
pub const USAGE: u8 = 2;
/// The Tick could not start, failed initialization, or its session ended on a violation.
pub const SESSION: u8 = 3;
/// A call's outcome is unknown (timeout, the Tick died mid-call, malformed response).
pub const UNKNOWN_OUTCOME: u8 = 4;
/// `tickbox test`: a step of a scenario failed, or snapshots are left to
/// review.
pub const SCENARIO_FAILED: u8 = 1;
/// Interrupted by SIGINT or SIGTERM; the Tick was stopped.
pub const INTERRUPTED: u8 = 130;

/// The help text that documents them.
pub const HELP: &str = "\
Exit codes:
  0    success
  1    the tool returned an error (stdout: {\"code\",\"message\",\"data\",\"executed\"})
  2    usage error, invalid args, a TICKBOX_* variable set to a value it cannot take,
       a mutating call without --yes (nothing was sent), or a Tick's manifest asking
       for grants no one approved for its content (nothing was started; `tickbox
       trust PATH` approves it)
  3    the Tick could not start, initialization failed, or the session ended on a
       protocol violation (stderr names the rule)
  4    unknown outcome: the call timed out, the Tick died mid-call, or its response
       was malformed; the call is never resent
  130  interrupted; the Tick was stopped
A closed stdout (e.g. `| head -1`) ends any command at once with exit 0.
Messages name a grant, bound or setting by its key, as policy files, manifests
and scenarios write it; its flag is the key with dashes (max_memory: --max-memory).";

use tickbox_runtime::protocol::TickText;

/// A failed command: its exit code and the line for stderr.
#[derive(Debug)]
pub struct Exit {
    pub code: u8,
    pub message: String,
    /// The Tick's last words (the last lines of its screen), printed under
    /// the error line, escaped.
    pub last_words: Vec<TickText>,
}

impl Exit {
    pub fn new(code: u8, message: impl std::fmt::Display) -> Self {
        Exit {
            code,
            message: message.to_string(),
            last_words: Vec::new(),
        }
    }
    /// The same failure, with the Tick's last words.
    pub fn with_last_words(mut self, lines: Vec<TickText>) -> Self {
        self.last_words = lines;
        self
    }
    pub fn usage(message: impl std::fmt::Display) -> Self {
        Exit::new(USAGE, message)
    }
    pub fn session(message: impl std::fmt::Display) -> Self {
        Exit::new(SESSION, message)
    }
    /// Stdout was closed by its reader (EPIPE): exit 0, nothing on stderr.
    pub fn stdout_closed() -> Self {
        Exit::new(OK, "")
    }
    /// Whether this is [`Exit::stdout_closed`].
    pub fn is_stdout_closed(&self) -> bool {
        self.code == OK && self.message.is_empty()
    }
}
