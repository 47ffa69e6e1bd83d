//! The artifact layout: the CNCF Wasm OCI artifact (an OCI image manifest,
//! config media type `application/vnd.wasm.config.v0+json`, one
//! `application/wasm` layer), which other tools push and pull too, plus at
//! most one layer of tickbox's own: the Tick's requested grants
//! (`NAME.tick.toml`), which tools that do not know it skip.

use crate::reference::Digest;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// An OCI image manifest.
pub const MANIFEST_MEDIA_TYPE: &str = "application/vnd.oci.image.manifest.v1+json";
/// An OCI image index (refused: a Tick is one artifact).
pub const INDEX_MEDIA_TYPE: &str = "application/vnd.oci.image.index.v1+json";
/// The wasm config blob.
pub const WASM_CONFIG_MEDIA_TYPE: &str = "application/vnd.wasm.config.v0+json";
/// The wasm layer.
pub const WASM_LAYER_MEDIA_TYPE: &str = "application/wasm";
/// The requested-grants layer.
pub const TICK_MANIFEST_MEDIA_TYPE: &str = "application/vnd.tickbox.manifest.v1+toml";

/// A content descriptor.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct Descriptor {
    pub media_type: String,
    pub digest: Digest,
    pub size: u64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub artifact_type: Option<String>,
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub annotations: BTreeMap<String, String>,
}

impl Descriptor {
    /// Describes `bytes` as `media_type`.
    pub fn of(media_type: &str, bytes: &[u8]) -> Descriptor {
        Descriptor {
            media_type: media_type.into(),
            digest: Digest::of(bytes),
            size: bytes.len() as u64,
            artifact_type: None,
            annotations: BTreeMap::new(),
        }
    }
}

/// An image manifest (also what a signature artifact is).
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Manifest {
    pub schema_version: u32,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub media_type: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub artifact_type: Option<String>,
    pub config: Descriptor,
    #[serde(default)]
    pub layers: Vec<Descriptor>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub subject: Option<Descriptor>,
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub annotations: BTreeMap<String, String>,
}

/// What a Tick artifact holds, checked.
#[derive(Debug, Clone)]
pub struct TickArtifact {
    pub wasm: Descriptor,
    pub requested: Option<Descriptor>,
}

impl Manifest {
    /// Checks the manifest is a Tick artifact: the wasm config, exactly
    /// one wasm layer, at most one requested-grants layer, nothing else.
    pub fn tick(&self) -> Result<TickArtifact, String> {
        if self.schema_version != 2 {
            return Err(format!("schemaVersion is {}, not 2", self.schema_version));
        }
        match self.media_type.as_deref() {
            None | Some(MANIFEST_MEDIA_TYPE) => {}
            Some(other) => {
                return Err(format!(
                    "its media type is {}, not {MANIFEST_MEDIA_TYPE}",
                    tickbox_protocol::text::escape(other)
                ))
            }
        }
        if self.config.media_type != WASM_CONFIG_MEDIA_TYPE {
            return Err(format!(
                "its config has media type {}, not {WASM_CONFIG_MEDIA_TYPE}",
                tickbox_protocol::text::escape(&self.config.media_type)
            ));
        }
        let mut wasm = None;
        let mut requested = None;
        for layer in &self.layers {
            let slot = match layer.media_type.as_str() {
                WASM_LAYER_MEDIA_TYPE => &mut wasm,
                TICK_MANIFEST_MEDIA_TYPE => &mut requested,
                other => {
                    return Err(format!(
                        "a layer has media type {}; a Tick artifact has one {WASM_LAYER_MEDIA_TYPE} layer (and at most one {TICK_MANIFEST_MEDIA_TYPE})",
                        tickbox_protocol::text::escape(other)
                    ))
                }
            };
            if slot.replace(layer.clone()).is_some() {
                return Err(format!("it has more than one {} layer", layer.media_type));
            }
        }
        let wasm = wasm.ok_or_else(|| format!("it has no {WASM_LAYER_MEDIA_TYPE} layer"))?;
        Ok(TickArtifact { wasm, requested })
    }

    /// The manifest tickbox pushes for a Tick.
    pub fn for_tick(
        config: &Descriptor,
        wasm: &Descriptor,
        requested: Option<&Descriptor>,
    ) -> Manifest {
        let mut layers = vec![wasm.clone()];
        layers.extend(requested.cloned());
        Manifest {
            schema_version: 2,
            media_type: Some(MANIFEST_MEDIA_TYPE.into()),
            artifact_type: None,
            config: config.clone(),
            layers,
            subject: None,
            annotations: BTreeMap::new(),
        }
    }
}

/// The wasm config blob tickbox pushes: architecture `wasm`, the WASI
/// version as the OS, the layer's digest (the CNCF layout's fields that
/// need no parsing of the wasm).
pub fn wasm_config(wasm: &Descriptor, component: bool) -> Vec<u8> {
    serde_json::to_vec(&serde_json::json!({
        "architecture": "wasm",
        "os": if component { "wasip2" } else { "wasip1" },
        "layerDigests": [wasm.digest.to_string()],
    }))
    .expect("a JSON value serializes")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn manifest(layers: &[(&str, &[u8])]) -> Manifest {
        let w = Descriptor::of(WASM_LAYER_MEDIA_TYPE, b"\0asm");
        let config = Descriptor::of(WASM_CONFIG_MEDIA_TYPE, &wasm_config(&w, true));
        let mut m = Manifest::for_tick(&config, &w, None);
        m.layers = layers.iter().map(|(t, b)| Descriptor::of(t, b)).collect();
        m
    }

    #[test]
    fn only_the_tick_layout_is_a_tick() {
        assert!(manifest(&[(WASM_LAYER_MEDIA_TYPE, b"a")]).tick().is_ok());
        let both = manifest(&[
            (WASM_LAYER_MEDIA_TYPE, b"a"),
            (TICK_MANIFEST_MEDIA_TYPE, b"b"),
        ]);
        assert!(both.tick().unwrap().requested.is_some());
        for (layers, rule) in [
            (&[][..], "no application/wasm layer"),
            (
                &[
                    (WASM_LAYER_MEDIA_TYPE, &b"a"[..]),
                    (WASM_LAYER_MEDIA_TYPE, b"b"),
                ][..],
                "more than one",
            ),
            (
                &[
                    (WASM_LAYER_MEDIA_TYPE, &b"a"[..]),
                    ("application/vnd.oci.image.layer.v1.tar", b"b"),
                ][..],
                "media type",
            ),
        ] {
            let e = manifest(layers).tick().unwrap_err();
            assert!(e.contains(rule), "{e}");
        }
        let mut docker = manifest(&[(WASM_LAYER_MEDIA_TYPE, b"a")]);
        docker.config.media_type = "application/vnd.oci.image.config.v1+json".into();
        assert!(docker.tick().unwrap_err().contains("config"));
    }
}
