//! `tickbox new PATH [--lang rust|c|python|js|go]`: writes the project
//! `tickbox_app::scaffold` makes, and says what to run next.

use super::exit::Exit;
use clap::{Args, ValueEnum};
use serde_json::json;
use std::path::{Path, PathBuf};
use tickbox_app::scaffold::{self, Sdk};

#[derive(Args)]
pub struct NewArgs {
    /// The directory to create; its last component names the project
    /// (lowercase letters, digits, `-`, `_`; starting with a letter)
    #[arg(value_name = "PATH")]
    path: PathBuf,
    /// The language of the project
    #[arg(long, value_enum, default_value = "rust")]
    lang: Lang,
    /// Rust: depend on the tickbox-guest SDK at this directory (a checkout's
    /// `guest-sdk/`) [default: the project carries the SDK, in vendor/]
    #[arg(long, value_name = "DIR")]
    sdk_path: Option<PathBuf>,
    /// Print the result as JSON also on a terminal (it is JSON when stdout is not one)
    #[arg(long)]
    json: bool,
}

#[derive(Clone, Copy, ValueEnum, PartialEq, Debug)]
enum Lang {
    Rust,
    C,
    Python,
    Js,
    Go,
}

impl From<Lang> for scaffold::Lang {
    fn from(l: Lang) -> scaffold::Lang {
        match l {
            Lang::Rust => scaffold::Lang::Rust,
            Lang::C => scaffold::Lang::C,
            Lang::Python => scaffold::Lang::Python,
            Lang::Js => scaffold::Lang::Js,
            Lang::Go => scaffold::Lang::Go,
        }
    }
}

pub const HELP: &str = "\
Examples:
  tickbox new my-tick                 Rust, on the tickbox-guest SDK
  tickbox new my-tick --lang c        C, wasm32-wasip1 via clang + wasi-libc
  tickbox new my-tick --lang python   Python, a component via componentize-py
  tickbox new my-tick --lang js       JavaScript, a component via componentize-js
  tickbox new my-tick --lang go       Go, a wasip1 module via GOOS=wasip1

Files and outputs take the project's name: the build makes NAME.wasm, and
scenarios/NAME.scenario.toml runs it (`tickbox test scenarios`). A Rust
project carries the tickbox-guest SDK in vendor/ and a Cargo.lock, so it
builds with nothing published. Prints what was made and the commands that
build, check and test it, all run in the project's directory (after the
`cd` it prints): sentences on a terminal, a JSON object otherwise or with
--json. Exit codes: 0 created, 2 bad name or PATH exists (nothing
written), 1 a file could not be written.";

/// `s` as one word of a POSIX shell: as it is when it needs no quoting,
/// else in single quotes.
fn shell_word(s: &str) -> String {
    let plain = |c: char| c.is_ascii_alphanumeric() || "_-./+:,@%=".contains(c);
    if !s.is_empty() && s.chars().all(plain) {
        s.to_string()
    } else {
        format!("'{}'", s.replace('\'', "'\\''"))
    }
}

/// Writes the project and prints what to do next.
pub fn run(args: NewArgs) -> Result<(), Exit> {
    let name = args
        .path
        .file_name()
        .and_then(|n| n.to_str())
        .unwrap_or_default()
        .to_string();
    let lang = scaffold::Lang::from(args.lang);
    scaffold::valid_name(&name).map_err(Exit::usage)?;
    if args.path.exists() {
        return Err(Exit::usage(format!(
            "{} exists; tickbox new writes only a new directory",
            args.path.display()
        )));
    }
    // Without --sdk-path the project carries the SDK (vendor/), so it
    // builds with nothing but this binary and the registry.
    let sdk = match &args.sdk_path {
        None => Sdk::Vendored,
        Some(dir) => {
            let dir = std::path::absolute(dir)
                .map_err(|e| Exit::usage(format!("--sdk-path {}: {e}", dir.display())))?;
            if !dir.join("Cargo.toml").is_file() {
                return Err(Exit::usage(format!(
                    "--sdk-path {}: no Cargo.toml there (expected tickbox's guest-sdk/)",
                    dir.display()
                )));
            }
            // A TOML basic string: escape what could end it.
            Sdk::Path(
                dir.to_string_lossy()
                    .replace('\\', "\\\\")
                    .replace('"', "\\\""),
            )
        }
    };
    let files = scaffold::files(lang, &name, &sdk).map_err(|e| {
        Exit::new(
            super::exit::TOOL_ERROR,
            format!("tickbox new: a template is broken ({e})"),
        )
    })?;
    let io = |p: &Path, e: std::io::Error| {
        Exit::new(
            super::exit::TOOL_ERROR,
            format!("cannot write {}: {e}", p.display()),
        )
    };
    // The project's directory is made here, new, or nothing is written:
    // one that appeared since the check above (in a shared directory,
    // another user's, holding links) is refused, not written through.
    if let Some(parent) = args.path.parent().filter(|p| !p.as_os_str().is_empty()) {
        std::fs::create_dir_all(parent).map_err(|e| io(parent, e))?;
    }
    std::fs::create_dir(&args.path).map_err(|e| match e.kind() {
        std::io::ErrorKind::AlreadyExists => Exit::usage(format!(
            "{} exists; tickbox new writes only a new directory",
            args.path.display()
        )),
        _ => io(&args.path, e),
    })?;
    for (rel, text, exec) in &files {
        let p = args.path.join(rel);
        if let Some(parent) = p.parent() {
            std::fs::create_dir_all(parent).map_err(|e| io(parent, e))?;
        }
        write_new(&p, text.as_bytes()).map_err(|e| io(&p, e))?;
        if *exec {
            use std::os::unix::fs::PermissionsExt;
            std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o755))
                .map_err(|e| io(&p, e))?;
        }
    }
    let dir = args.path.display().to_string();
    let build = lang.build_command();
    let wasm = scaffold::wasm_path(lang, &name);
    // The commands run in the project's directory, after `cd`.
    let result = json!({
        "created": dir,
        "lang": lang.name(),
        "files": files.iter().map(|(rel, _, _)| rel).collect::<Vec<_>>(),
        "cd": format!("cd {}", shell_word(&dir)),
        "build": build,
        "check": format!("tickbox check {wasm} --allow-mutations"),
        "test": "tickbox test scenarios",
        "wasm": format!("{dir}/{wasm}"),
    });
    // A person at a terminal gets sentences; a script (or --json) JSON.
    use std::io::IsTerminal;
    if args.json || !std::io::stdout().is_terminal() {
        return super::emit(&result, false);
    }
    let step = |key: &str| result[key].as_str().unwrap_or_default().to_string();
    let text = format!(
        "Created a {} Tick in {dir} ({} files).\n\nGo to it:\n  {}\nBuild it:\n  {}\n\
         Check it:\n  {}\nRun its scenario:\n  {}",
        step("lang"),
        files.len(),
        step("cd"),
        step("build"),
        step("check"),
        step("test"),
    );
    super::emit_text(&text)
}

/// Writes a file that must not exist yet, never through a link.
fn write_new(path: &Path, text: &[u8]) -> std::io::Result<()> {
    use std::io::Write;
    use std::os::unix::fs::OpenOptionsExt;
    std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .custom_flags(libc::O_NOFOLLOW)
        .open(path)?
        .write_all(text)
}

#[cfg(test)]
mod tests {
    #[test]
    fn a_project_file_is_never_written_through_a_link_or_over_a_file() {
        let dir = std::env::temp_dir().join(format!("tickbox-new-write-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let victim = dir.join("victim");
        std::fs::write(&victim, "mine").unwrap();
        std::os::unix::fs::symlink(&victim, dir.join("Cargo.toml")).unwrap();
        assert!(super::write_new(&dir.join("Cargo.toml"), b"[package]").is_err());
        assert!(super::write_new(&victim, b"[package]").is_err());
        assert_eq!(std::fs::read_to_string(&victim).unwrap(), "mine");
        // Positive control: a new file is written.
        super::write_new(&dir.join("new.toml"), b"[package]").unwrap();
        assert_eq!(
            std::fs::read_to_string(dir.join("new.toml")).unwrap(),
            "[package]"
        );
        let _ = std::fs::remove_dir_all(&dir);
    }
}
