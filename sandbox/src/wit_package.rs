//! Tests of the WIT package (`wit/`, copied to `sandbox/wit/`): it parses
//! with `wit-parser` (the parser wasmtime's `bindgen!`, wit-bindgen and the
//! componentize tools build on), every world resolves, WASI is vendored at
//! one version, and the import check's table is exactly what the `tick`
//! world imports.

use super::imports::{TERMINAL_INTERFACE, WASI_INTERFACES, WASI_VENDORED};
use std::collections::BTreeSet;
use std::path::Path;
use wit_parser::{PackageId, Resolve, WorldId, WorldItem};

fn package() -> (Resolve, PackageId) {
    let mut resolve = Resolve::new();
    let (pkg, _) = resolve
        .push_dir(Path::new(env!("CARGO_MANIFEST_DIR")).join("wit"))
        .unwrap_or_else(|e| panic!("wit/ does not parse: {e:#}"));
    (resolve, pkg)
}

fn world(resolve: &Resolve, pkg: PackageId, name: &str) -> WorldId {
    resolve
        .select_world(&[pkg], Some(name))
        .unwrap_or_else(|e| panic!("world {name} does not resolve: {e:#}"))
}

/// The interface names (`ns:pkg/iface@version`) a world imports or exports.
fn names<'a>(
    resolve: &Resolve,
    items: impl Iterator<Item = (&'a wit_parser::WorldKey, &'a WorldItem)>,
) -> BTreeSet<String> {
    items
        .filter(|(_, item)| matches!(item, WorldItem::Interface { .. }))
        .map(|(key, _)| resolve.name_world_key(key))
        .collect()
}

fn versioned(ifaces: &[&str], version: &str) -> BTreeSet<String> {
    ifaces.iter().map(|i| format!("{i}@{version}")).collect()
}

#[test]
fn the_package_is_tickbox_terminal_0_1_0() {
    let (resolve, pkg) = package();
    assert_eq!(
        resolve.packages[pkg].name.to_string(),
        "tickbox:terminal@0.1.0"
    );
    for w in ["tick", "tick-terminal", "tick-host"] {
        world(&resolve, pkg, w);
    }
}

/// `tick` is a complete WASI 0.2 command plus the terminal: what
/// componentize-py/-js build a Tick from.
#[test]
fn the_tick_world_is_a_wasi_command_with_the_terminal() {
    let (resolve, pkg) = package();
    let w = &resolve.worlds[world(&resolve, pkg, "tick")];
    let mut expected = versioned(WASI_INTERFACES, WASI_VENDORED);
    expected.insert(format!("{TERMINAL_INTERFACE}@0.1.0"));
    assert_eq!(names(&resolve, w.imports.iter()), expected);
    assert_eq!(
        names(&resolve, w.exports.iter()),
        versioned(&["wasi:cli/run"], WASI_VENDORED)
    );
}

/// `tick-terminal` (the Rust SDK's) and `tick-host` (the host's) add only
/// the terminal and the wasi:io types it uses.
#[test]
fn the_terminal_worlds_import_only_the_terminal_and_its_io_types() {
    let (resolve, pkg) = package();
    let mut expected = versioned(
        &["wasi:io/error", "wasi:io/poll", "wasi:io/streams"],
        WASI_VENDORED,
    );
    expected.insert(format!("{TERMINAL_INTERFACE}@0.1.0"));
    for name in ["tick-terminal", "tick-host"] {
        let w = &resolve.worlds[world(&resolve, pkg, name)];
        assert_eq!(names(&resolve, w.imports.iter()), expected, "{name}");
        assert!(w.exports.is_empty(), "{name} exports nothing");
    }
}

/// Every vendored WASI package has the one version (two versions of a
/// package is what made componentize-py generate duplicate modules).
#[test]
fn wasi_is_vendored_at_one_version() {
    let (resolve, _) = package();
    let wasi: BTreeSet<String> = resolve
        .packages
        .iter()
        .filter(|(_, p)| p.name.namespace == "wasi")
        .map(|(_, p)| p.name.to_string())
        .collect();
    let expected: BTreeSet<String> = ["cli", "clocks", "filesystem", "io", "random", "sockets"]
        .iter()
        .map(|p| format!("wasi:{p}@{WASI_VENDORED}"))
        .collect();
    assert_eq!(wasi, expected);
}
