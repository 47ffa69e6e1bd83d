//! Consent: what a wasm Tick's manifest (`NAME.tick.toml`, or an `oci://`
//! Tick's requested-grants layer) asks for is granted only under a
//! person's approval of that exact content.
//!
//! Before such a Tick starts, its bytes are hashed once and the trust
//! store is asked about that digest. Covered: the requests are granted
//! (merged with the caller's grants) and the start is pinned to the
//! digest, so content swapped after the decision cannot run under it. Not
//! covered: the request's [`Asking`] says who may approve: an
//! [`Approver`] (the CLI's terminal prompt), nobody (`tickbox mcp`,
//! `tickbox test`: refused with one line naming `tickbox trust`), or a
//! decision made earlier.

use crate::AppError;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use tickbox_sandbox::consent::{
    self, asks_nothing, check_manifest, request_lines, requested_guest, Approval, TrustStore,
    Verdict,
};
use tickbox_sandbox::{GrantSpec, WasmDigest};

/// Who may approve what a manifest asks for.
#[derive(Clone)]
pub enum Asking {
    /// A person, through the caller's [`Approver`].
    Person(Arc<dyn Approver>),
    /// Nobody: what is not approved already is refused, for this reason.
    Nobody(&'static str),
    /// Decided already (`tickbox run` decides before it forks): `None`
    /// grants nothing beyond the request's own grants.
    Decided(Option<Box<Decided>>),
}

impl std::fmt::Debug for Asking {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Asking::Person(_) => f.write_str("Person"),
            Asking::Nobody(why) => write!(f, "Nobody({why:?})"),
            Asking::Decided(d) => write!(f, "Decided({d:?})"),
        }
    }
}

/// A person's answer to an approval request.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Answer {
    /// Not approved.
    No,
    /// Approved; `updates`: for later content by the same signer asking for no more too.
    Yes { updates: bool },
}

/// Why an [`Approver`] has no answer.
#[derive(Clone, Debug)]
pub enum Unanswered {
    /// Nobody can answer here (no terminal): the start is refused with this reason.
    Nobody(String),
    /// Asking failed.
    Failed(String),
    /// The person interrupted the question.
    Interrupted,
}

/// Asks a person about a [`Subject`] the trust store does not cover. The
/// application layer decides when to ask and keeps the answer; the
/// implementation only asks (the CLI draws its prompt on the terminal).
pub trait Approver: Send + Sync {
    /// Asks whether `subject` may have what it asks for; `verdict` says
    /// what the trust store knows of earlier approvals.
    fn ask(&self, subject: &Subject, verdict: &Verdict) -> Result<Answer, Unanswered>;
    /// Told after the answer was kept: `Some(dir)` approved and kept
    /// there, `None` declined.
    fn kept(&self, _approved_in: Option<&Path>) {}
}

/// A decision taken: the content approved, and what it asked for.
#[derive(Clone, Debug)]
pub struct Decided {
    pub digest: WasmDigest,
    pub requested: GrantSpec,
}

/// What a person approves: this content, by this signer, asking for these grants.
pub struct Subject {
    /// The Tick's name: its canonical path, or its registry name.
    pub name: String,
    pub digest: WasmDigest,
    pub signer: Option<String>,
    pub requested: GrantSpec,
    /// What `tickbox trust` takes to approve it, when not the name (a pinned reference).
    pub approve_as: Option<String>,
}

/// The subject of a local wasm file with a manifest asking for something.
pub fn subject_of(path: &Path, signer: Option<String>) -> Result<Option<Subject>, AppError> {
    let Some(requested) = crate::grants::manifest_of(path)? else {
        return Ok(None);
    };
    if asks_nothing(&requested) {
        return Ok(None);
    }
    let manifest = path.with_extension("tick.toml");
    checked(&requested, &manifest.display().to_string())?;
    let name = std::fs::canonicalize(path)
        .map_err(|e| AppError::Usage(format!("{}: {e}", path.display())))?;
    let digest = consent::digest_file(&name)
        .map_err(|e| AppError::Session(format!("cannot read {}: {e}", path.display())))?;
    Ok(Some(Subject {
        name: name.display().to_string(),
        digest,
        signer,
        requested,
        approve_as: None,
    }))
}

/// A manifest's requests, checked before anyone is asked to approve them.
fn checked(requested: &GrantSpec, origin: &str) -> Result<(), AppError> {
    let bad = |e: &dyn std::fmt::Display| AppError::Usage(format!("{origin}: {e}"));
    check_manifest(requested).map_err(|e| bad(&e))?;
    // Everything but the directories must be grantable as written (an
    // `env NAME` that is unset here, a malformed address): said before
    // anyone is asked to approve it.
    let mut rest = requested.clone();
    rest.dir.clear();
    rest.resolve().map_err(|e| bad(&e))?;
    Ok(())
}

/// The subject of a pulled Tick whose requested-grants layer asks for something.
pub fn subject_of_pulled(
    name: String,
    pinned: String,
    digest: WasmDigest,
    signer: Option<String>,
    requested: GrantSpec,
) -> Result<Option<Subject>, AppError> {
    if asks_nothing(&requested) {
        return Ok(None);
    }
    checked(&requested, &format!("{name} (its requested grants)"))?;
    Ok(Some(Subject {
        name,
        digest,
        signer,
        requested,
        approve_as: Some(pinned),
    }))
}

/// The approval of `subject` as the trust store keeps it.
pub fn approval(subject: &Subject, updates: bool) -> Approval {
    Approval {
        name: subject.name.clone(),
        digest: subject.digest,
        signer: subject.signer.clone(),
        requested: subject.requested.clone(),
        approved_at: tickbox_host::util::rfc3339(std::time::SystemTime::now()),
        updates,
    }
}

/// Decides whether `subject` may have what it asks for: approved in the
/// trust store at `dir`, else asked of whoever `asking` names.
pub fn decide(subject: &Subject, asking: &Asking, dir: &Path) -> Result<(), AppError> {
    let store = TrustStore::open(dir).map_err(AppError::usage)?;
    let verdict = store.verdict(
        &subject.name,
        &subject.digest,
        subject.signer.as_deref(),
        &subject.requested,
    );
    match &verdict {
        Verdict::Approved(a) | Verdict::Kept(a) => {
            tracing::info!(tick = %subject.name, digest = %subject.digest, approved_at = %a.approved_at, "requested grants approved");
            return Ok(());
        }
        Verdict::Again { .. } | Verdict::New => {}
    }
    let approver = match asking {
        Asking::Decided(_) => return Ok(()),
        Asking::Nobody(why) => return Err(refusal(subject, &verdict, why)),
        Asking::Person(a) => a,
    };
    match approver.ask(subject, &verdict) {
        Err(Unanswered::Nobody(why)) => Err(refusal(subject, &verdict, &why)),
        Err(Unanswered::Failed(why)) => Err(AppError::Prompt(why)),
        Err(Unanswered::Interrupted) => Err(AppError::Interrupted),
        Ok(Answer::No) => {
            approver.kept(None);
            Err(AppError::NotApproved(format!(
                "{} was not approved; nothing was started or stored",
                subject.name
            )))
        }
        Ok(Answer::Yes { updates }) => {
            TrustStore::approve(dir, approval(subject, updates)).map_err(AppError::usage)?;
            approver.kept(Some(dir));
            Ok(())
        }
    }
}

fn refusal(subject: &Subject, verdict: &Verdict, why: &str) -> AppError {
    let what = match verdict {
        Verdict::Again { earlier, more } if more.is_empty() => format!(
            "changed since it was approved on {} ({} is now {}), and that approval was not kept for updates",
            earlier.approved_at, earlier.digest, subject.digest
        ),
        Verdict::Again { earlier, more } => format!(
            "({}) asks for more than was approved on {} for {}: {}",
            subject.digest,
            earlier.approved_at,
            earlier.digest,
            more.join(", ")
        ),
        _ => format!(
            "({}, {}) asks for grants nobody approved: {}",
            subject.digest,
            subject.signer.as_deref().unwrap_or("unsigned"),
            request_lines(&subject.requested).join(", ")
        ),
    };
    AppError::NotApproved(format!(
        "{} {what}; not started: {why}; approve it with `tickbox trust {}`",
        subject.name,
        subject.approve_as.as_deref().unwrap_or(&subject.name)
    ))
}

/// The guest directories a request names that the grants do not map
/// (the Tick sees nothing there until the person maps one).
pub fn unmapped_dirs(requested: &GrantSpec, granted_guests: &[String]) -> Vec<String> {
    requested
        .dir
        .iter()
        .map(|d| requested_guest(d))
        .filter(|g| !granted_guests.iter().any(|have| have == g))
        .map(str::to_string)
        .collect()
}

/// Removes the approvals `target` names from the trust store at `dir`
/// (`tickbox trust revoke`): a content digest (`sha256:…`); a registry
/// reference, whose approvals are kept under its canonical name (registry
/// and repository), so any spelling of it, with any tag or digest,
/// revokes them; or a Tick's path, whose approvals are kept under its
/// absolute path with links resolved (as a start names it), or the path
/// as given once the file is gone. Returns what was removed (empty when
/// nothing matched).
pub fn revoke(dir: &Path, target: &str) -> Result<Vec<Approval>, AppError> {
    match target.parse::<WasmDigest>() {
        Ok(digest) => TrustStore::revoke(dir, |a| a.digest == digest),
        Err(_) if tickbox_registry::is_reference(target) => {
            let name = crate::registry::parse(target)?.name().to_string();
            TrustStore::revoke(dir, |a| a.name == name)
        }
        Err(_) => {
            let path = Path::new(target);
            let name = std::fs::canonicalize(path)
                .or_else(|_| std::path::absolute(path))
                .map_err(|e| AppError::Usage(format!("{}: {e}", path.display())))?
                .display()
                .to_string();
            TrustStore::revoke(dir, |a| a.name == name)
        }
    }
    .map_err(AppError::usage)
}

/// The trust store's directory from the settings.
pub fn trust_dir(settings: &crate::Settings) -> Result<PathBuf, AppError> {
    settings.trust_dir.clone().ok_or(AppError::NoTrustStore)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unmapped_guest_dirs_are_named() {
        let requested = GrantSpec {
            dir: vec!["/data:ro".into(), "/out".into()],
            ..GrantSpec::default()
        };
        let unmapped = unmapped_dirs(&requested, &["/data".to_string()]);
        assert_eq!(unmapped, vec!["/out".to_string()]);
    }
}
