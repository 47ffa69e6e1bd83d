//! `tickbox ls`: the live instances of this user, as JSON lines or a table.

use super::attach::exit_of;
use super::exit::Exit;
use clap::Args;
use tickbox_runtime::live::{client, InstanceInfo, Registry};

#[derive(Args)]
pub struct LsArgs {
    /// JSON lines even on a terminal (the default when stdout is not one)
    #[arg(long)]
    pub json: bool,
}

/// Lists instances; stale sockets are removed on the way.
pub async fn run(args: LsArgs) -> Result<(), Exit> {
    let registry = Registry::open().map_err(exit_of)?;
    let all = client::list(&registry).await;
    // SAFETY: isatty has no preconditions.
    let table = !args.json && unsafe { libc::isatty(1) } == 1;
    if table {
        return super::emit_text(&render(&all));
    }
    for info in &all {
        let v = serde_json::to_value(info).map_err(|e| Exit::session(e.to_string()))?;
        super::emit(&v, false)?;
    }
    Ok(())
}

fn render(all: &[InstanceInfo]) -> String {
    let mut rows = vec![[
        "ID", "NAME", "KIND", "TITLE", "BACKEND", "PID", "STARTED", "VIEWS", "SEQ",
    ]
    .map(String::from)];
    for i in all {
        rows.push([
            i.id.clone(),
            i.name.clone(),
            i.kind.clone(),
            i.title.clone(),
            i.backend.clone(),
            i.pid.to_string(),
            i.started.clone(),
            i.views.to_string(),
            i.seq.map_or("-".into(), |s| s.to_string()),
        ]);
    }
    let widths: Vec<usize> = (0..9)
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
