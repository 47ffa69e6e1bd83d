//! Network and file fixtures of a scenario: `[[http]]` entries answer a
//! wasm component's `wasi:http` requests in place of the network, and
//! `[files]` seeds the scratch directory.
//!
//! **HTTP.** Each entry is a method and a URL (exact, `url`, or a prefix,
//! `url_prefix`) with a status, headers and a body (inline, `body`, or read
//! from a file beside the scenario, `body_file`). The first entry in file
//! order that matches answers. A URL matches when its origin is the entry's
//! (scheme, host and port, normalized as `allow_http` normalizes them, so
//! `https://API.example.com` and `https://api.example.com:443` are one) and
//! its path and query equal the entry's (or start with it, for a prefix),
//! byte for byte: `%7E` and `~` differ. The method is compared as sent
//! (`GET`, `POST`, ...). With entries, the Tick's requests never reach the
//! network ([`tickbox_sandbox::http`]): one no entry matches gets
//! `HTTP-request-denied`, is noted here, and fails the step during which it
//! was made with one line naming its method and URL (escaped: the Tick
//! chose them). Because they replace the network, entries cannot be
//! combined with `allow_http` or `http_ca`.
//!
//! **Files.** `[files]` maps relative paths (no `..`, `.`, empty or
//! absolute parts) to text, or to `{ file = "PATH" }` for a file beside the
//! scenario; they are written into the fresh scratch directory before the
//! Tick starts, so the Tick sees them under `[tick] scratch` (which
//! `[files]` needs).
//!
//! Everything read from disk goes through the scenario file walls
//! ([`super::files::read_beside`]: relative to the scenario's directory, no
//! symbolic link at any level below it, regular files only), and every
//! count and size has a bound below.

use super::diff;
use super::files::{self, FileError};
use bytes::Bytes;
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use tickbox_sandbox::http::{parse_origin, FixtureRequest, FixtureResponse, HttpFixtures, Origin};

/// Most `[[http]]` entries in one scenario.
pub const MAX_HTTP_FIXTURES: usize = 256;
/// Largest body of one entry, inline or from `body_file`.
pub const MAX_FIXTURE_BODY: u64 = 1024 * 1024;
/// Most headers of one entry.
pub const MAX_FIXTURE_HEADERS: usize = 64;
/// Most bytes of all entries' bodies and all seeded files together.
pub const MAX_FIXTURE_TOTAL: u64 = 16 * 1024 * 1024;
/// Most `[files]` entries.
pub const MAX_SEED_FILES: usize = 256;
/// Largest `[files]` entry (inline or from a file).
pub const MAX_SEED_FILE: u64 = 4 * 1024 * 1024;
/// Longest relative path (`body_file`, `[files]` names and sources).
pub const MAX_FIXTURE_PATH: usize = 1024;
/// Most parts (directories and the name) of such a path.
pub const MAX_FIXTURE_PATH_PARTS: usize = 16;
/// Longest `url` or `url_prefix`.
pub const MAX_FIXTURE_URL: usize = 8192;

/// One `[[http]]` entry, checked.
#[derive(Debug, Clone, PartialEq)]
pub struct HttpFixture {
    /// 1-based position among the entries, for messages.
    pub index: usize,
    /// The method it answers.
    pub method: String,
    /// The origin it answers.
    pub origin: Origin,
    /// The path and query it answers (`/` at least).
    pub path: String,
    /// Whether `path` is a prefix (`url_prefix`) rather than exact (`url`).
    pub prefix: bool,
    /// The answer.
    pub response: FixtureResponse,
}

impl HttpFixture {
    fn matches(&self, r: &FixtureRequest<'_>) -> bool {
        r.method == self.method
            && r.origin == Some(&self.origin)
            && if self.prefix {
                r.path_and_query.starts_with(&self.path)
            } else {
                r.path_and_query == self.path
            }
    }
}

/// One `[files]` entry, checked: where it goes in the scratch directory and
/// what it holds.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SeedFile {
    /// A relative path of plain names.
    pub path: PathBuf,
    /// The content.
    pub content: Vec<u8>,
}

/// The entries of one run and the requests none of them answered, as
/// escaped one-line descriptions, oldest first.
pub struct FixtureTable {
    fixtures: Vec<HttpFixture>,
    misses: Mutex<Misses>,
}

#[derive(Default)]
struct Misses {
    /// The first few, described.
    shown: Vec<String>,
    /// All of them since the last [`FixtureTable::take_misses`].
    count: u64,
}

/// Requests described per step; the rest are only counted.
const MISSES_KEPT: usize = 4;

impl FixtureTable {
    /// A table with these entries and no misses.
    pub fn new(fixtures: Vec<HttpFixture>) -> FixtureTable {
        FixtureTable {
            fixtures,
            misses: Mutex::new(Misses::default()),
        }
    }

    /// The requests no entry answered since the last call: the first few
    /// described, and how many there were.
    pub fn take_misses(&self) -> (Vec<String>, u64) {
        let mut m = tickbox_host::util::lock(&self.misses);
        let taken = std::mem::take(&mut *m);
        (taken.shown, taken.count)
    }
}

impl HttpFixtures for FixtureTable {
    fn answer(&self, request: &FixtureRequest<'_>) -> Option<FixtureResponse> {
        if let Some(f) = self.fixtures.iter().find(|f| f.matches(request)) {
            return Some(f.response.clone());
        }
        let mut m = tickbox_host::util::lock(&self.misses);
        m.count += 1;
        if m.shown.len() < MISSES_KEPT {
            // The Tick chose both: escaped and clipped before anyone sees them.
            m.shown.push(format!(
                "{} {}",
                tickbox_host::text::escape(&diff::clip(request.method, 64)),
                tickbox_host::text::escape(&diff::clip(request.url, diff::MAX_VALUE_CHARS))
            ));
        }
        None
    }
}

/// The failure line for the requests of a step no entry answered.
pub fn miss_line(shown: &[String], count: u64) -> String {
    let first = shown.first().map(String::as_str).unwrap_or("a request");
    let more = match count {
        0 | 1 => String::new(),
        n => format!(" (and {} more)", n - 1),
    };
    format!(
        "no [[http]] fixture answers the Tick's request {first}{more}; the Tick got HTTP-request-denied and nothing was sent"
    )
}

/// Checks a relative path as a scenario gives it (`body_file`, a `[files]`
/// name or source): plain names joined by `/`, nothing absolute, no `.`,
/// `..` or empty part, no unsafe character, bounded.
pub fn relative_path(text: &str) -> Result<PathBuf, String> {
    if text.is_empty() || text.len() > MAX_FIXTURE_PATH {
        return Err(format!(
            "give a relative path of 1 to {MAX_FIXTURE_PATH} bytes"
        ));
    }
    if text.starts_with('/') {
        return Err("an absolute path is refused: give a path relative to the scenario".into());
    }
    if text
        .chars()
        .any(|c| c == '\0' || tickbox_host::text::is_unsafe(c))
    {
        return Err("a control or invisible character in a path is refused".into());
    }
    let parts: Vec<&str> = text.split('/').collect();
    if parts.len() > MAX_FIXTURE_PATH_PARTS {
        return Err(format!(
            "more than {MAX_FIXTURE_PATH_PARTS} parts in a path (the limit)"
        ));
    }
    if parts.iter().any(|p| matches!(*p, "" | "." | "..")) {
        return Err("`..`, `.` and empty parts are refused: name the file by plain names".into());
    }
    Ok(PathBuf::from(text))
}

/// Splits a fixture URL into its origin and its path and query.
pub fn parse_url(url: &str) -> Result<(Origin, String), String> {
    if url.len() > MAX_FIXTURE_URL {
        return Err(format!("longer than {MAX_FIXTURE_URL} bytes (the limit)"));
    }
    if url.contains('#') {
        return Err("a fragment (#...) is never sent: leave it out".into());
    }
    if url
        .chars()
        .any(|c| c.is_whitespace() || tickbox_host::text::is_unsafe(c))
    {
        return Err("spaces and control characters are refused (percent-encode them)".into());
    }
    let (scheme, rest) = url
        .split_once("://")
        .ok_or("give http://HOST[:PORT]/PATH or https://...")?;
    let split = rest.find(['/', '?']).unwrap_or(rest.len());
    let (authority, path) = rest.split_at(split);
    let origin = parse_origin(&format!("{scheme}://{authority}"))?;
    let path = match path {
        "" => "/".to_string(),
        p if p.starts_with('?') => format!("/{p}"),
        p => p.to_string(),
    };
    Ok((origin, path))
}

/// Whether `name` is a valid header name (an RFC 9110 token).
pub fn is_token(name: &str) -> bool {
    !name.is_empty()
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b))
}

/// Whether `value` is a header value tickbox sends as it is: visible ASCII,
/// spaces and tabs (no line break, which would split the header).
pub fn is_header_value(value: &str) -> bool {
    value
        .bytes()
        .all(|b| b == b'\t' || (b' '..=b'~').contains(&b))
}

/// Reads `rel` beside the scenario (in `base`), through the file walls,
/// as the bytes of a fixture; the error is one line naming the file.
pub fn read_source(base: &Path, rel: &str, max: u64, key: &str) -> Result<Vec<u8>, String> {
    let path = relative_path(rel).map_err(|e| format!("{key} {rel:?}: {e}"))?;
    files::read_beside(base, &path, max).map_err(|e| match e {
        FileError::Symlink(p) => format!(
            "{key} {rel:?} refused: {} is a symbolic link; fixture files are read only as regular files beside the scenario, never through a link",
            p.display()
        ),
        FileError::TooLarge { len, max, .. } => format!(
            "{key} {rel:?} is {len} bytes, over the {max}-byte limit"
        ),
        e => format!("{key} {rel:?}: {e}"),
    })
}

/// Writes the seed files into `dir` (a fresh directory of this run):
/// directories first, each file new (never through a link).
pub fn seed(dir: &Path, seeds: &[SeedFile]) -> Result<(), FileError> {
    use std::io::Write;
    use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt};
    for s in seeds {
        let path = dir.join(&s.path);
        if let Some(parent) = path.parent() {
            std::fs::DirBuilder::new()
                .recursive(true)
                .mode(0o700)
                .create(parent)
                .map_err(|e| FileError::Io {
                    path: parent.to_path_buf(),
                    source: e,
                })?;
        }
        let mut f = std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o600)
            .custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC)
            .open(&path)
            .map_err(|e| FileError::Io {
                path: path.clone(),
                source: e,
            })?;
        f.write_all(&s.content).map_err(|e| FileError::Io {
            path: path.clone(),
            source: e,
        })?;
    }
    Ok(())
}

/// Refuses seed paths where one is a directory of another (`a` and `a/b`):
/// both cannot be written.
pub fn check_seed_paths(seeds: &[SeedFile]) -> Result<(), String> {
    let mut paths: Vec<&Path> = seeds.iter().map(|s| s.path.as_path()).collect();
    paths.sort();
    for pair in paths.windows(2) {
        if pair[1].starts_with(pair[0]) {
            return Err(format!(
                "[files] {:?} is a file, so {:?} cannot be under it",
                pair[0].display().to_string(),
                pair[1].display().to_string()
            ));
        }
    }
    Ok(())
}

/// A fixture body as the sandbox takes it.
pub fn body(bytes: Vec<u8>) -> Bytes {
    Bytes::from(bytes)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fixture(method: &str, url: &str, prefix: bool) -> HttpFixture {
        let (origin, path) = parse_url(url).unwrap();
        HttpFixture {
            index: 1,
            method: method.into(),
            origin,
            path,
            prefix,
            response: FixtureResponse {
                status: 200,
                headers: Vec::new(),
                body: Bytes::from_static(b"ok"),
            },
        }
    }

    /// A request as the sandbox describes it (its origin normalized the
    /// same way).
    fn asks(table: &FixtureTable, method: &str, url: &str) -> bool {
        let (origin, path) = parse_url(url).unwrap();
        table
            .answer(&FixtureRequest {
                method,
                url,
                origin: Some(&origin),
                path_and_query: &path,
            })
            .is_some()
    }

    #[test]
    fn requests_match_by_method_origin_and_path() {
        let t = FixtureTable::new(vec![
            fixture("GET", "https://API.example.com/v1/item?id=2", false),
            fixture("POST", "http://127.0.0.1:8080/api/", true),
        ]);
        assert!(asks(&t, "GET", "https://api.example.com:443/v1/item?id=2"));
        assert!(asks(&t, "POST", "http://127.0.0.1:8080/api/x/y?z"));
        assert_eq!(t.take_misses(), (vec![], 0));
        for (m, u) in [
            ("POST", "https://api.example.com/v1/item?id=2"),
            ("GET", "https://api.example.com/v1/item?id=3"),
            ("GET", "https://api.example.com/v1/item"),
            ("GET", "http://api.example.com/v1/item?id=2"),
            ("GET", "https://api.example.com.evil/v1/item?id=2"),
            ("POST", "http://127.0.0.1:8081/api/x"),
            ("POST", "http://localhost:8080/api/x"),
            ("POST", "http://127.0.0.1:8080/apix"),
        ] {
            assert!(!asks(&t, m, u), "{m} {u}");
        }
        let (shown, count) = t.take_misses();
        assert_eq!(count, 8);
        assert_eq!(shown.len(), MISSES_KEPT);
        assert_eq!(shown[0], "POST https://api.example.com/v1/item?id=2");
        assert_eq!(t.take_misses(), (vec![], 0), "taken once");
        assert!(miss_line(&shown, count).contains("(and 7 more)"));
    }

    #[test]
    fn a_hostile_url_is_escaped_in_the_miss() {
        let t = FixtureTable::new(Vec::new());
        let url = "http://127.0.0.1/\u{202e}txt.exe\u{85}";
        let _ = t.answer(&FixtureRequest {
            method: "GET",
            url,
            origin: None,
            path_and_query: "/",
        });
        let (shown, _) = t.take_misses();
        let line = miss_line(&shown, 1);
        assert!(!line.chars().any(tickbox_host::text::is_unsafe), "{line}");
        assert!(line.contains("\\u{202e}txt.exe\\x85"), "{line}");
    }

    #[test]
    fn urls_and_paths_are_checked() {
        assert_eq!(
            parse_url("http://127.0.0.1:9").unwrap().1,
            "/",
            "no path is /"
        );
        assert_eq!(parse_url("http://h?x=1").unwrap().1, "/?x=1");
        for bad in [
            "ftp://h/x",
            "http://user@h/x",
            "http://h/x#frag",
            "http://h/a b",
            "h/x",
            "http://*.h/x",
        ] {
            assert!(parse_url(bad).is_err(), "{bad}");
        }
        assert!(parse_url(&format!("http://h/{}", "a".repeat(MAX_FIXTURE_URL))).is_err());
        assert!(relative_path("data/page.html").is_ok());
        for bad in [
            "",
            "/etc/passwd",
            "../x",
            "a/../../x",
            "a//b",
            "./a",
            "a/",
            "a\nb",
        ] {
            assert!(relative_path(bad).is_err(), "{bad:?}");
        }
        let deep = vec!["d"; MAX_FIXTURE_PATH_PARTS + 1].join("/");
        assert!(relative_path(&deep).is_err());
        assert!(relative_path(&vec!["d"; MAX_FIXTURE_PATH_PARTS].join("/")).is_ok());
        assert!(is_token("x-fixture") && !is_token("a b") && !is_token(""));
        assert!(is_header_value("text/html; charset=utf-8") && !is_header_value("a\r\nb"));
        let seeds = |p: &[&str]| {
            p.iter()
                .map(|p| SeedFile {
                    path: p.into(),
                    content: Vec::new(),
                })
                .collect::<Vec<_>>()
        };
        assert!(check_seed_paths(&seeds(&["a/b", "a/c", "ab"])).is_ok());
        assert!(check_seed_paths(&seeds(&["a/b/c", "a/b"])).is_err());
    }
}
