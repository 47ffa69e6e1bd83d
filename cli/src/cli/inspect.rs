//! `tickbox inspect TICK [--listen ADDR] [--open]`: one web page that shows
//! a Tick live (its screen, state, tools and protocol frames) and drives it.
//!
//! The command starts the Tick as the one-shot commands do (same flags,
//! grants and consent), with taps on its stdin and stdout
//! ([`timeline`]), and serves the page on loopback ([`server`]); it runs
//! until SIGINT or SIGTERM, and keeps serving after the Tick ends so the
//! page can still show how it ended and export the session.
//!
//! What reaches the browser is data the page inserts as text:
//! - the **screen** as rows of styled runs drawn from the host's screen
//!   model (`tickbox_runtime::render::runs`, the cell filter views use):
//!   no byte the Tick wrote reaches the page as markup or terminal input;
//! - the **state**, the **catalog**, call results and errors, and frame
//!   previews, every string and key through the one character policy for
//!   a reader that decodes JSON (`TickData::inert`);
//! - the page itself, its script and its style are tickbox's, in the
//!   binary (`include_str!`), served with a Content-Security-Policy that
//!   allows no inline script and nothing from elsewhere.
//!
//! The door ([`server`]) is `tickbox mcp --http`'s: a 32-byte random token
//! on every request (in the URL printed at start, then a cookie), `Host`
//! checked against the listen address, `Origin` checked on every request
//! that has one and required on every POST, and the MCP server's bounded
//! connections, head sizes and timeouts.
//!
//! Why a module of the CLI and not a crate: it is one command's surface,
//! made of pieces other layers own (the session, the renderer, the MCP
//! server's door, the scenario recorder); only the page's assets and the
//! routes are its own.
//!
//! Every bound, in one table (a unit test checks it against the constants):
//!
//! | constant | value | bounds |
//! |---|---|---|
//! | [`MAX_TIMELINE_FRAMES`] | 1000 | protocol frames kept for the page (older ones are dropped and counted) |
//! | [`FRAME_HOLD_BYTES`] | 4096 | bytes of one frame kept to read its method and id |
//! | [`FRAME_PREVIEW_CHARS`] | 240 | characters of a frame shown in the timeline |
//! | [`MAX_EVENT_CLIENTS`] | 8 | event streams open at once (503 past it) |
//! | [`EVENT_QUEUE`] | 256 | events queued for one slow stream before it is resent whole |
//! | [`MAX_ACTION_BODY_BYTES`] | 256 KiB | one POST body (a call's args, keys, a resize) |
//! | [`MAX_KEY_BYTES`] | 4096 | key bytes in one POST |
//! | [`SCREEN_INTERVAL`] | 50 ms | the shortest time between two screens sent |
//! | [`MAX_AUDIT_KEPT`] | 1000 | audit lines kept for the export |
//! | [`MAX_CHANGED_PATHS`] | 256 | paths of the state one update marks as changed |

mod server;
mod timeline;

use super::exit::Exit;
use super::open::{self, TickOpts, TickSpec};
use clap::Args;
use serde_json::{json, Value};
use std::collections::VecDeque;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tickbox_runtime::audit::AuditSink;
use tickbox_runtime::scenario::Recorder;
use tickbox_runtime::session::{Session, StateSnapshot};
use tickbox_runtime::text::TickData;
use tickbox_runtime::util::lock;
use timeline::{Dir, Tap, Timeline};

/// Protocol frames kept for the page; older ones are dropped and counted.
pub const MAX_TIMELINE_FRAMES: usize = 1000;
/// Bytes of one frame kept to read its method and id (and its preview).
pub const FRAME_HOLD_BYTES: usize = 4096;
/// Characters of a frame the timeline shows.
pub const FRAME_PREVIEW_CHARS: usize = 240;
/// Event streams (`/events`) open at once; 503 past it.
pub const MAX_EVENT_CLIENTS: usize = 8;
/// Events queued for one stream; a stream that falls further behind is
/// sent the whole picture again instead.
pub const EVENT_QUEUE: usize = 256;
/// The largest POST body: a call's args, keys or a resize.
pub const MAX_ACTION_BODY_BYTES: usize = 256 * 1024;
/// Key bytes in one POST to `/api/keys`.
pub const MAX_KEY_BYTES: usize = 4096;
/// The shortest time between two screens sent to the page: a Tick that
/// draws constantly costs one snapshot per interval.
pub const SCREEN_INTERVAL: Duration = Duration::from_millis(50);
/// Audit lines kept for the page's export (the oldest dropped first).
pub const MAX_AUDIT_KEPT: usize = 1000;
/// Paths of the state listed as changed by one update; past it the page
/// highlights the first ones only.
pub const MAX_CHANGED_PATHS: usize = 256;

pub const HELP: &str = "\
Serves one page on loopback that shows the Tick live and drives it: its screen
(keys typed there go to the Tick; the panel's size is its terminal's), its state
(fields changed by the last update highlighted), a form per tool (mutating tools
ask to confirm, naming the tool and the catalog revision), the protocol frames,
and exports of the session as a `tickbox test` scenario and as the audit stream.

The URL is printed on stderr, with a random token that every request needs (the
page moves it into a cookie and out of the address bar). Requests whose Host is
not the listen address, or whose Origin is another site, are refused. --listen
names another address (the token is still required). Ctrl-C stops the server
and the Tick.

Exit codes:
  130  stopped by SIGINT or SIGTERM (the usual way to end it)
  2    usage error (a bad --listen, a live instance: not supported yet)
  3    the Tick could not start or initialize, or the address cannot be bound";

#[derive(Args)]
#[command(after_help = HELP)]
pub struct InspectArgs {
    /// The Tick: a path, a .wasm file, an oci:// reference, or a command after --
    #[arg(value_name = "TICK")]
    pub tick: Option<String>,
    /// Where to listen: HOST:PORT (default 127.0.0.1 on a random port)
    #[arg(long, value_name = "ADDR", default_value = "127.0.0.1:0")]
    pub listen: String,
    /// Open the page in the default browser (xdg-open), through a 0600 file so the token is on no command line
    #[arg(long)]
    pub open: bool,
    #[command(flatten)]
    pub opts: TickOpts,
}

/// Audit lines kept in memory for the export; the writer never waits.
#[derive(Default)]
struct AuditRing(Mutex<VecDeque<String>>);

impl AuditSink for AuditRing {
    fn offer(&self, line: String) -> bool {
        let mut lines = lock(&self.0);
        if lines.len() >= MAX_AUDIT_KEPT {
            lines.pop_front();
        }
        lines.push_back(line);
        true
    }
}

/// What the server shares: the Tick's session and what the page sees of it.
pub struct Inspector {
    session: Arc<Session>,
    timeline: Arc<Timeline>,
    recorder: Recorder,
    audit: Arc<AuditRing>,
    /// The state last sent and the changed paths it was sent with.
    last_state: Mutex<(Value, Vec<String>, u64)>,
}

/// Runs the command until a signal.
pub async fn run(mut args: InspectArgs) -> Result<(), Exit> {
    let spec = args.opts.spec(args.tick.clone())?;
    if let TickSpec::Live(name) = &spec {
        return Err(Exit::usage(format!(
            "inspect cannot show a live instance yet (`@{name}`): start the Tick with `tickbox inspect TICK` instead"
        )));
    }
    let addr: SocketAddr = args.listen.parse().map_err(|_| {
        Exit::usage(format!(
            "--listen {}: not an address like 127.0.0.1:0 or [::1]:8080",
            tickbox_runtime::text::escape(&args.listen)
        ))
    })?;
    if !addr.ip().is_loopback() {
        eprintln!(
            "tickbox inspect: warning: listening on {addr}, reachable from other machines; every request still needs the token"
        );
    }
    let audit = Arc::new(AuditRing::default());
    super::audit::also_into(audit.clone());
    args.opts.audit_origin = tickbox_runtime::audit::Origin::Cli;
    let launcher = open::launcher(spec.clone(), &args.opts)?;
    let config = args.opts.config()?;
    let mut io = launcher.spawn().await.map_err(Exit::session)?;
    let timeline = Timeline::new();
    io.stdin = Box::new(Tap::new(io.stdin, timeline.clone(), Dir::ToTick));
    io.stdout = Box::new(Tap::new(io.stdout, timeline.clone(), Dir::FromTick));
    let session = Session::start(io, config).await.map_err(|e| {
        let last_words = e.last_words.clone();
        Exit::session(e).with_last_words(last_words)
    })?;
    let session = Arc::new(session);
    let record = super::run::record_tick(&spec, &args.opts, launcher.kind(), session.view().size());
    // The recorder only ever renders text here (the page's export); the
    // path names the file in the replay hint, as the download is named.
    let scratch = std::env::temp_dir().join("inspect.scenario.toml");
    let inspector = Arc::new(Inspector {
        session: session.clone(),
        timeline,
        recorder: Recorder::new(scratch, &record),
        audit,
        last_state: Mutex::new((Value::Null, Vec::new(), 0)),
    });
    let listener = tokio::net::TcpListener::bind(addr)
        .await
        .map_err(|e| Exit::session(format!("cannot listen on {addr}: {e}")))?;
    let local = listener
        .local_addr()
        .map_err(|e| Exit::session(format!("cannot read the bound address: {e}")))?;
    let token = server::new_token()?;
    let url = format!("http://{local}/?token={token}");
    // The URL (with the token) is printed once, here, and never logged.
    eprintln!("tickbox inspect: serving the page on {url}");
    let _opened = if args.open {
        server::open_in_browser(&url, local.port())
    } else {
        None
    };
    // SIGINT and SIGTERM end the command from `main` (exit 130), which
    // drops this future: the server's tasks go with the runtime, the Tick
    // is stopped, and the `--open` file is removed.
    server::serve(inspector, listener, token, std::future::pending()).await;
    session.shutdown().await;
    Ok(())
}

impl Inspector {
    /// The catalog as the page reads it (strings inert), or null.
    fn catalog(&self) -> Value {
        let Some(d) = self.session.descriptor() else {
            return Value::Null;
        };
        let tools: Vec<Value> = d
            .tools
            .iter()
            .map(|t| {
                json!({
                    "name": t.name.wire(),
                    "description": t.description.wire(),
                    "input_schema": t.input_schema,
                    "mutates": t.mutates,
                })
            })
            .collect();
        TickData::new(json!({
            "kind": d.kind.wire(),
            "title": d.title.wire(),
            "description": d.description.wire(),
            "revision": d.revision,
            "tools": tools,
        }))
        .inert()
    }

    /// The state as the page reads it: seq, data (inert), updates merged
    /// since the previous one sent, and the paths that changed.
    fn state_event(&self, snap: &StateSnapshot) -> Value {
        let Some(state) = &snap.state else {
            return json!({"seq": null, "data": null, "merged": 0, "changed": [], "updates": 0});
        };
        let data = state.data.inert();
        let mut last = lock(&self.last_state);
        let merged = snap.updates.saturating_sub(last.2);
        if data != last.0 {
            let mut changed = Vec::new();
            changed_paths(&last.0, &data, String::new(), &mut changed);
            *last = (data.clone(), changed, snap.updates);
        } else {
            last.2 = snap.updates;
        }
        json!({
            "seq": state.seq,
            "at": state.at,
            "data": data,
            "merged": merged,
            "updates": snap.updates,
            "changed": last.1,
        })
    }

    /// The screen as rows of styled runs, its size and the cursor.
    fn screen(&self) -> Value {
        let view = self.session.view();
        let snap = view.snapshot();
        let (rows, cursor) = tickbox_runtime::render::runs(&snap);
        let (cols, height) = view.size();
        json!({"cols": cols, "rows": height, "lines": rows, "cursor": cursor})
    }

    /// Everything the page shows, for a new event stream (or one that fell
    /// behind).
    fn hello(&self) -> Value {
        let (frames, dropped) = self.timeline.snapshot();
        let snap = self.session.state();
        json!({
            "catalog": self.catalog(),
            "state": self.state_event(&snap),
            "screen": self.screen(),
            "frames": frames,
            "frames_dropped": dropped,
            "ended": self.session.end_reason().map(|r| tickbox_runtime::text::escape(&r.to_string())),
            "limits": {"timeline_frames": MAX_TIMELINE_FRAMES},
        })
    }

    /// The session so far as a `tickbox test` scenario (TOML).
    fn scenario(&self) -> String {
        self.recorder.text()
    }

    /// The audit lines kept so far (JSON lines).
    fn audit_lines(&self) -> String {
        let lines = lock(&self.audit.0);
        let mut out = String::new();
        for l in lines.iter() {
            out.push_str(l);
            out.push('\n');
        }
        out
    }
}

/// JSON pointers of what differs between `old` and `new`, at most
/// [`MAX_CHANGED_PATHS`]; a value whose type changed is one path.
fn changed_paths(old: &Value, new: &Value, at: String, out: &mut Vec<String>) {
    if out.len() >= MAX_CHANGED_PATHS || old == new {
        return;
    }
    let escape = |k: &str| k.replace('~', "~0").replace('/', "~1");
    match (old, new) {
        (Value::Object(a), Value::Object(b)) => {
            for (k, v) in b {
                let path = format!("{at}/{}", escape(k));
                match a.get(k) {
                    Some(o) => changed_paths(o, v, path, out),
                    None if out.len() < MAX_CHANGED_PATHS => out.push(path),
                    None => return,
                }
            }
        }
        (Value::Array(a), Value::Array(b)) => {
            for (i, v) in b.iter().enumerate() {
                let path = format!("{at}/{i}");
                match a.get(i) {
                    Some(o) => changed_paths(o, v, path, out),
                    None if out.len() < MAX_CHANGED_PATHS => out.push(path),
                    None => return,
                }
            }
        }
        _ => out.push(at),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn changed_paths_name_the_leaves_that_changed() {
        let mut out = Vec::new();
        changed_paths(
            &json!({"value": 1, "recent": [{"v": 1}], "same": "x"}),
            &json!({"value": 2, "recent": [{"v": 1}, {"v": 2}], "same": "x", "a/b": true}),
            String::new(),
            &mut out,
        );
        // In the order of the keys (serde_json keeps objects sorted).
        assert_eq!(out, ["/a~1b", "/recent/1", "/value"]);
        let mut none = Vec::new();
        changed_paths(&json!({"a": 1}), &json!({"a": 1}), String::new(), &mut none);
        assert!(none.is_empty());
    }

    #[test]
    fn the_limits_table_matches_the_constants() {
        let doc = include_str!("inspect.rs");
        let row = |name: &str, value: &str| {
            let line = format!("| [`{name}`] | {value} |");
            assert!(
                doc.contains(&line),
                "the table's row for {name} says {value}"
            );
        };
        row("MAX_TIMELINE_FRAMES", &MAX_TIMELINE_FRAMES.to_string());
        row("FRAME_HOLD_BYTES", &FRAME_HOLD_BYTES.to_string());
        row("FRAME_PREVIEW_CHARS", &FRAME_PREVIEW_CHARS.to_string());
        row("MAX_EVENT_CLIENTS", &MAX_EVENT_CLIENTS.to_string());
        row("EVENT_QUEUE", &EVENT_QUEUE.to_string());
        row(
            "MAX_ACTION_BODY_BYTES",
            &format!("{} KiB", MAX_ACTION_BODY_BYTES / 1024),
        );
        row("MAX_KEY_BYTES", &MAX_KEY_BYTES.to_string());
        row(
            "SCREEN_INTERVAL",
            &format!("{} ms", SCREEN_INTERVAL.as_millis()),
        );
        row("MAX_AUDIT_KEPT", &MAX_AUDIT_KEPT.to_string());
        row("MAX_CHANGED_PATHS", &MAX_CHANGED_PATHS.to_string());
    }
}
