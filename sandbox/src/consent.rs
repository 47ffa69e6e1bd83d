//! Consent bound to content: what a person approved a Tick to ask for,
//! kept by the digest of the exact bytes they approved.
//!
//! A wasm Tick may ship a manifest (`NAME.tick.toml`, a [`GrantSpec`])
//! saying which grants it asks for. Those grants are given only under an
//! [`Approval`]: a record of one person's decision about one content
//! ([`WasmDigest`], and the signer that vouched for it, if any), holding
//! exactly what was asked when they decided. The CLI reads manifests,
//! asks the person and pins the start to the digest it decided on
//! ([`crate::Launcher::pinned`]); this module keeps the decisions and
//! judges a new request against them ([`TrustStore::verdict`]):
//!
//! - the same content (digest and signer) asking for no more than was
//!   approved: [`Verdict::Approved`];
//! - new content under the same name, asking for no more, where the person
//!   said to keep the approval for updates: [`Verdict::Kept`]; without
//!   that, or asking for more ([`more_than`] names the difference):
//!   [`Verdict::Again`]; never seen: [`Verdict::New`].
//!
//! **Directory requests name guest paths only** ([`check_manifest`]): the
//! host directory behind one always comes from the person (their own `dir`
//! grant `HOST::GUEST`), so a manifest cannot point a Tick at a host path. A
//! manifest's `http_ca` (a host file to trust) is refused for the same
//! reason.
//!
//! **The store trusts nothing it does not own**, with the compile cache's
//! rules ([`crate::cache`]): a real directory (not a symlink), owned by the
//! user and writable by nobody else, created 0700; one file
//! ([`STORE_FILE`], 0600, read with `O_NOFOLLOW`, refused if it is not the
//! user's or group or others may write it, at most
//! [`MAX_TRUST_STORE_BYTES`]); written to a fresh temporary file
//! (`O_CREAT|O_EXCL|O_NOFOLLOW`) renamed into place under an exclusive
//! lock on the directory, so two writers never lose each other's record.
//! Every operation is relative to the directory opened once. A store that
//! fails a check is refused with one line ([`TrustError::NotPrivate`] for
//! the rule of `tickbox_trust::private_dir`, [`TrustError::Unsafe`] for a
//! file that is a symlink or not a regular file): unlike
//! the cache, it cannot be skipped, because its records grant.
//!
//! The trust store is tickbox's own state: no grant may overlap it (the
//! default directory is in the sandbox's list; another one is given as
//! [`crate::EngineOptions::own_state`]), or a Tick granted it could approve
//! itself.

use crate::grants::{dir_host, parse_size, GrantSpec};
pub use crate::limits::MAX_TRUST_STORE_BYTES;
use crate::WasmDigest;
use serde::{Deserialize, Serialize};
use std::ffi::CString;
use std::fs::File;
use std::io::{Read, Write};
use std::os::fd::{AsRawFd, FromRawFd};
use std::path::{Path, PathBuf};
use tickbox_trust::private_dir::{self, OpenError};
use tickbox_trust::NotPrivate;

/// The approvals file's name inside the trust directory.
pub const STORE_FILE: &str = "approvals.json";
/// The version written in the file; another one is refused, not guessed.
pub const STORE_VERSION: u32 = 1;
const TMP_PREFIX: &str = ".tmp-";

/// Why the trust store cannot be used.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum TrustError {
    /// The directory breaks the private-directory rule, or the file its
    /// owner and mode part: someone else could write records that grant
    /// anything.
    #[error("trust store {} refused: {rule}", path.display())]
    NotPrivate { path: PathBuf, rule: NotPrivate },
    /// The file is a symlink or not a regular file.
    #[error("trust store {} refused: {why}", path.display())]
    Unsafe { path: PathBuf, why: String },
    /// The file is not an approvals file of this version, or too large.
    #[error("trust store {} refused: {why}", path.display())]
    Malformed { path: PathBuf, why: String },
    /// The approvals would no longer fit the bound the store is read
    /// with: nothing was written, so the store stays readable.
    #[error(
        "trust store {}: the approvals would take {bytes} bytes, over MAX_TRUST_STORE_BYTES ({MAX_TRUST_STORE_BYTES}); nothing was written (`tickbox trust revoke` removes approvals)",
        path.display()
    )]
    Full { path: PathBuf, bytes: u64 },
    /// Reading or writing failed.
    #[error("trust store {}: {source}", path.display())]
    Io {
        path: PathBuf,
        source: std::io::Error,
    },
}

/// Why a manifest cannot be honoured as written.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ManifestError {
    /// A `dir` request names a host path (`HOST::GUEST`): a Tick asks for
    /// a guest path; the person picks the host directory.
    #[error("dir {spec}: a manifest names guest paths only (GUEST[:ro|:rw]); the host directory comes from the person, in a dir grant HOST::GUEST")]
    HostDir { spec: String },
    /// An `http_ca` request: a host file to trust is the person's choice.
    #[error(
        "http_ca {spec}: a manifest cannot name a host file; the person gives a CA in their own http_ca grant"
    )]
    HostCa { spec: String },
}

/// One person's decision about one content.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Approval {
    /// What the Tick is called: the absolute path of a local file (a
    /// registry reference for a pulled one). Updates are matched by it.
    pub name: String,
    /// The content approved.
    pub digest: WasmDigest,
    /// Who vouched for the content (`None`: unsigned).
    pub signer: Option<String>,
    /// Exactly what the manifest asked for when the person decided.
    pub requested: GrantSpec,
    /// When (RFC 3339, UTC).
    pub approved_at: String,
    /// Whether later content under the same name (and signer) asking for
    /// no more keeps this approval.
    pub updates: bool,
}

/// What the store says about a Tick asking for grants.
#[derive(Debug, Clone, PartialEq)]
pub enum Verdict {
    /// This content was approved for at least what it asks.
    Approved(Approval),
    /// New content under a name whose latest approval was kept for
    /// updates, asking for no more.
    Kept(Approval),
    /// Approved before (this content, or earlier content under this name)
    /// but that approval does not cover this: `more` is what it asks
    /// beyond it (empty: the same requests, but new content and the person
    /// did not keep the approval for updates).
    Again {
        earlier: Approval,
        more: Vec<String>,
    },
    /// Never approved.
    New,
}

/// The file's shape.
#[derive(Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct StoreFile {
    version: u32,
    approvals: Vec<Approval>,
}

/// Where approvals are kept by default, following the XDG base
/// directories ([`tickbox_host::places`]): `$XDG_CONFIG_HOME/tickbox/trust`, else
/// `~/.config/tickbox/trust` (the CLI lets `$TICKBOX_TRUST_DIR` override it).
pub fn default_dir() -> Option<PathBuf> {
    Some(
        tickbox_host::places::config_home()?
            .join("tickbox")
            .join("trust"),
    )
}

/// Refuses what a manifest may not ask for (see the module docs).
pub fn check_manifest(spec: &GrantSpec) -> Result<(), ManifestError> {
    for d in &spec.dir {
        if d.contains("::") {
            return Err(ManifestError::HostDir { spec: d.clone() });
        }
    }
    if let Some(ca) = &spec.http_ca {
        return Err(ManifestError::HostCa { spec: ca.clone() });
    }
    Ok(())
}

/// The guest path a manifest's `dir` request names (its options aside).
pub fn requested_guest(spec: &str) -> &str {
    // Without `::` the path part is the guest path (check_manifest refused
    // the rest): `/data:ro` asks for `/data`.
    dir_host(spec)
}

/// Whether the request is for nothing at all (no grant and no bound): a
/// Tick asking for nothing needs no approval.
pub fn asks_nothing(spec: &GrantSpec) -> bool {
    spec.is_empty() && spec.http_ca.is_none() && !spec.has_bounds()
}

/// What `asked` requests beyond `approved`, one item per grant as the
/// grant key spells it (`env HOME`, `max_memory 1GiB (approved: 256MiB)`);
/// empty when `approved` covers it. A list entry is covered by the same
/// entry; a bound by an approved bound at least as large (the same text
/// when either does not parse).
pub fn more_than(approved: &GrantSpec, asked: &GrantSpec) -> Vec<String> {
    let mut more = Vec::new();
    for (key, asked, approved) in [
        ("dir", &asked.dir, &approved.dir),
        ("allow_net", &asked.allow_net, &approved.allow_net),
        ("allow_http", &asked.allow_http, &approved.allow_http),
        ("env", &asked.env, &approved.env),
    ] {
        for a in asked {
            if !approved.contains(a) {
                more.push(format!("{key} {a}"));
            }
        }
    }
    if let Some(ca) = &asked.http_ca {
        if approved.http_ca.as_ref() != Some(ca) {
            more.push(format!("http_ca {ca}"));
        }
    }
    let size = |s: &str| parse_size(s).map(|n| n as f64);
    let count = |s: &str| s.trim().parse::<f64>().ok().filter(|n| n.is_finite());
    type Parse = fn(&str) -> Option<f64>;
    let bounds: [(&str, &Option<String>, &Option<String>, Parse); 6] = [
        ("max_memory", &asked.max_memory, &approved.max_memory, size),
        (
            "max_handles",
            &asked.max_handles,
            &approved.max_handles,
            count,
        ),
        (
            "max_wasm_size",
            &asked.max_wasm_size,
            &approved.max_wasm_size,
            size,
        ),
        (
            "compile_timeout",
            &asked.compile_timeout,
            &approved.compile_timeout,
            count,
        ),
        (
            "compile_memory",
            &asked.compile_memory,
            &approved.compile_memory,
            size,
        ),
        ("max_write", &asked.max_write, &approved.max_write, size),
    ];
    for (key, asked, approved, parse) in bounds {
        let Some(a) = asked else { continue };
        let covered = match approved {
            None => false,
            Some(b) => match (parse(a), parse(b)) {
                (Some(x), Some(y)) => x <= y,
                _ => a == b,
            },
        };
        if !covered {
            let before = approved.as_deref().unwrap_or("the default");
            more.push(format!("{key} {a} (approved: {before})"));
        }
    }
    more
}

/// Each grant of a request as one line, the way [`more_than`] names them
/// (`env HOME`, `dir /data:ro`, `max_memory 512MiB`): what a person is
/// shown. The strings are the manifest's: escape them for the sink.
pub fn request_lines(spec: &GrantSpec) -> Vec<String> {
    more_than(&GrantSpec::default(), spec)
        .into_iter()
        .map(|line| match line.strip_suffix(" (approved: the default)") {
            Some(l) => l.to_string(),
            None => line,
        })
        .collect()
}

/// The digest of a file's content, read in pieces (any size).
pub fn digest_file(path: &Path) -> std::io::Result<WasmDigest> {
    use sha2::{Digest, Sha256};
    let mut f = File::open(path)?;
    let mut hasher = Sha256::new();
    let mut buf = vec![0u8; 64 * 1024];
    loop {
        let n = f.read(&mut buf)?;
        if n == 0 {
            break;
        }
        hasher.update(&buf[..n]);
    }
    Ok(WasmDigest::from_bytes(hasher.finalize().into()))
}

/// The approvals in a trust directory, read once.
#[derive(Debug, Clone)]
pub struct TrustStore {
    dir: PathBuf,
    approvals: Vec<Approval>,
}

impl TrustStore {
    /// Reads the store in `dir`. A missing directory or file is an empty
    /// store (nothing is created until an approval is written); one that
    /// fails a trust check is refused.
    pub fn open(dir: &Path) -> Result<TrustStore, TrustError> {
        let approvals = match open_dir(dir, false)? {
            None => Vec::new(),
            Some(handle) => read_approvals(dir, &handle)?,
        };
        Ok(TrustStore {
            dir: dir.to_path_buf(),
            approvals,
        })
    }

    /// The directory.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// Every approval, oldest first.
    pub fn approvals(&self) -> &[Approval] {
        &self.approvals
    }

    /// What the store says about `name` with content `digest` (vouched for
    /// by `signer`) asking for `asked`; see [`Verdict`].
    pub fn verdict(
        &self,
        name: &str,
        digest: &WasmDigest,
        signer: Option<&str>,
        asked: &GrantSpec,
    ) -> Verdict {
        let signed = |a: &&Approval| a.signer.as_deref() == signer;
        // This very content: the latest decision about it.
        if let Some(a) = self
            .approvals
            .iter()
            .filter(signed)
            .rfind(|a| a.digest == *digest)
        {
            let more = more_than(&a.requested, asked);
            return if more.is_empty() {
                Verdict::Approved(a.clone())
            } else {
                Verdict::Again {
                    earlier: a.clone(),
                    more,
                }
            };
        }
        // Other content under the same name: the latest decision governs
        // whether updates keep it.
        match self
            .approvals
            .iter()
            .filter(signed)
            .rfind(|a| a.name == name)
        {
            Some(a) => {
                let more = more_than(&a.requested, asked);
                if a.updates && more.is_empty() {
                    Verdict::Kept(a.clone())
                } else {
                    Verdict::Again {
                        earlier: a.clone(),
                        more,
                    }
                }
            }
            None => Verdict::New,
        }
    }

    /// Records `approval` (replacing an earlier one for the same content
    /// and signer), creating the store if needed.
    pub fn approve(dir: &Path, approval: Approval) -> Result<(), TrustError> {
        Self::update(dir, |list| {
            list.retain(|a| !(a.digest == approval.digest && a.signer == approval.signer));
            list.push(approval);
            Vec::new()
        })
        .map(drop)
    }

    /// Removes the approvals `revoked` picks; returns them.
    pub fn revoke(
        dir: &Path,
        revoked: impl Fn(&Approval) -> bool,
    ) -> Result<Vec<Approval>, TrustError> {
        if open_dir(dir, false)?.is_none() {
            return Ok(Vec::new());
        }
        Self::update(dir, |list| {
            let (gone, kept) = std::mem::take(list).into_iter().partition(&revoked);
            *list = kept;
            gone
        })
    }

    /// Read, change and write the store under the directory's lock.
    fn update(
        dir: &Path,
        change: impl FnOnce(&mut Vec<Approval>) -> Vec<Approval>,
    ) -> Result<Vec<Approval>, TrustError> {
        let io = |source| TrustError::Io {
            path: dir.to_path_buf(),
            source,
        };
        let handle = open_dir(dir, true)?.ok_or_else(|| {
            io(std::io::Error::new(
                std::io::ErrorKind::NotFound,
                "not created",
            ))
        })?;
        // SAFETY: flock on a directory fd we hold; released when it closes.
        if unsafe { libc::flock(handle.as_raw_fd(), libc::LOCK_EX) } != 0 {
            return Err(io(std::io::Error::last_os_error()));
        }
        let mut list = read_approvals(dir, &handle)?;
        let out = change(&mut list);
        let text = serde_json::to_vec_pretty(&StoreFile {
            version: STORE_VERSION,
            approvals: list,
        })
        .map_err(|e| io(std::io::Error::other(e)))?;
        // Written only where it will be read back: a store past the bound
        // would refuse every later read, revoking included.
        if text.len() as u64 > MAX_TRUST_STORE_BYTES {
            return Err(TrustError::Full {
                path: dir.to_path_buf(),
                bytes: text.len() as u64,
            });
        }
        let mut nonce = [0u8; 8];
        File::open("/dev/urandom")
            .and_then(|mut f| f.read_exact(&mut nonce))
            .map_err(io)?;
        let tmp = format!(
            "{TMP_PREFIX}{}",
            nonce.iter().map(|b| format!("{b:02x}")).collect::<String>()
        );
        let written = open_at(
            &handle,
            &tmp,
            libc::O_WRONLY | libc::O_CREAT | libc::O_EXCL,
            0o600,
        )
        .and_then(|mut f| {
            f.write_all(&text)?;
            f.sync_all()
        })
        .and_then(|()| rename_at(&handle, &tmp, STORE_FILE));
        if let Err(e) = written {
            let _ = unlink_at(&handle, &tmp);
            return Err(io(e));
        }
        Ok(out)
    }
}

/// Opens the trust directory without following a symlink and checks it by
/// the private-directory rule (`tickbox_trust::private_dir`); `None` when
/// it does not exist and `create` is false (created 0700 otherwise).
fn open_dir(dir: &Path, create: bool) -> Result<Option<File>, TrustError> {
    let io = |source| TrustError::Io {
        path: dir.to_path_buf(),
        source,
    };
    private_dir::open(dir, create).map_err(|e| match e {
        OpenError::NotPrivate(rule) => TrustError::NotPrivate {
            path: dir.to_path_buf(),
            rule,
        },
        OpenError::Io(e) => io(e),
        e => io(std::io::Error::other(e)),
    })
}

/// Reads the approvals file in the opened directory (none when missing).
fn read_approvals(dir: &Path, handle: &File) -> Result<Vec<Approval>, TrustError> {
    let path = dir.join(STORE_FILE);
    let io = |source| TrustError::Io {
        path: path.clone(),
        source,
    };
    let f = match open_at(handle, STORE_FILE, libc::O_RDONLY, 0) {
        Ok(f) => f,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) if e.raw_os_error() == Some(libc::ELOOP) => {
            return Err(TrustError::Unsafe {
                path,
                why: "it is a symlink".into(),
            })
        }
        Err(e) => return Err(io(e)),
    };
    // The opened file's own metadata: what was checked is what is read.
    let meta = f.metadata().map_err(io)?;
    if !meta.is_file() {
        return Err(TrustError::Unsafe {
            path,
            why: "it is not a regular file".into(),
        });
    }
    // The file is held to the directory's owner and mode rule.
    private_dir::check_owned(&meta).map_err(|rule| TrustError::NotPrivate {
        path: path.clone(),
        rule,
    })?;
    let mut text = Vec::new();
    f.take(MAX_TRUST_STORE_BYTES + 1)
        .read_to_end(&mut text)
        .map_err(io)?;
    if text.len() as u64 > MAX_TRUST_STORE_BYTES {
        return Err(TrustError::Malformed {
            path,
            why: format!("it is larger than {MAX_TRUST_STORE_BYTES} bytes"),
        });
    }
    let file: StoreFile = serde_json::from_slice(&text).map_err(|e| TrustError::Malformed {
        path: path.clone(),
        why: e.to_string(),
    })?;
    if file.version != STORE_VERSION {
        return Err(TrustError::Malformed {
            path,
            why: format!(
                "version {} is not {STORE_VERSION}, the one this tickbox reads",
                file.version
            ),
        });
    }
    Ok(file.approvals)
}

fn cname(name: &str) -> std::io::Result<CString> {
    CString::new(name).map_err(|_| std::io::Error::from(std::io::ErrorKind::InvalidInput))
}

/// `openat` relative to the directory, never following a symlink.
fn open_at(dir: &File, name: &str, flags: i32, mode: libc::mode_t) -> std::io::Result<File> {
    let c = cname(name)?;
    // SAFETY: openat on a directory fd we hold and a NUL-terminated name;
    // the returned fd is owned by the File alone.
    let fd = unsafe {
        libc::openat(
            dir.as_raw_fd(),
            c.as_ptr(),
            flags | libc::O_NOFOLLOW | libc::O_CLOEXEC,
            libc::c_uint::from(mode),
        )
    };
    if fd < 0 {
        return Err(std::io::Error::last_os_error());
    }
    // SAFETY: a fresh fd from openat.
    Ok(unsafe { File::from_raw_fd(fd) })
}

fn rename_at(dir: &File, from: &str, to: &str) -> std::io::Result<()> {
    let (f, t) = (cname(from)?, cname(to)?);
    // SAFETY: renameat within one directory fd we hold; names NUL-terminated.
    if unsafe { libc::renameat(dir.as_raw_fd(), f.as_ptr(), dir.as_raw_fd(), t.as_ptr()) } != 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(())
}

fn unlink_at(dir: &File, name: &str) -> std::io::Result<()> {
    let c = cname(name)?;
    // SAFETY: unlinkat on a directory fd we hold; name NUL-terminated.
    if unsafe { libc::unlinkat(dir.as_raw_fd(), c.as_ptr(), 0) } != 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::{MetadataExt, PermissionsExt};

    fn spec(toml_like: &[(&str, &str)]) -> GrantSpec {
        let mut s = GrantSpec::default();
        for (k, v) in toml_like {
            match *k {
                "dir" => s.dir.push(v.to_string()),
                "env" => s.env.push(v.to_string()),
                "allow_net" => s.allow_net.push(v.to_string()),
                "max_memory" => s.max_memory = Some(v.to_string()),
                _ => unreachable!(),
            }
        }
        s
    }

    fn temp(tag: &str) -> PathBuf {
        let d = std::env::temp_dir().join(format!("tickbox-consent-{tag}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        d
    }

    fn approval(name: &str, bytes: &[u8], requested: GrantSpec, updates: bool) -> Approval {
        Approval {
            name: name.into(),
            digest: WasmDigest::of(bytes),
            signer: None,
            requested,
            approved_at: "2026-12-02T00:00:00Z".into(),
            updates,
        }
    }

    #[test]
    fn an_approval_that_would_overfill_the_store_is_refused_and_the_store_stays_usable() {
        let dir = temp("full");
        // Each approval asks for about 64 KiB of environment names.
        let big = |n: u32| {
            let names: Vec<(&str, String)> = (0..64)
                .map(|i| ("env", format!("{}{n}_{i}", "N".repeat(1000))))
                .collect();
            let names: Vec<(&str, &str)> = names.iter().map(|(k, v)| (*k, v.as_str())).collect();
            approval("/t/big.wasm", &n.to_le_bytes(), spec(&names), false)
        };
        let mut approved = 0;
        let refused = loop {
            match TrustStore::approve(&dir, big(approved)) {
                Ok(()) => approved += 1,
                Err(e) => break e,
            }
            assert!(approved < 200, "never refused");
        };
        assert!(
            matches!(refused, TrustError::Full { .. })
                && refused.to_string().contains("MAX_TRUST_STORE_BYTES"),
            "{refused}"
        );
        // Positive control: what was approved before is all there, and a
        // revocation (which reads the store first) still works.
        let store = TrustStore::open(&dir).unwrap();
        assert_eq!(store.approvals().len(), approved as usize);
        let gone = TrustStore::revoke(&dir, |_| true).unwrap();
        assert_eq!(gone.len(), approved as usize);
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn more_is_named_and_less_is_covered() {
        let approved = spec(&[("env", "HOME"), ("max_memory", "512MiB")]);
        assert!(more_than(&approved, &spec(&[("env", "HOME")])).is_empty());
        assert!(more_than(&approved, &spec(&[("max_memory", "256MiB")])).is_empty());
        assert_eq!(
            more_than(
                &approved,
                &spec(&[("env", "HOME"), ("env", "PATH"), ("max_memory", "1GiB")])
            ),
            vec!["env PATH", "max_memory 1GiB (approved: 512MiB)"]
        );
        assert_eq!(
            more_than(&GrantSpec::default(), &spec(&[("max_memory", "1MiB")])),
            vec!["max_memory 1MiB (approved: the default)"]
        );
        assert_eq!(
            request_lines(&spec(&[("dir", "/data:ro"), ("max_memory", "1MiB")])),
            vec!["dir /data:ro", "max_memory 1MiB"]
        );
    }

    #[test]
    fn manifests_name_guest_paths_only() {
        assert!(check_manifest(&spec(&[("dir", "/data:ro")])).is_ok());
        assert_eq!(requested_guest("/data:rw,max=1MiB"), "/data");
        let e = check_manifest(&spec(&[("dir", "/etc::/etc")])).unwrap_err();
        assert!(e.to_string().contains("guest paths only"), "{e}");
        let ca = GrantSpec {
            http_ca: Some("/tmp/ca.pem".into()),
            ..GrantSpec::default()
        };
        assert!(check_manifest(&ca).is_err());
    }

    #[test]
    fn verdicts_follow_content_name_and_the_updates_choice() {
        let dir = temp("verdicts");
        let env_home = spec(&[("env", "HOME")]);
        let store = TrustStore::open(&dir).unwrap();
        let d1 = WasmDigest::of(b"one");
        let d2 = WasmDigest::of(b"two");
        assert_eq!(store.verdict("/t.wasm", &d1, None, &env_home), Verdict::New);
        assert!(!dir.exists(), "reading creates nothing");
        TrustStore::approve(&dir, approval("/t.wasm", b"one", env_home.clone(), false)).unwrap();
        let store = TrustStore::open(&dir).unwrap();
        assert!(matches!(
            store.verdict("/t.wasm", &d1, None, &env_home),
            Verdict::Approved(_)
        ));
        // Signed by someone: another key.
        assert_eq!(
            store.verdict("/t.wasm", &d1, Some("alice"), &env_home),
            Verdict::New
        );
        // New content, same requests, updates not kept: asked again, no more.
        assert!(matches!(
            store.verdict("/t.wasm", &d2, None, &env_home),
            Verdict::Again { ref more, .. } if more.is_empty()
        ));
        TrustStore::approve(&dir, approval("/t.wasm", b"one", env_home.clone(), true)).unwrap();
        let store = TrustStore::open(&dir).unwrap();
        assert_eq!(store.approvals().len(), 1, "replaced, not added");
        assert!(matches!(
            store.verdict("/t.wasm", &d2, None, &env_home),
            Verdict::Kept(_)
        ));
        let more = spec(&[("env", "HOME"), ("env", "SSH_AUTH_SOCK")]);
        assert!(matches!(
            store.verdict("/t.wasm", &d2, None, &more),
            Verdict::Again { ref more, .. } if more == &["env SSH_AUTH_SOCK"]
        ));
        // The same content asking for more than it was approved for.
        assert!(matches!(
            store.verdict("/t.wasm", &d1, None, &more),
            Verdict::Again { .. }
        ));
        let gone = TrustStore::revoke(&dir, |a| a.digest == d1).unwrap();
        assert_eq!(gone.len(), 1);
        assert!(TrustStore::open(&dir).unwrap().approvals().is_empty());
        let meta = std::fs::metadata(dir.join(STORE_FILE)).unwrap();
        assert_eq!(meta.mode() & 0o777, 0o600);
        assert_eq!(std::fs::metadata(&dir).unwrap().mode() & 0o777, 0o700);
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn unsafe_stores_are_refused() {
        let dir = temp("unsafe");
        TrustStore::approve(&dir, approval("/t.wasm", b"x", GrantSpec::default(), false)).unwrap();
        assert!(TrustStore::open(&dir).is_ok(), "positive control");
        std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o770)).unwrap();
        let e = TrustStore::open(&dir).unwrap_err().to_string();
        assert!(e.contains("group or others can write"), "{e}");
        std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o700)).unwrap();
        let file = dir.join(STORE_FILE);
        std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o622)).unwrap();
        let e = TrustStore::open(&dir).unwrap_err().to_string();
        assert!(e.contains("group or others can write"), "{e}");
        // A symlinked file and a symlinked directory.
        let real = dir.join("real.json");
        std::fs::rename(&file, &real).unwrap();
        std::os::unix::fs::symlink(&real, &file).unwrap();
        let e = TrustStore::open(&dir).unwrap_err().to_string();
        assert!(e.contains("symlink"), "{e}");
        let link = temp("unsafe-link");
        std::os::unix::fs::symlink(&dir, &link).unwrap();
        let e = TrustStore::open(&link).unwrap_err().to_string();
        assert!(e.contains("symlink"), "{e}");
        let _ = std::fs::remove_file(&link);
        let _ = std::fs::remove_dir_all(&dir);
    }
}
