//! Signatures: OpenSSH signatures (`ssh-keygen -Y sign -n tickbox`) over a
//! Tick's manifest digest, kept in the registry beside the artifact, and
//! checked offline against the signers the person pins.
//!
//! The signed message is the manifest digest as text (`sha256:…`, no line
//! break) in the namespace [`NAMESPACE`], so a signature made for anything
//! else (a git commit, a file, another digest) never counts. OpenSSH's own
//! `ssh-keygen -Y find-principals` and `-Y verify` do the cryptography, as
//! git does for SSH-signed commits; tickbox gives them a bounded signature
//! file and reads their bounded answers.
//!
//! In the registry a signature is an OCI 1.1 referrer of the manifest: an
//! artifact manifest of type [`SIGNATURE_TYPE`] whose `subject` is the
//! Tick's manifest, with the empty config and one layer, the armored
//! signature. Registries without the referrers API get the tag-scheme
//! fallback (an index under the tag `sha256-HEX`).

use crate::reference::Digest;
use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// The artifact type and layer media type of a signature.
pub const SIGNATURE_TYPE: &str = "application/vnd.tickbox.signature.v1+sshsig";
/// The empty config of an artifact manifest.
pub const EMPTY_CONFIG_TYPE: &str = "application/vnd.oci.empty.v1+json";
/// The empty config's bytes.
pub const EMPTY_CONFIG: &[u8] = b"{}";
/// The SSH signature namespace.
pub const NAMESPACE: &str = "tickbox";
/// How long one `ssh-keygen` may take.
const SSH_KEYGEN_TIMEOUT: Duration = Duration::from_secs(10);
/// Bytes of an `ssh-keygen` answer read.
const MAX_ANSWER: u64 = 64 << 10;

/// What is signed for a manifest.
pub fn message(manifest: &Digest) -> String {
    manifest.to_string()
}

/// What checking one signature found.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
#[serde(tag = "verdict", rename_all = "snake_case")]
pub enum Verdict {
    /// Made by an allowed signer over this digest.
    Valid { signer: String },
    /// Made by a key the allowed-signers file does not list.
    OtherKey,
    /// By an allowed key, but not over this digest (or not in tickbox's
    /// namespace).
    OtherDigest { signer: String },
    /// Not an SSH signature ssh-keygen reads.
    Malformed { why: String },
}

impl Verdict {
    /// The verdict in words, for a person reading `tickbox verify`'s
    /// output (the signer and the reason are escaped: a registry sends them).
    pub fn explain(&self) -> String {
        use tickbox_protocol::text::escape;
        match self {
            Verdict::Valid { signer } => format!(
                "signed by {}, an allowed signer, over this manifest",
                escape(signer)
            ),
            Verdict::OtherKey => "signed by a key the allowed-signers file does not list".into(),
            Verdict::OtherDigest { signer } => format!(
                "signed by {}, an allowed signer, but over another manifest (or not for tickbox)",
                escape(signer)
            ),
            Verdict::Malformed { why } => format!("not an SSH signature: {}", escape(why)),
        }
    }
}

/// Why signing or checking could not run at all.
#[derive(Debug, thiserror::Error)]
pub enum SignatureError {
    #[error("cannot run ssh-keygen (OpenSSH) to {what}: {why}")]
    Program { what: &'static str, why: String },
    #[error("ssh-keygen could not sign with {key}: {why}")]
    Sign { key: PathBuf, why: String },
}

/// Runs ssh-keygen with `args`, `stdin` as input, within the timeout;
/// returns (success, stdout, stderr), each bounded.
fn ssh_keygen(
    args: &[&std::ffi::OsStr],
    stdin: &[u8],
    what: &'static str,
) -> Result<(bool, String, String), SignatureError> {
    let program = |why: String| SignatureError::Program { what, why };
    let mut child = Command::new("ssh-keygen")
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| program(e.to_string()))?;
    let mut input = child.stdin.take().expect("piped");
    let data = stdin.to_vec();
    let writer = std::thread::spawn(move || {
        let _ = input.write_all(&data);
    });
    let mut out = child.stdout.take().expect("piped");
    let mut err = child.stderr.take().expect("piped");
    let reader = std::thread::spawn(move || {
        let mut s = Vec::new();
        let _ = (&mut out).take(MAX_ANSWER).read_to_end(&mut s);
        s
    });
    let err_reader = std::thread::spawn(move || {
        let mut s = Vec::new();
        let _ = (&mut err).take(MAX_ANSWER).read_to_end(&mut s);
        s
    });
    let deadline = Instant::now() + SSH_KEYGEN_TIMEOUT;
    let status = loop {
        match child.try_wait().map_err(|e| program(e.to_string()))? {
            Some(s) => break s,
            None if Instant::now() > deadline => {
                let _ = child.kill();
                let _ = child.wait();
                return Err(program(format!(
                    "it took more than {} s",
                    SSH_KEYGEN_TIMEOUT.as_secs()
                )));
            }
            None => std::thread::sleep(Duration::from_millis(5)),
        }
    };
    let _ = writer.join();
    let out = reader.join().unwrap_or_default();
    let err = err_reader.join().unwrap_or_default();
    Ok((
        status.success(),
        String::from_utf8_lossy(&out).into_owned(),
        String::from_utf8_lossy(&err).into_owned(),
    ))
}

/// Signs a manifest digest with an SSH private key (ssh-keygen may use
/// the agent for it); returns the armored signature.
pub fn sign(key: &Path, manifest: &Digest) -> Result<Vec<u8>, SignatureError> {
    let (ok, out, err) = ssh_keygen(
        &[
            "-Y".as_ref(),
            "sign".as_ref(),
            "-q".as_ref(),
            "-n".as_ref(),
            NAMESPACE.as_ref(),
            "-f".as_ref(),
            key.as_os_str(),
        ],
        message(manifest).as_bytes(),
        "sign",
    )?;
    if !ok || !out.contains("BEGIN SSH SIGNATURE") {
        return Err(SignatureError::Sign {
            key: key.to_path_buf(),
            why: tickbox_protocol::text::escape(err.trim()),
        });
    }
    Ok(out.into_bytes())
}

/// A private directory for the signature file ssh-keygen reads.
///
/// Made by `mkdtemp(3)`: a random name, created exclusively, 0700, ours.
/// A name tickbox could predict (its pid and a counter) would let another
/// local user create it first in the shared temp directory, and every
/// signed Tick would then fail to verify (or, were the directory reused,
/// be checked against their file).
struct Scratch(PathBuf);

impl Scratch {
    fn new() -> std::io::Result<Scratch> {
        use std::os::unix::ffi::{OsStrExt, OsStringExt};
        let template = std::env::temp_dir().join("tickbox-sig-XXXXXX");
        let mut buf =
            std::ffi::CString::new(template.as_os_str().as_bytes())?.into_bytes_with_nul();
        // SAFETY: `buf` is a writable, NUL-terminated template that mkdtemp
        // fills in place (it only replaces the trailing XXXXXX).
        let made = unsafe { libc::mkdtemp(buf.as_mut_ptr().cast()) };
        if made.is_null() {
            return Err(std::io::Error::last_os_error());
        }
        buf.pop();
        let dir = PathBuf::from(std::ffi::OsString::from_vec(buf));
        let scratch = Scratch(dir);
        // What mkdtemp promises, checked on what is there (lstat): a real
        // directory, ours, that nobody else can write.
        let meta = std::fs::symlink_metadata(&scratch.0)?;
        tickbox_trust::private_dir::check(&meta).map_err(std::io::Error::other)?;
        Ok(scratch)
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// Checks one signature of `manifest` against an allowed-signers file.
pub fn verify(
    allowed_signers: &Path,
    manifest: &Digest,
    signature: &[u8],
) -> Result<Verdict, SignatureError> {
    if signature.len() as u64 > crate::limits::MAX_SIGNATURE_BYTES {
        return Ok(Verdict::Malformed {
            why: format!("larger than {} bytes", crate::limits::MAX_SIGNATURE_BYTES),
        });
    }
    let scratch = Scratch::new().map_err(|e| SignatureError::Program {
        what: "verify",
        why: e.to_string(),
    })?;
    let sig = scratch.0.join("tick.sig");
    std::fs::write(&sig, signature).map_err(|e| SignatureError::Program {
        what: "verify",
        why: e.to_string(),
    })?;
    let (found, out, err) = ssh_keygen(
        &[
            "-Y".as_ref(),
            "find-principals".as_ref(),
            "-s".as_ref(),
            sig.as_os_str(),
            "-f".as_ref(),
            allowed_signers.as_os_str(),
        ],
        b"",
        "find the signer",
    )?;
    if !found {
        return Ok(
            if err.contains("Could not") && err.contains("signature") || err.contains("invalid") {
                Verdict::Malformed {
                    why: tickbox_protocol::text::escape(err.lines().next().unwrap_or("").trim()),
                }
            } else {
                Verdict::OtherKey
            },
        );
    }
    // The first principal the file lists for the key.
    let Some(signer) = out
        .lines()
        .map(str::trim)
        .find(|l| !l.is_empty())
        .map(str::to_string)
    else {
        return Ok(Verdict::OtherKey);
    };
    let (ok, _, _) = ssh_keygen(
        &[
            "-Y".as_ref(),
            "verify".as_ref(),
            "-f".as_ref(),
            allowed_signers.as_os_str(),
            "-I".as_ref(),
            signer.as_ref(),
            "-n".as_ref(),
            NAMESPACE.as_ref(),
            "-s".as_ref(),
            sig.as_os_str(),
        ],
        message(manifest).as_bytes(),
        "verify",
    )?;
    let signer = tickbox_protocol::text::escape(&signer);
    Ok(if ok {
        Verdict::Valid { signer }
    } else {
        Verdict::OtherDigest { signer }
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::{MetadataExt, PermissionsExt};

    #[test]
    fn scratch_directories_are_fresh_private_and_gone_after_use() {
        let a = Scratch::new().unwrap();
        let b = Scratch::new().unwrap();
        assert_ne!(a.0, b.0, "a new name each time");
        let meta = std::fs::symlink_metadata(&a.0).unwrap();
        assert!(meta.is_dir());
        assert_eq!(meta.permissions().mode() & 0o777, 0o700);
        // SAFETY: geteuid has no preconditions.
        assert_eq!(meta.uid(), unsafe { libc::geteuid() });
        let name = a.0.file_name().unwrap().to_string_lossy().into_owned();
        assert!(
            name.starts_with("tickbox-sig-") && !name.ends_with("XXXXXX"),
            "{name}"
        );
        let path = a.0.clone();
        drop(a);
        assert!(!path.exists());
    }
}
