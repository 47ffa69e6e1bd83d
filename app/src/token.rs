//! Bearer tokens of tickbox's loopback servers (`tickbox mcp --http`, its
//! metrics listener): read from a file only its owner may read, or
//! generated and written, 0600, into the current user's live-instance
//! directory for a launcher of the same user to find.

use crate::AppError;
use std::path::{Path, PathBuf};
use tickbox_host::live;

/// The longest token file accepted (a token is far shorter).
pub const MAX_TOKEN_FILE_BYTES: u64 = 4096;

/// The shortest token accepted from a file.
pub const MIN_TOKEN_CHARS: usize = 16;

/// Where a server's token comes from.
pub enum Token {
    /// Read from a file (the person has it already).
    Given { token: String, file: PathBuf },
    /// Generated at start; written to a file once the port is known.
    Generated(String),
}

impl Token {
    /// The token itself.
    pub fn token(&self) -> &str {
        match self {
            Token::Given { token, .. } | Token::Generated(token) => token,
        }
    }
}

/// The token in `file` (which only its owner, the current user, may read
/// or write), or a new one when there is no file. `what` names the file
/// in messages (the caller's name for it, such as a flag).
pub fn read_or_generate(file: Option<&Path>, what: &str) -> Result<Token, AppError> {
    use std::io::Read;
    use std::os::unix::fs::MetadataExt;
    let Some(path) = file else {
        return Ok(Token::Generated(crate::inspect::server::new_token()?));
    };
    let shown = path.display();
    let cannot = |e: std::io::Error| AppError::usage(format!("cannot read {what} {shown}: {e}"));
    let f = std::fs::File::open(path).map_err(cannot)?;
    // The opened file's own metadata: what was checked is what is read.
    let meta = f.metadata().map_err(cannot)?;
    // SAFETY: geteuid has no preconditions and cannot fail.
    let uid = unsafe { libc::geteuid() };
    if meta.uid() != uid {
        return Err(AppError::usage(format!(
            "{what} {shown} is owned by uid {}, not by you (uid {uid}): its owner knows the token",
            meta.uid()
        )));
    }
    if meta.mode() & 0o077 != 0 {
        return Err(AppError::usage(format!(
            "{what} {shown} has mode {:03o}: group or others may read or change it; `chmod 600` it",
            meta.mode() & 0o777
        )));
    }
    let mut text = String::new();
    // One byte past the bound tells a longer file from one at the bound:
    // a token cut short would be refused by every client, for no reason
    // given.
    f.take(MAX_TOKEN_FILE_BYTES + 1)
        .read_to_string(&mut text)
        .map_err(cannot)?;
    if text.len() as u64 > MAX_TOKEN_FILE_BYTES {
        return Err(AppError::usage(format!(
            "{what} {shown} is longer than {MAX_TOKEN_FILE_BYTES} bytes (MAX_TOKEN_FILE_BYTES)"
        )));
    }
    let token = text.trim().to_string();
    if token.len() < MIN_TOKEN_CHARS || !token.bytes().all(|b| b.is_ascii_graphic()) {
        return Err(AppError::usage(format!(
            "{what} {shown}: the token must be {MIN_TOKEN_CHARS} to {MAX_TOKEN_FILE_BYTES} printable ASCII characters"
        )));
    }
    Ok(Token::Given {
        token,
        file: path.to_path_buf(),
    })
}

/// A generated token's file, removed when dropped (also when the server is
/// interrupted: its future is dropped).
pub struct TokenFile(PathBuf);

impl TokenFile {
    /// Where the token is.
    pub fn path(&self) -> &Path {
        &self.0
    }
}

impl Drop for TokenFile {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
    }
}

/// Writes a generated token to `name` (`mcp-http-PORT.token`,
/// `mcp-metrics-PORT.token`; 0600) in the current user's live-instance
/// directory, which tickbox keeps 0700 and owned by the user.
pub fn write_file(name: &str, token: &str) -> Result<TokenFile, AppError> {
    use std::io::Write;
    use std::os::unix::fs::OpenOptionsExt;
    let registry = live::Registry::open().map_err(|e| {
        AppError::session(format!(
            "cannot open the per-user directory for the token file: {e}"
        ))
    })?;
    let path = registry.dir().join(name);
    // One left by a server on this port that was killed; the directory is
    // the user's alone, so nobody else put it there.
    let _ = std::fs::remove_file(&path);
    let file = TokenFile(path);
    std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .custom_flags(libc::O_NOFOLLOW)
        .open(&file.0)
        .and_then(|mut f| writeln!(f, "{token}"))
        .map_err(|e| {
            AppError::session(format!(
                "cannot write the token file {}: {e}",
                file.0.display()
            ))
        })?;
    Ok(file)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    #[test]
    fn a_token_file_past_the_bound_is_refused_not_cut() {
        let dir = std::env::temp_dir().join(format!("tickbox-token-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let file = |name: &str, len: usize| {
            let path = dir.join(name);
            std::fs::write(&path, "t".repeat(len)).unwrap();
            std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o600)).unwrap();
            path
        };
        let long = file("long", MAX_TOKEN_FILE_BYTES as usize + 1);
        let Err(e) = read_or_generate(Some(&long), "--token-file") else {
            panic!("a token longer than the bound was taken");
        };
        assert!(e.to_string().contains("MAX_TOKEN_FILE_BYTES"), "{e}");
        // Positive control: a token at the bound is read whole.
        let at = file("at", MAX_TOKEN_FILE_BYTES as usize);
        let token = read_or_generate(Some(&at), "--token-file").unwrap();
        assert_eq!(token.token().len(), MAX_TOKEN_FILE_BYTES as usize);
        let _ = std::fs::remove_dir_all(&dir);
    }
}
