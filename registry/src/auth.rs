//! Registry credentials: the Docker config file's `auths` (the file other
//! tools write with `docker login`), used as Basic credentials or to ask
//! the registry's token service for a bearer token; anonymous otherwise.
//! Credential helpers (`credsStore`, `credHelpers`) run programs, which
//! tickbox does not do: only inline `auth` or `username`/`password` entries
//! are read.

use crate::error::RegistryError;
use crate::limits::MAX_CREDENTIALS_BYTES;
use base64::Engine as _;
use std::collections::BTreeMap;
use std::io::Read;
use std::path::Path;

/// A user and password for one registry.
#[derive(Clone)]
pub struct Basic {
    pub user: String,
    pub password: String,
}

impl std::fmt::Debug for Basic {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Never print the password.
        write!(f, "Basic({})", self.user)
    }
}

impl Basic {
    /// The `Authorization` header value.
    pub fn header(&self) -> String {
        let raw = format!("{}:{}", self.user, self.password);
        format!(
            "Basic {}",
            base64::engine::general_purpose::STANDARD.encode(raw)
        )
    }
}

/// Credentials by registry (`HOST` or `HOST:PORT`).
#[derive(Default, Debug, Clone)]
pub struct Credentials(BTreeMap<String, Basic>);

impl Credentials {
    /// Reads a Docker config file; a missing file is no credentials.
    pub fn read(path: &Path) -> Result<Credentials, RegistryError> {
        let bad = |why: String| RegistryError::Config {
            path: path.to_path_buf(),
            why,
        };
        let file = match std::fs::File::open(path) {
            Ok(f) => f,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Credentials::default()),
            Err(e) => return Err(bad(e.to_string())),
        };
        let mut text = Vec::new();
        file.take(MAX_CREDENTIALS_BYTES + 1)
            .read_to_end(&mut text)
            .map_err(|e| bad(e.to_string()))?;
        if text.len() as u64 > MAX_CREDENTIALS_BYTES {
            return Err(bad(format!("larger than {MAX_CREDENTIALS_BYTES} bytes")));
        }
        let v: serde_json::Value =
            serde_json::from_slice(&text).map_err(|e| bad(format!("not JSON: {e}")))?;
        let mut out = BTreeMap::new();
        let Some(auths) = v.get("auths").and_then(|a| a.as_object()) else {
            return Ok(Credentials::default());
        };
        for (key, entry) in auths {
            // Keys are written `host`, `host:port` or as a URL.
            let written = key
                .trim_start_matches("https://")
                .trim_start_matches("http://")
                .split('/')
                .next()
                .unwrap_or_default();
            // Kept by the registry's canonical spelling, as references are.
            let name = crate::reference::Authority::parse(written)
                .map(|a| a.to_string())
                .unwrap_or_else(|_| written.to_ascii_lowercase());
            let basic = if let Some(a) = entry.get("auth").and_then(|a| a.as_str()) {
                let raw = base64::engine::general_purpose::STANDARD
                    .decode(a.trim())
                    .map_err(|_| {
                        bad(format!(
                            "the auth entry of {} is not base64",
                            tickbox_protocol::text::escape(&name)
                        ))
                    })?;
                let raw = String::from_utf8(raw).map_err(|_| {
                    bad(format!(
                        "the auth entry of {} is not text",
                        tickbox_protocol::text::escape(&name)
                    ))
                })?;
                let (user, password) = raw.split_once(':').ok_or_else(|| {
                    bad(format!(
                        "the auth entry of {} is not user:password",
                        tickbox_protocol::text::escape(&name)
                    ))
                })?;
                Basic {
                    user: user.to_string(),
                    password: password.to_string(),
                }
            } else {
                match (
                    entry.get("username").and_then(|u| u.as_str()),
                    entry.get("password").and_then(|p| p.as_str()),
                ) {
                    (Some(u), Some(p)) => Basic {
                        user: u.to_string(),
                        password: p.to_string(),
                    },
                    _ => continue,
                }
            };
            out.insert(name, basic);
        }
        Ok(Credentials(out))
    }

    /// The credentials for a registry, by its canonical `HOST[:PORT]`.
    pub fn for_registry(&self, registry: &str) -> Option<&Basic> {
        self.0.get(registry)
    }
}

/// A `WWW-Authenticate` challenge.
#[derive(Debug, PartialEq, Eq)]
pub enum Challenge {
    /// `Basic realm=…`.
    Basic,
    /// `Bearer realm=…,service=…,scope=…`: get a token at `realm`.
    Bearer {
        realm: String,
        service: Option<String>,
        scope: Option<String>,
    },
}

impl Challenge {
    /// Parses the header's value (one challenge, quoted parameters).
    pub fn parse(value: &str) -> Option<Challenge> {
        let (scheme, rest) = value.trim().split_once(' ').unwrap_or((value.trim(), ""));
        if scheme.eq_ignore_ascii_case("basic") {
            return Some(Challenge::Basic);
        }
        if !scheme.eq_ignore_ascii_case("bearer") {
            return None;
        }
        let mut params = BTreeMap::new();
        let mut s = rest.trim();
        while !s.is_empty() {
            let (key, after) = s.split_once('=')?;
            let key = key.trim().to_ascii_lowercase();
            let after = after.trim_start();
            let (val, next) = if let Some(q) = after.strip_prefix('"') {
                let end = q.find('"')?;
                (&q[..end], &q[end + 1..])
            } else {
                let end = after.find(',').unwrap_or(after.len());
                (&after[..end], &after[end..])
            };
            params.insert(key, val.to_string());
            s = next.trim_start().trim_start_matches(',').trim_start();
        }
        Some(Challenge::Bearer {
            realm: params.remove("realm")?,
            service: params.remove("service"),
            scope: params.remove("scope"),
        })
    }
}

/// Percent-encodes a query value (everything but unreserved characters).
pub fn query_escape(s: &str) -> String {
    s.bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'.' | b'_' | b'~' => {
                (b as char).to_string()
            }
            _ => format!("%{b:02X}"),
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn challenges_parse() {
        assert_eq!(
            Challenge::parse(
                r#"Bearer realm="https://auth.example/token",service="reg",scope="repository:a/b:pull""#
            ),
            Some(Challenge::Bearer {
                realm: "https://auth.example/token".into(),
                service: Some("reg".into()),
                scope: Some("repository:a/b:pull".into()),
            })
        );
        assert_eq!(
            Challenge::parse(r#"Basic realm="Registry""#),
            Some(Challenge::Basic)
        );
        assert_eq!(Challenge::parse("Negotiate"), None);
        assert_eq!(Challenge::parse(r#"Bearer service="x""#), None);
        assert_eq!(
            query_escape("repository:a/b:pull"),
            "repository%3Aa%2Fb%3Apull"
        );
    }

    #[test]
    fn docker_config_entries_are_read_without_showing_passwords() {
        let dir = std::env::temp_dir().join(format!("tickbox-creds-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("config.json");
        std::fs::write(
            &path,
            r#"{"auths":{"127.0.0.1:5000":{"auth":"dXNlcjpzM2NyZXQ="},"https://r.example/v1/":{"username":"u","password":"p"}},"credsStore":"desktop"}"#,
        )
        .unwrap();
        let c = Credentials::read(&path).unwrap();
        let b = c.for_registry("127.0.0.1:5000").unwrap();
        assert_eq!((b.user.as_str(), b.password.as_str()), ("user", "s3cret"));
        assert!(!format!("{b:?}").contains("s3cret"));
        assert!(c.for_registry("r.example").is_some());
        assert!(Credentials::read(&dir.join("none.json"))
            .unwrap()
            .for_registry("x")
            .is_none());
        std::fs::write(&path, "{").unwrap();
        assert!(Credentials::read(&path)
            .unwrap_err()
            .to_string()
            .contains("not JSON"));
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
