//! Consent bound to content: what a wasm Tick's manifest asks for is
//! granted only under an approval of its exact bytes, kept in a private
//! trust store; a Tick whose manifest nobody approved is not started, with
//! one line naming `tickbox trust`. A person is asked only through the
//! caller's [`Approver`] (here the test's own, answering yes, no, for
//! updates, or that nobody can answer); with [`Asking::Nobody`] (`tickbox
//! mcp`, `tickbox test`) nobody is. Every test has its own trust store.

use crate::{call, read, settings, Said};
use serde_json::{json, Value};
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use tickbox_app::consent::{approval, subject_of};
use tickbox_app::{
    Answer, App, AppError, Approver, Asking, Backend, Notice, Request, Subject, Target, Unanswered,
};
use tickbox_sandbox::consent::{Approval, TrustStore, Verdict};
use tickbox_test_support::{asker_in, build_wasm, hostile, hostile_p1, sha256_of, TempDir};

/// Why nobody is asked, for the requests that ask nobody.
const NOBODY: &str = "nobody can answer in this test";

/// A Tick (the hostile guest: its `env` tool reads a variable) copied
/// beside its manifest, with a private trust store and an App that keeps
/// its approvals there.
struct Asker {
    dir: TempDir,
    wasm: PathBuf,
    trust: PathBuf,
    app: App,
    said: Arc<Said>,
}

impl Asker {
    fn new(tag: &str, manifest: &str) -> Asker {
        let dir = TempDir::new(tag);
        let wasm = asker_in(&dir, manifest);
        let trust = dir.path("trust");
        let said = Arc::new(Said::default());
        let app = App::with_notices(settings(Some(trust.clone())), said.clone());
        Asker {
            dir,
            wasm,
            trust,
            app,
            said,
        }
    }

    fn manifest(&self, text: &str) {
        std::fs::write(self.dir.path("asker.tick.toml"), text).unwrap();
    }

    /// A request to start it, approved by whoever `asking` names.
    fn request(&self, asking: Asking) -> Request {
        let mut r = Request::new(Target::File(self.wasm.clone()));
        r.asking = asking;
        r
    }

    /// Starts it with nobody to ask and calls `env {"name": NAME}`: the
    /// variable's value, or why it did not start.
    async fn env_call(&self, name: &str) -> Result<Value, AppError> {
        self.env_call_asking(name, Asking::Nobody(NOBODY)).await
    }

    async fn env_call_asking(&self, name: &str, asking: Asking) -> Result<Value, AppError> {
        let tick = self.app.open(&self.request(asking)).await?;
        let (code, out) = crate::call_in(&tick, "env", json!({ "name": name })).await;
        tick.close().await;
        assert_eq!(code, 0, "{out}");
        let v: Value = serde_json::from_str(&out).unwrap();
        Ok(v["value"].clone())
    }

    /// What `tickbox trust PATH [--updates]` does: the subject of the
    /// file's manifest, its approval recorded in the store.
    fn approve(&self, updates: bool) -> Approval {
        let subject = subject_of(&self.wasm, None)
            .unwrap()
            .expect("asks for something");
        let record = approval(&subject, updates);
        TrustStore::approve(&self.trust, record.clone()).unwrap();
        record
    }

    /// What `tickbox trust ls` lists.
    fn approvals(&self) -> Vec<Approval> {
        TrustStore::open(&self.trust).unwrap().approvals().to_vec()
    }

    /// Replaces the Tick's bytes with another build of the same guest
    /// (preview 1): new content at the same path.
    fn swap_bytes(&self) {
        std::fs::copy(hostile_p1(), &self.wasm).unwrap();
    }
}

/// Asserts a refusal: not approved, a usage error (exit 2 in the CLI),
/// one line naming the approving command; and returns the line.
fn refused(outcome: Result<Value, AppError>, needle: &str) -> String {
    let e = match outcome {
        Err(e @ AppError::NotApproved(_)) => e,
        other => panic!("not refused: {other:?}"),
    };
    assert!(e.is_usage(), "{e}");
    let line = e.to_string();
    assert!(line.contains(needle), "{needle} in: {line}");
    assert!(line.contains("tickbox trust "), "{line}");
    assert!(!line.contains('\n'), "one line: {line}");
    line
}

/// What an [`Approver`] was asked: the subject's name, digest, signer and
/// requested variables, and what the store knew (`new`, or `again` with
/// what more it asks for).
#[derive(Clone, Debug, PartialEq)]
struct Asked {
    name: String,
    digest: String,
    signer: Option<String>,
    env: Vec<String>,
    verdict: String,
}

/// An approver of the test's own: gives one answer, or says that nobody
/// can answer, and remembers what it was asked and told.
struct Person {
    answer: Result<Answer, Unanswered>,
    asked: Mutex<Vec<Asked>>,
    kept: Mutex<Vec<Option<PathBuf>>>,
}

impl Person {
    fn answering(answer: Result<Answer, Unanswered>) -> Arc<Person> {
        Arc::new(Person {
            answer,
            asked: Mutex::new(Vec::new()),
            kept: Mutex::new(Vec::new()),
        })
    }

    fn asking(self: &Arc<Person>) -> Asking {
        Asking::Person(self.clone())
    }

    fn asked(&self) -> Vec<Asked> {
        self.asked.lock().unwrap().clone()
    }

    fn kept(&self) -> Vec<Option<PathBuf>> {
        self.kept.lock().unwrap().clone()
    }
}

impl Approver for Person {
    fn ask(&self, subject: &Subject, verdict: &Verdict) -> Result<Answer, Unanswered> {
        let verdict = match verdict {
            Verdict::New => "new".to_string(),
            Verdict::Again { more, .. } => format!("again, more: {more:?}"),
            v => format!("{v:?}"),
        };
        self.asked.lock().unwrap().push(Asked {
            name: subject.name.clone(),
            digest: subject.digest.to_string(),
            signer: subject.signer.clone(),
            env: subject.requested.env.clone(),
            verdict,
        });
        self.answer.clone()
    }

    fn kept(&self, approved_in: Option<&Path>) {
        self.kept
            .lock()
            .unwrap()
            .push(approved_in.map(Path::to_path_buf));
    }
}

#[tokio::test]
async fn an_approved_manifest_is_granted_and_new_bytes_at_the_path_are_asked_again() {
    let a = Asker::new("consent-grant", "env = [\"CONSENT_GREETING=granted\"]\n");
    // Nobody can answer here: refused, nothing stored.
    refused(
        a.env_call("CONSENT_GREETING").await,
        "asks for grants nobody approved",
    );
    assert!(!a.trust.exists() || a.approvals().is_empty());
    // The person approves (`tickbox trust PATH`); the grant is then in force.
    let record = a.approve(false);
    let digest = sha256_of(&a.wasm);
    assert_eq!(record.digest.to_string(), digest);
    assert_eq!(
        a.env_call("CONSENT_GREETING").await.unwrap(),
        json!("granted")
    );
    let list = a.approvals();
    assert_eq!(list.len(), 1);
    let canonical = std::fs::canonicalize(&a.wasm).unwrap();
    assert_eq!(list[0].name, canonical.to_str().unwrap());
    assert_eq!(list[0].digest.to_string(), digest);
    assert_eq!(list[0].signer, None);
    assert!(!list[0].updates);
    assert_eq!(list[0].requested.env, ["CONSENT_GREETING=granted"]);
    // Other bytes at the same path: the approval was for the old content.
    a.swap_bytes();
    refused(a.env_call("CONSENT_GREETING").await, "not kept for updates");
}

#[tokio::test]
async fn updates_keep_an_approval_only_where_the_person_said_so_and_never_for_more() {
    let manifest = "env = [\"CONSENT_GREETING=granted\"]\n";
    // Approved for updates: new content asking for no more keeps it.
    let kept = Asker::new("consent-updates", manifest);
    kept.approve(true);
    kept.swap_bytes();
    assert_eq!(
        kept.env_call("CONSENT_GREETING").await.unwrap(),
        json!("granted")
    );
    // Asking for more: refused, the line names the difference only.
    kept.manifest("env = [\"CONSENT_GREETING=granted\", \"HOME\"]\n");
    let line = refused(
        kept.env_call("HOME").await,
        "asks for more than was approved",
    );
    assert!(line.contains(": env HOME;"), "{line}");
    assert!(
        !line.contains("CONSENT_GREETING"),
        "only the difference: {line}"
    );
    // Approving the new request makes it work (positive control).
    kept.approve(false);
    assert!(kept.env_call("HOME").await.unwrap().is_string());
    // Approved without updates: new content is asked about again.
    let once = Asker::new("consent-once", manifest);
    once.approve(false);
    once.env_call("CONSENT_GREETING").await.unwrap();
    once.swap_bytes();
    refused(
        once.env_call("CONSENT_GREETING").await,
        "not kept for updates",
    );
}

/// `tickbox trust revoke DIGEST|PATH`: the approvals of that content, or
/// kept under that path, are removed and the grant with them; revoking
/// what is gone removes nothing (the CLI's "no approval matches").
#[tokio::test]
async fn revoking_by_digest_or_path_takes_the_grant_away() {
    let a = Asker::new("consent-revoke", "env = [\"CONSENT_GREETING=granted\"]\n");
    let digest = sha256_of(&a.wasm);
    a.approve(false);
    a.env_call("CONSENT_GREETING").await.unwrap();
    let gone = tickbox_app::consent::revoke(&a.trust, &digest).unwrap();
    assert_eq!(gone.len(), 1);
    assert_eq!(gone[0].digest.to_string(), digest);
    refused(a.env_call("CONSENT_GREETING").await, "nobody approved");
    a.approve(false);
    a.env_call("CONSENT_GREETING").await.unwrap();
    // By path as given (relative, through a link): its canonical name.
    let link = a.dir.path("link.wasm");
    std::os::unix::fs::symlink(&a.wasm, &link).unwrap();
    let gone = tickbox_app::consent::revoke(&a.trust, link.to_str().unwrap()).unwrap();
    assert_eq!(gone.len(), 1, "{gone:?}");
    refused(a.env_call("CONSENT_GREETING").await, "nobody approved");
    assert!(tickbox_app::consent::revoke(&a.trust, &digest)
        .unwrap()
        .is_empty());
}

#[tokio::test]
async fn a_trust_store_others_can_write_or_a_symlink_is_refused() {
    let a = Asker::new("consent-store", "env = [\"CONSENT_GREETING=granted\"]\n");
    a.approve(false);
    a.env_call("CONSENT_GREETING")
        .await
        .expect("positive control");
    let mode = |m| std::fs::set_permissions(&a.trust, std::fs::Permissions::from_mode(m));
    let not_private = |outcome: Result<Value, AppError>| {
        let e = outcome.expect_err("refused");
        assert!(e.is_usage(), "{e}");
        let line = e.to_string();
        assert!(line.contains("group or others can write to it"), "{line}");
        assert!(!line.contains('\n'), "one line: {line}");
    };
    mode(0o770).unwrap();
    not_private(a.env_call("CONSENT_GREETING").await);
    // `tickbox trust ls` neither.
    let Err(e) = TrustStore::open(&a.trust) else {
        panic!("a store others can write is opened");
    };
    assert!(
        e.to_string().contains("group or others can write to it"),
        "{e}"
    );
    mode(0o700).unwrap();
    let file = a.trust.join("approvals.json");
    std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o666)).unwrap();
    not_private(a.env_call("CONSENT_GREETING").await);
    std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o600)).unwrap();
    a.env_call("CONSENT_GREETING").await.unwrap();
    // A store reached through a symlink.
    let link = a.dir.path("trust-link");
    std::os::unix::fs::symlink(&a.trust, &link).unwrap();
    let through_link = App::new(settings(Some(link)));
    let e = through_link
        .open(&a.request(Asking::Nobody(NOBODY)))
        .await
        .err()
        .expect("refused");
    assert!(e.to_string().contains("symlink"), "{e}");
}

#[tokio::test]
async fn a_tick_without_a_manifest_runs_as_before_and_never_touches_the_store() {
    let dir = TempDir::new("consent-none");
    let wasm = dir.path("plain.wasm");
    std::fs::copy(hostile(), &wasm).unwrap();
    // A store that would be refused: never read for a Tick asking nothing.
    let trust = dir.path("trust");
    std::fs::create_dir(&trust).unwrap();
    std::fs::set_permissions(&trust, std::fs::Permissions::from_mode(0o777)).unwrap();
    let app = App::new(settings(Some(trust.clone())));
    let person = Person::answering(Ok(Answer::Yes { updates: false }));
    let mut request = Request::new(Target::File(wasm.clone()));
    request.asking = person.asking();
    let (code, out) = call(&app, &request, "echo", json!({"x": 1})).await;
    assert_eq!(code, 0, "{out}");
    assert_eq!(std::fs::read_dir(&trust).unwrap().count(), 0);
    assert!(person.asked().is_empty());
    // The same Tick with a manifest does read it, and refuses it.
    std::fs::write(dir.path("plain.tick.toml"), "env = [\"A=b\"]\n").unwrap();
    let (code, out) = read(&app, &request).await;
    assert_eq!(code, 2, "{out}");
    assert!(out.contains("trust store"), "{out}");
    assert!(person.asked().is_empty(), "refused before anyone is asked");
}

#[tokio::test]
async fn a_requested_dir_is_granted_only_where_the_person_maps_it() {
    let a = Asker::new("consent-dir", "dir = [\"/data:ro\"]\n");
    a.approve(false);
    let host = a.dir.path("hostdata");
    std::fs::create_dir(&host).unwrap();
    std::fs::write(host.join("hello.txt"), "mapped by the person").unwrap();
    let read_hello = json!({"path": "/data/hello.txt"});
    let unmapped = Notice::UnmappedDir {
        guest: "/data".into(),
    };
    let request = a.request(Asking::Nobody(NOBODY));
    let (code, out) = call(&a.app, &request, "read_file", read_hello.clone()).await;
    assert_eq!(code, 0, "{out}");
    assert_eq!(a.said.take(), std::slice::from_ref(&unmapped));
    let v: Value = serde_json::from_str(&out).unwrap();
    assert!(v["value"].is_null(), "{out}");
    let mut mapped = request.clone();
    mapped.grants.dir = vec![format!("{}::/data:ro", host.display())];
    let (code, out) = call(&a.app, &mapped, "read_file", read_hello.clone()).await;
    assert_eq!(code, 0, "{out}");
    let v: Value = serde_json::from_str(&out).unwrap();
    assert_eq!(v["value"], "mapped by the person");
    assert!(!a.said.take().contains(&unmapped));
    // And no grant may reach the trust store itself, or a Tick could
    // approve itself.
    let mut store = request.clone();
    store.grants.dir = vec![format!("{}::/data", a.trust.display())];
    let (code, out) = call(&a.app, &store, "read_file", read_hello).await;
    assert_eq!(code, 3, "{out}");
    assert!(out.contains("tickbox's own state"), "{out}");
}

/// Asked of nobody (`tickbox mcp`, `tickbox test`), an unapproved
/// manifest is refused with the caller's reason; once approved, the same
/// request starts.
#[tokio::test]
async fn nobody_asked_refuses_an_unapproved_manifest_with_the_callers_reason() {
    let a = Asker::new("consent-nobody", "env = [\"CONSENT_GREETING=granted\"]\n");
    let why = "tickbox mcp never asks: an MCP client cannot approve grants";
    refused(
        a.env_call_asking("CONSENT_GREETING", Asking::Nobody(why))
            .await,
        why,
    );
    a.approve(false);
    assert_eq!(
        a.env_call_asking("CONSENT_GREETING", Asking::Nobody(why))
            .await
            .unwrap(),
        json!("granted")
    );
}

/// The person is asked about this content (its name, digest, signer and
/// requests), before anything of the Tick runs. `no` starts nothing and
/// stores nothing; `yes` stores the approval (not for updates) and the
/// grant is in force; approved once, the next start asks nothing.
#[tokio::test]
async fn a_person_is_asked_once_and_no_stores_nothing() {
    let a = Asker::new("consent-ask", "env = [\"CONSENT_GREETING=granted\"]\n");
    let canonical = std::fs::canonicalize(&a.wasm).unwrap();
    let asked = Asked {
        name: canonical.display().to_string(),
        digest: sha256_of(&a.wasm),
        signer: None,
        env: vec!["CONSENT_GREETING=granted".to_string()],
        verdict: "new".to_string(),
    };
    let no = Person::answering(Ok(Answer::No));
    let e = a
        .env_call_asking("CONSENT_GREETING", no.asking())
        .await
        .expect_err("not approved");
    assert!(matches!(e, AppError::NotApproved(_)), "{e:?}");
    assert!(
        e.to_string().contains("nothing was started or stored"),
        "{e}"
    );
    assert_eq!(no.asked(), std::slice::from_ref(&asked));
    assert_eq!(no.kept(), [None]);
    assert!(!a.trust.exists() || a.approvals().is_empty());
    // Yes: approved, stored, and the grant in force.
    let yes = Person::answering(Ok(Answer::Yes { updates: false }));
    let value = a.env_call_asking("CONSENT_GREETING", yes.asking()).await;
    assert_eq!(value.unwrap(), json!("granted"));
    assert_eq!(yes.asked(), [asked]);
    assert_eq!(yes.kept(), [Some(a.trust.clone())]);
    let list = a.approvals();
    assert_eq!(list.len(), 1);
    assert!(!list[0].updates);
    // Approved once: the next start asks nothing.
    let again = Person::answering(Ok(Answer::No));
    let value = a.env_call_asking("CONSENT_GREETING", again.asking()).await;
    assert_eq!(value.unwrap(), json!("granted"));
    assert!(again.asked().is_empty());
}

/// `u`: approved for later content asking for no more, which is then
/// not asked about; content asked about again is asked with what the
/// store knows (approved before, not kept for updates).
#[tokio::test]
async fn yes_for_updates_keeps_the_approval_for_new_content() {
    let manifest = "env = [\"CONSENT_GREETING=granted\"]\n";
    let a = Asker::new("consent-ask-updates", manifest);
    let u = Person::answering(Ok(Answer::Yes { updates: true }));
    a.env_call_asking("CONSENT_GREETING", u.asking())
        .await
        .unwrap();
    assert!(a.approvals()[0].updates);
    a.swap_bytes();
    let later = Person::answering(Ok(Answer::No));
    let value = a.env_call_asking("CONSENT_GREETING", later.asking()).await;
    assert_eq!(value.unwrap(), json!("granted"));
    assert!(later.asked().is_empty());
    // Positive control: approved once (not for updates), new bytes are
    // asked about, and the person is told what changed.
    let b = Asker::new("consent-ask-once", manifest);
    let y = Person::answering(Ok(Answer::Yes { updates: false }));
    b.env_call_asking("CONSENT_GREETING", y.asking())
        .await
        .unwrap();
    b.swap_bytes();
    let asked = Person::answering(Ok(Answer::No));
    b.env_call_asking("CONSENT_GREETING", asked.asking())
        .await
        .expect_err("not approved");
    let verdicts: Vec<String> = asked.asked().into_iter().map(|a| a.verdict).collect();
    assert_eq!(verdicts, ["again, more: []"]);
}

/// Where the approver says nobody can answer (no terminal), the start is
/// refused with its reason and the approving command; an interrupted or
/// failed question is its own error. Nothing is stored in any case.
#[tokio::test]
async fn an_approver_without_an_answer_starts_and_stores_nothing() {
    let a = Asker::new(
        "consent-unanswered",
        "env = [\"CONSENT_GREETING=granted\"]\n",
    );
    let why = "no one can answer: stdin is not a terminal";
    let nobody = Person::answering(Err(Unanswered::Nobody(why.into())));
    let line = refused(
        a.env_call_asking("CONSENT_GREETING", nobody.asking()).await,
        "asks for grants nobody approved",
    );
    assert!(line.contains(why), "{line}");
    assert_eq!(nobody.asked().len(), 1);
    let interrupted = Person::answering(Err(Unanswered::Interrupted));
    let e = a
        .env_call_asking("CONSENT_GREETING", interrupted.asking())
        .await
        .expect_err("interrupted");
    assert!(matches!(e, AppError::Interrupted), "{e:?}");
    assert!(!e.is_usage());
    let failed = Person::answering(Err(Unanswered::Failed("the terminal went away".into())));
    let e = a
        .env_call_asking("CONSENT_GREETING", failed.asking())
        .await
        .expect_err("failed");
    assert!(matches!(e, AppError::Prompt(_)), "{e:?}");
    assert!(e.to_string().contains("the terminal went away"), "{e}");
    for p in [&nobody, &interrupted, &failed] {
        assert!(p.kept().is_empty());
    }
    assert!(!a.trust.exists() || a.approvals().is_empty());
}

/// A manifest is read by whoever reads files (this layer; the sandbox
/// takes grants as values): a malformed one is a usage error that names
/// it, found before anything starts, and a well-formed one, once
/// approved, is what the opened Tick says it requested (`tickbox info`).
#[tokio::test]
async fn a_malformed_manifest_is_its_own_error() {
    let dir = TempDir::new("launch-manifest");
    let path = dir.path("counter.wasm");
    std::fs::copy(build_wasm("examples", "counter", "wasm32-wasip2"), &path).expect("copy");
    std::fs::write(dir.path("counter.tick.toml"), "dir = [\"/data\"]\n").expect("write");
    let trust = dir.path("trust");
    let subject = subject_of(&path, None).unwrap().expect("asks for a dir");
    TrustStore::approve(&trust, approval(&subject, false)).unwrap();
    let app = App::new(settings(Some(trust)));
    let mut request = Request::new(Target::File(path.clone()));
    request.asking = Asking::Nobody(NOBODY);
    let tick = app.open(&request).await.expect("approved");
    match &tick.backend {
        Backend::Wasm { requested, .. } => {
            let requested = requested.as_deref().expect("a manifest");
            assert_eq!(requested.dir, ["/data"]);
        }
        Backend::Native { .. } => panic!("a wasm Tick"),
    }
    tick.close().await;
    std::fs::write(dir.path("counter.tick.toml"), "dir = 7\n").expect("write");
    let e = app.open(&request).await.err().expect("malformed");
    assert!(
        matches!(e, AppError::Grant(_) | AppError::Usage(_)),
        "{e:?}"
    );
    assert!(e.is_usage(), "{e}");
    assert!(e.to_string().contains("counter.tick.toml"), "{e}");
    // `tickbox trust` neither takes it.
    let e = subject_of(&path, None).err().expect("malformed");
    assert!(e.to_string().contains("counter.tick.toml"), "{e}");
}
