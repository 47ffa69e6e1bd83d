//! What a wasm Tick may import, checked before anything is compiled.
//!
//! Compiling a large component (componentize-py and componentize-js output
//! is 14–19 MB) takes tens of seconds; linking happens only afterwards. A
//! component that imports something tickbox does not provide (componentize-js
//! imports `wasi:http` by default) would be refused only then. [`check`] reads
//! the import names from the binary first, without validating or compiling:
//! it walks the top-level sections and skips nested modules and code bodies
//! by their length, so its cost grows with the number of sections and
//! imports, not with the size of the code.
//!
//! What is provided:
//! - **components**: the interfaces of `wasi:cli/imports@0.2.12` (WASI 0.2:
//!   cli, clocks, filesystem, io, random, sockets; see [`WASI_INTERFACES`])
//!   at any `0.2.x`, which wasmtime links as semver-compatible,
//!   `wasi:http/types` and `wasi:http/outgoing-handler` at any `0.2.x`
//!   ([`HTTP_INTERFACES`]: always linked, each request checked against the
//!   Tick's `allow_http` origins, so componentize-js output starts without
//!   a grant), and `tickbox:terminal/terminal` at any `0.1.x`;
//! - **core modules** (wasip1): the `wasi_snapshot_preview1` functions the
//!   engine's preview-1 linker defines, read from that linker.
//!
//! The same pass also looks for the entry point tickbox calls: a component
//! must export `wasi:cli/run@0.2.x` (a WASI command, such as the `tick`
//! world), a module `_start`; a library-style component or a reactor module
//! is refused as well, before compiling.
//!
//! A name that passes may still fail to link (a function added to a later
//! 0.2.x, a type mismatch); wasmtime reports that after compiling. A binary
//! the reader cannot parse passes too: the compiler validates it fully and
//! says what is wrong.

use super::WasmKind;
use std::collections::HashSet;
use wasmparser::{Chunk, Parser, Payload};

/// The WASI 0.2 interfaces tickbox links for components: exactly the
/// imports of the vendored `wasi:cli/imports@0.2.12` world (a unit test
/// compares this list with `wit/`).
pub const WASI_INTERFACES: &[&str] = &[
    "wasi:cli/environment",
    "wasi:cli/exit",
    "wasi:cli/stderr",
    "wasi:cli/stdin",
    "wasi:cli/stdout",
    "wasi:cli/terminal-input",
    "wasi:cli/terminal-output",
    "wasi:cli/terminal-stderr",
    "wasi:cli/terminal-stdin",
    "wasi:cli/terminal-stdout",
    "wasi:clocks/monotonic-clock",
    "wasi:clocks/wall-clock",
    "wasi:filesystem/preopens",
    "wasi:filesystem/types",
    "wasi:io/error",
    "wasi:io/poll",
    "wasi:io/streams",
    "wasi:random/insecure",
    "wasi:random/insecure-seed",
    "wasi:random/random",
    "wasi:sockets/instance-network",
    "wasi:sockets/ip-name-lookup",
    "wasi:sockets/network",
    "wasi:sockets/tcp",
    "wasi:sockets/tcp-create-socket",
    "wasi:sockets/udp",
    "wasi:sockets/udp-create-socket",
];

/// The `wasi:http` interfaces tickbox links for components (requests are
/// refused unless their origin is granted; see `super::http`).
pub const HTTP_INTERFACES: &[&str] = &["wasi:http/outgoing-handler", "wasi:http/types"];

/// The version prefix of the WASI interfaces accepted (semver-compatible
/// with the vendored 0.2.12).
pub const WASI_VERSION: &str = "0.2";
/// The vendored WASI version, named in messages.
pub const WASI_VENDORED: &str = "0.2.12";
/// tickbox's own interface and the version prefix accepted.
pub const TERMINAL_INTERFACE: &str = "tickbox:terminal/terminal";
/// The `tickbox:terminal` versions accepted (semver-compatible with 0.1.0).
pub const TERMINAL_VERSION: &str = "0.1";
/// The only module a wasip1 core module may import from.
pub const PREVIEW1_MODULE: &str = "wasi_snapshot_preview1";

/// Why a Tick is refused before compiling.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Refusal {
    /// It imports something tickbox does not provide.
    Import(Unsupported),
    /// It lacks the entry point tickbox starts it by (`wasi:cli/run` for a
    /// component, `_start` for a module).
    NoEntry,
}

/// An import tickbox does not provide.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Unsupported {
    /// The import as the binary names it (`wasi:http/types@0.2.3`,
    /// `env::foo`).
    pub import: String,
    /// What tickbox offers instead, and what to do; one sentence.
    pub offer: String,
}

/// The `wasi_snapshot_preview1` functions a core module may import.
#[derive(Debug, Default)]
pub struct Preview1 {
    names: HashSet<String>,
}

impl Preview1 {
    /// The functions of `module` among `defined` (module, name) pairs,
    /// typically from `wasmtime::Linker::iter`.
    pub fn new<'a>(defined: impl IntoIterator<Item = (&'a str, &'a str)>) -> Preview1 {
        Preview1 {
            names: defined
                .into_iter()
                .filter(|(m, _)| *m == PREVIEW1_MODULE)
                .map(|(_, n)| n.to_string())
                .collect(),
        }
    }
}

/// The component export tickbox calls (any `0.2.x`).
pub const RUN_EXPORT: &str = "wasi:cli/run@0.2.";
/// The module export tickbox calls.
pub const START_EXPORT: &str = "_start";

/// Checks every top-level import of `wasm` (of `kind`) against what tickbox
/// provides (the first unsupported one is returned), and that the entry
/// point is exported.
pub fn check(wasm: &[u8], kind: WasmKind, p1: &Preview1) -> Result<(), Refusal> {
    let mut parser = Parser::new(0);
    let mut data = wasm;
    let mut entry = false;
    loop {
        // A parse error ends the scan: the compiler reports it precisely.
        let Ok(Chunk::Parsed { consumed, payload }) = parser.parse(data, true) else {
            return Ok(());
        };
        data = &data[consumed..];
        match payload {
            Payload::ComponentImportSection(reader) if kind == WasmKind::Component => {
                for import in reader.into_iter().flatten() {
                    component_import(import.name.name).map_err(Refusal::Import)?;
                }
            }
            Payload::ComponentExportSection(reader) if kind == WasmKind::Component => {
                entry |= reader
                    .into_iter()
                    .flatten()
                    .any(|e| e.name.name.starts_with(RUN_EXPORT));
            }
            Payload::ExportSection(reader) if kind == WasmKind::Module => {
                entry |= reader
                    .into_iter()
                    .flatten()
                    .any(|e| e.name == START_EXPORT && e.kind == wasmparser::ExternalKind::Func);
            }
            Payload::ImportSection(reader) if kind == WasmKind::Module => {
                for import in reader.into_imports().flatten() {
                    module_import(import.module, import.name, p1).map_err(Refusal::Import)?;
                }
            }
            // Nested modules and components are the component's own
            // business: what the host must provide is the top level. Their
            // bytes are skipped, not parsed.
            Payload::ModuleSection {
                unchecked_range, ..
            }
            | Payload::ComponentSection {
                unchecked_range, ..
            } => {
                let Some(rest) = data.get(unchecked_range.len()..) else {
                    return Ok(());
                };
                data = rest;
            }
            Payload::CodeSectionStart { size, .. } => {
                let Some(rest) = data.get(size as usize..) else {
                    return Ok(());
                };
                parser.skip_section();
                data = rest;
            }
            // Only a binary read to its end can be said to lack the entry.
            Payload::End(_) if entry => return Ok(()),
            Payload::End(_) => return Err(Refusal::NoEntry),
            _ => {}
        }
    }
}

/// One component import name: `ns:pkg/iface@version`, or anything else.
fn component_import(name: &str) -> Result<(), Unsupported> {
    let (iface, version) = name.split_once('@').unwrap_or((name, ""));
    let compatible = |prefix: &str| {
        version
            .strip_prefix(prefix)
            .is_some_and(|rest| rest.starts_with('.'))
    };
    let offer = |hint: &str| {
        Unsupported {
        import: name.to_string(),
        offer: format!(
            "tickbox provides WASI {WASI_VERSION}.x (wasi:cli, clocks, filesystem, io, random, \
             sockets; vendored {WASI_VENDORED} in wit/), wasi:http/outgoing-handler {WASI_VERSION}.x and \
             {TERMINAL_INTERFACE}@{TERMINAL_VERSION}.0{hint}"
        ),
    }
    };
    if WASI_INTERFACES.contains(&iface) || HTTP_INTERFACES.contains(&iface) {
        return if compatible(WASI_VERSION) {
            Ok(())
        } else {
            Err(offer(": build against the WIT in tickbox's wit/ directory"))
        };
    }
    if iface == TERMINAL_INTERFACE {
        return if compatible(TERMINAL_VERSION) {
            Ok(())
        } else {
            Err(offer(": build against the WIT in tickbox's wit/ directory"))
        };
    }
    if iface.starts_with("wasi:http/") {
        return Err(offer(
            "; of wasi:http only outgoing requests (a Tick serves no HTTP): build a WASI command, \
             not a wasi:http/proxy",
        ));
    }
    Err(offer(""))
}

/// One core module import.
fn module_import(module: &str, name: &str, p1: &Preview1) -> Result<(), Unsupported> {
    if module == PREVIEW1_MODULE && p1.names.contains(name) {
        return Ok(());
    }
    let hint = if module == PREVIEW1_MODULE {
        "that function is not part of WASI preview 1 as wasmtime implements it"
    } else if module == "env" {
        "an undefined symbol becomes an `env` import: link its definition into the module"
    } else {
        "rebuild for wasm32-wasip1 against wasi-libc or your language's WASI target"
    };
    Err(Unsupported {
        import: format!("{module}::{name}"),
        offer: format!(
            "a wasip1 module may import only the {} `{PREVIEW1_MODULE}` functions; {hint}",
            p1.names.len()
        ),
    })
}

#[cfg(test)]
mod tests {
    //! The binaries are encoded by hand (a few bytes each): a wasm encoder
    //! as a dev-dependency would switch on features in wasmtime's own tree
    //! and rebuild wasmtime for tests.
    use super::*;

    fn leb(mut n: usize, out: &mut Vec<u8>) {
        loop {
            let byte = (n & 0x7f) as u8;
            n >>= 7;
            if n == 0 {
                out.push(byte);
                return;
            }
            out.push(byte | 0x80);
        }
    }

    fn string(s: &str, out: &mut Vec<u8>) {
        leb(s.len(), out);
        out.extend_from_slice(s.as_bytes());
    }

    fn section(id: u8, content: &[u8], out: &mut Vec<u8>) {
        out.push(id);
        leb(content.len(), out);
        out.extend_from_slice(content);
    }

    fn p1() -> Preview1 {
        Preview1::new([
            (PREVIEW1_MODULE, "fd_write"),
            (PREVIEW1_MODULE, "proc_exit"),
        ])
    }

    /// A component importing each of `names` as an (empty) instance type,
    /// after an optional nested core module, exporting `wasi:cli/run`.
    fn component(names: &[&str], nested: Option<&[u8]>) -> Vec<u8> {
        let mut c = component_without_run(names, nested);
        // (export "wasi:cli/run@0.2.0" (instance 0))
        let mut export = vec![1, 0x00];
        string("wasi:cli/run@0.2.0", &mut export);
        export.extend_from_slice(&[0x05, 0x00, 0x00]);
        section(11, &export, &mut c);
        c
    }

    fn component_without_run(names: &[&str], nested: Option<&[u8]>) -> Vec<u8> {
        let mut c = b"\0asm\x0d\0\x01\0".to_vec();
        if let Some(m) = nested {
            section(1, m, &mut c);
        }
        // type 0: (instance)
        section(7, &[1, 0x42, 0], &mut c);
        let mut imports = Vec::new();
        leb(names.len(), &mut imports);
        for n in names {
            imports.push(0x00);
            string(n, &mut imports);
            imports.extend_from_slice(&[0x05, 0x00]); // (instance (type 0))
        }
        section(10, &imports, &mut c);
        c
    }

    /// A core module importing each (module, name) as a `[] -> []`
    /// function and exporting the first as `_start`.
    fn module(imports_of: &[(&str, &str)]) -> Vec<u8> {
        let mut m = module_without_start(imports_of);
        let mut export = vec![1];
        string("_start", &mut export);
        export.extend_from_slice(&[0x00, 0x00]); // (func 0)
        section(7, &export, &mut m);
        m
    }

    fn module_without_start(imports_of: &[(&str, &str)]) -> Vec<u8> {
        let mut m = b"\0asm\x01\0\0\0".to_vec();
        section(1, &[1, 0x60, 0, 0], &mut m);
        let mut imports = Vec::new();
        leb(imports_of.len(), &mut imports);
        for (module, name) in imports_of {
            string(module, &mut imports);
            string(name, &mut imports);
            imports.extend_from_slice(&[0x00, 0x00]); // (func (type 0))
        }
        section(2, &imports, &mut m);
        m
    }

    fn refused(r: Result<(), Refusal>) -> Unsupported {
        match r {
            Err(Refusal::Import(u)) => u,
            other => panic!("expected an import refusal: {other:?}"),
        }
    }

    #[test]
    fn a_tick_without_its_entry_point_is_refused() {
        let names = ["wasi:io/poll@0.2.12"];
        assert_eq!(
            check(
                &component_without_run(&names, None),
                WasmKind::Component,
                &p1()
            ),
            Err(Refusal::NoEntry)
        );
        assert_eq!(
            check(
                &module_without_start(&[(PREVIEW1_MODULE, "fd_write")]),
                WasmKind::Module,
                &p1()
            ),
            Err(Refusal::NoEntry)
        );
    }

    #[test]
    fn a_component_with_wasi_and_the_terminal_passes() {
        let wasm = component(
            &[
                "wasi:io/poll@0.2.0",
                "wasi:cli/stdin@0.2.12",
                "wasi:sockets/tcp@0.2.3",
                "tickbox:terminal/terminal@0.1.0",
            ],
            None,
        );
        assert_eq!(check(&wasm, WasmKind::Component, &p1()), Ok(()));
    }

    /// componentize-js imports these by default: they are linked (each
    /// request is checked against the Tick's origin grants).
    #[test]
    fn outgoing_wasi_http_passes_and_the_rest_of_wasi_http_is_refused() {
        let wasm = component(
            &[
                "wasi:io/poll@0.2.3",
                "wasi:http/types@0.2.3",
                "wasi:http/outgoing-handler@0.2.3",
            ],
            None,
        );
        assert_eq!(check(&wasm, WasmKind::Component, &p1()), Ok(()));
        let wasm = component(&["wasi:http/outgoing-handler@0.3.0"], None);
        let err = refused(check(&wasm, WasmKind::Component, &p1()));
        assert_eq!(err.import, "wasi:http/outgoing-handler@0.3.0");
        let wasm = component(&["wasi:http/incoming-handler@0.2.3"], None);
        let err = refused(check(&wasm, WasmKind::Component, &p1()));
        assert_eq!(err.import, "wasi:http/incoming-handler@0.2.3");
        assert!(err.offer.contains("only outgoing requests"), "{err:?}");
        assert!(
            err.offer.contains("tickbox:terminal/terminal@0.1.0"),
            "{err:?}"
        );
    }

    #[test]
    fn other_versions_and_unknown_names_are_refused() {
        for name in [
            "wasi:cli/stdin@0.3.0",
            "wasi:cli/stdin",
            "wasi:cli/stdin@0.20.0",
            "tickbox:terminal/terminal@0.2.0",
            "wasi:keyvalue/store@0.2.0",
            "my-plugin",
        ] {
            let err = refused(check(&component(&[name], None), WasmKind::Component, &p1()));
            assert_eq!(err.import, name);
        }
    }

    /// Imports of a nested core module are not the host's business, and its
    /// bytes are skipped by length (here they would otherwise be refused).
    #[test]
    fn nested_modules_are_skipped() {
        let inner = module(&[("env", "whatever")]);
        let wasm = component(&["wasi:io/poll@0.2.12"], Some(&inner));
        assert_eq!(check(&wasm, WasmKind::Component, &p1()), Ok(()));
        let wasm = component(&["wasi:keyvalue/store@0.2.0"], Some(&inner));
        assert_eq!(
            refused(check(&wasm, WasmKind::Component, &p1())).import,
            "wasi:keyvalue/store@0.2.0"
        );
    }

    #[test]
    fn core_modules_may_import_only_preview1_functions() {
        let ok = module(&[
            (PREVIEW1_MODULE, "fd_write"),
            (PREVIEW1_MODULE, "proc_exit"),
        ]);
        assert_eq!(check(&ok, WasmKind::Module, &p1()), Ok(()));
        let err = refused(check(
            &module(&[(PREVIEW1_MODULE, "fd_write"), ("env", "draw")]),
            WasmKind::Module,
            &p1(),
        ));
        assert_eq!(err.import, "env::draw");
        assert!(err.offer.contains("link its definition"), "{err:?}");
        let err = refused(check(
            &module(&[(PREVIEW1_MODULE, "sock_open")]),
            WasmKind::Module,
            &p1(),
        ));
        assert_eq!(err.import, "wasi_snapshot_preview1::sock_open");
    }

    /// Garbage after a valid header is left to the compiler's validation.
    #[test]
    fn unparsable_binaries_pass_to_the_compiler() {
        let mut wasm = component(&[], None);
        wasm.extend_from_slice(&[0x0a, 0xff, 0xff, 0xff, 0xff, 0x0f]);
        assert_eq!(check(&wasm, WasmKind::Component, &p1()), Ok(()));
    }
}
