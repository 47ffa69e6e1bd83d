//! What a `.wasm` file is: a component or a core module, by its header.

use super::*;

/// Which kind of wasm binary a file holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum WasmKind {
    /// A WASI 0.2 component.
    Component,
    /// A WASI preview-1 core module.
    Module,
}

impl From<WasmKind> for tickbox_host::TickKind {
    fn from(kind: WasmKind) -> Self {
        match kind {
            WasmKind::Component => tickbox_host::TickKind::WasmComponent,
            WasmKind::Module => tickbox_host::TickKind::WasmModule,
        }
    }
}

/// Tells a component from a core module by the 8-byte header.
pub fn detect(bytes: &[u8]) -> Option<WasmKind> {
    match bytes.get(..8)? {
        [0, b'a', b's', b'm', 1, 0, 0, 0] => Some(WasmKind::Module),
        [0, b'a', b's', b'm', _, _, 1, 0] => Some(WasmKind::Component),
        _ => None,
    }
}

/// The kind of wasm a file holds, from its first 8 bytes only.
pub fn detect_file(path: &Path) -> Option<WasmKind> {
    read_kind(path).ok().flatten()
}

/// The kind of wasm a file holds by its header: None for a file too short
/// or without a wasm header; Err when it cannot be opened or read.
pub fn read_kind(path: &Path) -> std::io::Result<Option<WasmKind>> {
    let mut head = [0u8; 8];
    let mut file = std::fs::File::open(path)?;
    match std::io::Read::read_exact(&mut file, &mut head) {
        Ok(()) => Ok(detect(&head)),
        Err(e) if e.kind() == std::io::ErrorKind::UnexpectedEof => Ok(None),
        Err(e) => Err(e),
    }
}

/// Whether a path names a wasm Tick (by extension or header).
pub fn is_wasm_path(path: &Path) -> bool {
    path.extension().is_some_and(|e| e == "wasm") || detect_file(path).is_some()
}
