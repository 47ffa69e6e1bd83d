//! `tickbox test`'s starts and files: the request a scenario's `[tick]`
//! makes, a scenario's scratch directory and the traces a run writes.

use crate::{Asking, Request, Target};
use std::path::{Path, PathBuf};
use tickbox_conformance::scenario::{self, trace, Outcome, Scenario, ScenarioResult};

/// The request a scenario's `[tick]` makes: its grants straight from the
/// scenario (the same checks and defaults as a command line's), a native
/// Tick started in the scenario's directory unless it says otherwise, and
/// nobody to approve (`why`): a scenario runs unattended, so what a
/// manifest asks for must have been approved beforehand (`tickbox trust`).
pub fn request(s: &Scenario, why: &'static str) -> Request {
    let t = &s.tick;
    let target = match &t.path {
        Some(p) => Target::named(&p.display().to_string()),
        None => Target::Command(t.command.clone()),
    };
    let cwd = t.cwd.clone().or_else(|| {
        (!target.is_sandboxed()).then(|| {
            s.file
                .parent()
                .filter(|p| !p.as_os_str().is_empty())
                .map_or_else(|| PathBuf::from("."), PathBuf::from)
        })
    });
    let mut request = Request::new(target);
    request.grants = t.grants.clone();
    request.cwd = cwd;
    request.asking = Asking::Nobody(why);
    request
}

/// The scratch directory a scenario's `[tick] scratch` asks for: a fresh
/// empty one seeded with its `[files]` before the Tick starts, granted to
/// the Tick at the guest path (added to `s`'s dir grants), removed when the
/// [`Scratch`] is dropped. None without `scratch`; a scratch on a native
/// Tick is invalid, a directory that cannot be made or seeded a start that
/// failed.
pub fn scratch(s: &mut Scenario) -> Result<Option<Scratch>, Outcome> {
    let Some(guest) = s.tick.scratch.clone() else {
        return Ok(None);
    };
    if !s.tick.path.as_deref().is_some_and(crate::is_sandboxed) {
        return Err(Outcome::Invalid(
            "[tick] scratch applies to wasm Ticks".into(),
        ));
    }
    let dir = Scratch::new()
        .map_err(|e| Outcome::StartFailed(format!("cannot make the scratch directory: {e}")))?;
    scenario::seed_files(dir.path(), &s.files).map_err(|e| {
        Outcome::StartFailed(format!("cannot seed the scratch directory ([files]): {e}"))
    })?;
    s.tick
        .grants
        .dir
        .push(format!("{}::{guest}", dir.path().display()));
    Ok(Some(dir))
}

/// A private temporary directory, removed on drop.
pub struct Scratch(PathBuf);

impl Scratch {
    /// A new empty directory, 0700, under the temporary directory: a
    /// name no other is using (made, never reused: an existing one is
    /// skipped, so nothing someone else placed there is taken).
    pub fn new() -> std::io::Result<Scratch> {
        use std::os::unix::fs::DirBuilderExt;
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.subsec_nanos());
        let mut n = 0u32;
        loop {
            let dir = std::env::temp_dir().join(format!(
                "tickbox-scratch-{}-{nanos}-{n}",
                std::process::id()
            ));
            match std::fs::DirBuilder::new().mode(0o700).create(&dir) {
                Ok(()) => return Ok(Scratch(dir)),
                Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists && n < 1000 => n += 1,
                Err(e) => return Err(e),
            }
        }
    }

    /// Where it is.
    pub fn path(&self) -> &Path {
        &self.0
    }

    /// Empties the directory and seeds it again, for a retry: each attempt
    /// starts from what `[files]` says, not from what the failed attempt
    /// left (which could make a retry pass for a reason of its own).
    pub fn reset(&self, files: &[scenario::SeedFile]) -> Result<(), String> {
        use std::os::unix::fs::DirBuilderExt;
        std::fs::remove_dir_all(&self.0)
            .and_then(|()| std::fs::DirBuilder::new().mode(0o700).create(&self.0))
            .map_err(|e| format!("cannot empty the scratch directory for a retry: {e}"))?;
        scenario::seed_files(&self.0, files)
            .map_err(|e| format!("cannot seed the scratch directory ([files]): {e}"))
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// Writes each result's trace as `NAME.trace.cast` in `dir` (names made
/// unique within the run, in the report's order, so a rerun overwrites
/// the same files), never through a link; the report notes each file,
/// each write that failed and each trace that was cut.
pub fn write_traces(results: &mut [ScenarioResult], dir: &Path) {
    let mut taken = std::collections::HashSet::new();
    for r in results {
        let Some(t) = r.trace.take() else { continue };
        let base = trace::file_name(&r.name);
        let mut name = base.clone();
        let mut n = 2;
        while !taken.insert(name.clone()) {
            let stem = base.trim_end_matches(trace::TRACE_SUFFIX);
            name = format!("{stem}-{n}{}", trace::TRACE_SUFFIX);
            n += 1;
        }
        let path = dir.join(&name);
        match scenario::write_regular(&path, &t.text) {
            Ok(()) => r.notes.push(format!("trace: {}", path.display())),
            Err(e) => r.notes.push(format!("the trace was not written: {e}")),
        }
        if let Some(why) = t.cut {
            r.notes.push(why);
        }
    }
}
