//! `tickbox ls`: the live instances of this user, as JSON lines or a table;
//! with `-a`, the instances that ended in the last hour too. `tickbox logs`:
//! an instance's retained output.

use super::attach::exit_of;
use super::exit::Exit;
use clap::Args;
use tickbox_runtime::live::ended::{self, EndedInstance};
use tickbox_runtime::live::wire::Request;
use tickbox_runtime::live::{client, InstanceInfo, Registry};
use tickbox_runtime::protocol::TickText;
use tickbox_runtime::text::{escape, name};

#[derive(Args)]
pub struct LsArgs {
    /// JSON lines even on a terminal (the default when stdout is not one)
    #[arg(long)]
    pub json: bool,
    /// Also list instances that ended in the last hour, with why they ended
    #[arg(short, long)]
    pub all: bool,
}

#[derive(Args)]
pub struct LogsArgs {
    /// A live or recently ended instance: its id or name, `@` optional
    #[arg(value_name = "ID|NAME")]
    pub target: String,
}

/// Lists instances; stale sockets are removed on the way.
pub async fn run(args: LsArgs) -> Result<(), Exit> {
    let registry = Registry::open().map_err(exit_of)?;
    let all = client::list(&registry).await;
    let gone = if args.all {
        ended::list(&registry)
    } else {
        Vec::new()
    };
    // SAFETY: isatty has no preconditions.
    let table = !args.json && unsafe { libc::isatty(1) } == 1;
    if table {
        return super::emit_text(&render(&all, &gone, args.all));
    }
    for info in &all {
        let v = serde_json::to_value(info).map_err(|e| Exit::session(e.to_string()))?;
        super::emit(&v, false)?;
    }
    for record in gone {
        let record = EndedInstance {
            last_lines: Vec::new(),
            ..record
        };
        let v = serde_json::to_value(record).map_err(|e| Exit::session(e.to_string()))?;
        super::emit(&v, false)?;
    }
    Ok(())
}

/// `tickbox logs`: the screen of a live instance, or the last lines of an
/// ended one, as escaped text.
pub async fn logs(args: LogsArgs) -> Result<(), Exit> {
    let registry = Registry::open().map_err(exit_of)?;
    let target = args.target.trim_start_matches('@');
    match client::connect(&registry, target).await {
        Ok(conn) => {
            let text = conn.request(Request::Screen).await.map_err(exit_of)?;
            // The live host's screen text: the Tick's, typed again here.
            let text = TickText::from(text.as_str().unwrap_or_default());
            let lines: Vec<&str> = text.wire().lines().map(str::trim_end).collect();
            let end = lines
                .iter()
                .rposition(|l| !l.is_empty())
                .map_or(0, |i| i + 1);
            super::emit_tick_text(&TickText::from(lines[..end].join("\n")))
        }
        Err(live) => match ended::find(&registry, target) {
            Some(r) => {
                eprintln!(
                    "tickbox: `{}` ended {}: {}",
                    escape(&r.info.name),
                    escape(&r.ended),
                    escape(&r.status)
                );
                let lines: Vec<&str> = r.last_lines.iter().map(TickText::wire).collect();
                super::emit_tick_text(&TickText::from(lines.join("\n")))
            }
            None => Err(exit_of(live)),
        },
    }
}

fn render(all: &[InstanceInfo], gone: &[EndedInstance], with_status: bool) -> String {
    let mut head = vec![
        "ID", "NAME", "KIND", "TITLE", "BACKEND", "PID", "STARTED", "VIEWS", "SEQ",
    ];
    if with_status {
        head.push("STATUS");
    }
    let mut rows = vec![head.into_iter().map(String::from).collect::<Vec<_>>()];
    // Kind and title come from the Tick: escaped, so a title cannot move
    // the cursor or erase its own row.
    let row = |i: &InstanceInfo, views: String| {
        vec![
            escape(&i.id),
            name(&i.name),
            name(&i.kind),
            name(&i.title),
            escape(&i.backend),
            i.pid.to_string(),
            escape(&i.started),
            views,
            i.seq.map_or("-".into(), |s| s.to_string()),
        ]
    };
    for i in all {
        let mut r = row(i, i.views.to_string());
        if with_status {
            r.push("live".into());
        }
        rows.push(r);
    }
    for g in gone {
        let mut r = row(&g.info, "-".into());
        r.push(format!("ended {}: {}", escape(&g.ended), escape(&g.status)));
        rows.push(r);
    }
    let columns = rows[0].len();
    let widths: Vec<usize> = (0..columns)
        .map(|c| rows.iter().map(|r| r[c].chars().count()).max().unwrap_or(0))
        .collect();
    rows.iter()
        .map(|r| {
            r.iter()
                .zip(&widths)
                .map(|(cell, w)| format!("{cell:<w$}"))
                .collect::<Vec<_>>()
                .join("  ")
                .trim_end()
                .to_string()
        })
        .collect::<Vec<_>>()
        .join("\n")
}
