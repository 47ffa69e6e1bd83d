//! The tool as CI runs it: a synthetic crate with a circle fails and names
//! it, the same crate without it passes, comments and literals are not
//! edges, usage errors exit 2, and this workspace has no circle.

use std::path::Path;
use std::process::Command;
use tickbox_test_support::{root, TempDir};

/// A crate named `demo` with these files, in a fresh temporary directory.
fn demo(files: &[(&str, &str)]) -> TempDir {
    let dir = TempDir::new("circles");
    let manifest = "[package]\nname = \"demo\"\nversion = \"0.0.0\"\nedition = \"2021\"\n";
    for (path, text) in [("Cargo.toml", manifest)].iter().chain(files) {
        let path = dir.path(path);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, text).unwrap();
    }
    dir
}

/// Exit code and stdout of the tool with these arguments.
fn circles(args: &[&std::ffi::OsStr]) -> (i32, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_tickbox-circles"))
        .args(args)
        .output()
        .expect("run tickbox-circles");
    (
        out.status.code().expect("exited"),
        String::from_utf8(out.stdout).unwrap(),
    )
}

fn check(dir: &Path) -> (i32, String) {
    circles(&[dir.as_os_str()])
}

const LIB: &str = "mod a;\nmod b;\n";
const A: &str = "use crate::b::B;\npub struct A(pub B);\n";

#[test]
fn a_circle_between_two_files_fails_and_is_named() {
    let c = demo(&[
        ("src/lib.rs", LIB),
        ("src/a.rs", A),
        ("src/b.rs", "pub struct B;\npub fn f(_: &crate::a::A) {}\n"),
    ]);
    assert_eq!(
        check(&c.0),
        (1, "demo: src/a.rs -> src/b.rs -> src/a.rs\n".into())
    );
}

#[test]
fn the_same_crate_without_the_back_reference_passes() {
    let c = demo(&[
        ("src/lib.rs", LIB),
        ("src/a.rs", A),
        ("src/b.rs", "pub struct B;\npub fn f(_: &B) {}\n"),
    ]);
    assert_eq!(check(&c.0), (0, String::new()));
}

#[test]
fn comments_and_strings_naming_the_other_file_are_not_edges() {
    let b = r###"
//! Used by crate::a::A.
pub struct B;
// use crate::a::A;
/* crate::a::A /* nested */ super::a::A */
/// [`crate::a::A`]
pub const NAME: &str = "crate::a::A";
pub const RAW: &str = r#"use crate::a::A; "quoted""#;
pub const QUOTE: char = '"';
pub fn f<'a>(x: &'a str) -> &'a str { x }
"###;
    let c = demo(&[("src/lib.rs", LIB), ("src/a.rs", A), ("src/b.rs", b)]);
    assert_eq!(check(&c.0), (0, String::new()));
}

#[test]
fn a_path_through_a_re_export_reaches_the_file_that_defines_it() {
    let c = demo(&[
        ("src/lib.rs", "mod a;\nmod b;\npub use a::A;\n"),
        ("src/a.rs", A),
        ("src/b.rs", "pub struct B;\npub fn f(_: &super::A) {}\n"),
    ]);
    assert_eq!(
        check(&c.0),
        (1, "demo: src/a.rs -> src/b.rs -> src/a.rs\n".into())
    );
}

#[test]
fn a_longer_circle_through_a_nested_module_is_one_line() {
    let c = demo(&[
        ("src/main.rs", "mod a;\nmod b;\nmod d;\nfn main() {}\n"),
        ("src/a.rs", "mod c;\n"),
        ("src/a/c.rs", "pub fn g() { crate::d::k() }\n"),
        ("src/d.rs", "pub fn k() { super::b::h() }\n"),
        ("src/b.rs", "use crate::a::c;\npub fn h() { c::g() }\n"),
    ]);
    assert_eq!(
        check(&c.0),
        (
            1,
            "demo: src/b.rs -> src/a/c.rs -> src/d.rs -> src/b.rs\n".into()
        )
    );
}

#[test]
fn a_parent_using_its_children_that_use_it_is_not_a_circle() {
    // The documented rule: naming one's own descendants is containment.
    let c = demo(&[
        (
            "src/lib.rs",
            "mod a;\npub fn helper() {}\npub fn run() { a::go() }\n",
        ),
        (
            "src/a.rs",
            "mod tests {\n    use super::*;\n}\npub fn go() { crate::helper() }\n",
        ),
    ]);
    assert_eq!(check(&c.0), (0, String::new()));
}

#[test]
fn usage_errors_exit_2() {
    assert_eq!(circles(&["--bogus".as_ref()]).0, 2);
    assert_eq!(circles(&["a".as_ref(), "b".as_ref()]).0, 2);
    assert_eq!(check(Path::new("/nonexistent/tickbox-circles")).0, 2);
    let missing = demo(&[("src/lib.rs", "mod gone;\n")]);
    assert_eq!(check(&missing.0).0, 2);
}

#[test]
fn this_workspace_has_no_import_circle() {
    let (code, out) = check(&root());
    assert_eq!(
        (code, out.as_str()),
        (0, ""),
        "import circles in the workspace"
    );
}
