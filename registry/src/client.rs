//! Pulling and pushing Ticks: the distribution API's manifests and blobs,
//! with the registry's auth, into and out of the [`Store`].
//!
//! A pull resolves a tag to a manifest digest once, from the manifest's own
//! bytes (a digest header that disagrees is refused), then fetches each
//! layer by the digest the manifest names, hashing as it streams. A
//! reference by digest whose blobs are all in the store needs no network.

use crate::auth::{query_escape, Basic, Challenge, Credentials};
use crate::error::RegistryError;
use crate::http::{lock, Answer, Deadline, Endpoint, Kind, Transport};
use crate::layout::{self, Descriptor, Manifest, TickArtifact};
use crate::limits::{
    BLOB_DEADLINE, MANIFEST_DEADLINE, MAX_MANIFEST_BYTES, MAX_REDIRECTS, MAX_TICK_MANIFEST_BYTES,
    MAX_TOKEN_BYTES, TOKEN_DEADLINE,
};
use crate::reference::{Digest, Reference, Target};
use crate::store::Store;
use bytes::Bytes;
use http::{HeaderMap, HeaderValue, Method, StatusCode};
use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::Mutex;
use std::time::Duration;

/// How a [`Registry`] is set up (the CLI fills it from flags and the
/// environment).
#[derive(Debug, Clone, Default)]
pub struct RegistryConfig {
    /// The store's directory.
    pub store: PathBuf,
    /// Registries (`HOST` or `HOST:PORT`) allowed plain HTTP besides
    /// loopback ones.
    pub insecure: Vec<String>,
    /// The Docker config file with credentials, if any.
    pub credentials: Option<PathBuf>,
    /// A PEM file of CA certificates trusted besides the webpki roots.
    pub ca_file: Option<PathBuf>,
    /// The total deadline of each kind of request (default: the
    /// `*_DEADLINE` constants of [`crate::limits`]).
    pub deadlines: Deadlines,
}

/// How long a whole request of each kind may take, from its first connect
/// to the last byte of its answer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Deadlines {
    pub token: Duration,
    pub manifest: Duration,
    pub blob: Duration,
}

impl Default for Deadlines {
    fn default() -> Deadlines {
        Deadlines {
            token: TOKEN_DEADLINE,
            manifest: MANIFEST_DEADLINE,
            blob: BLOB_DEADLINE,
        }
    }
}

impl Deadlines {
    /// A deadline for a request of `kind` starting now.
    pub fn start(&self, kind: Kind) -> Deadline {
        let limit = match kind {
            Kind::Token => self.token,
            Kind::Manifest => self.manifest,
            Kind::Blob => self.blob,
        };
        Deadline::new(kind, limit)
    }
}

/// A Tick pulled into the store.
#[derive(Debug, Clone)]
pub struct Pulled {
    /// The reference pinned to the manifest's digest.
    pub reference: Reference,
    /// The manifest's digest.
    pub manifest: Digest,
    /// The manifest itself.
    pub layout: Manifest,
    /// The wasm in the store.
    pub wasm: PathBuf,
    /// The wasm layer's digest (what the sandbox pins).
    pub wasm_digest: Digest,
    /// The requested grants (`NAME.tick.toml`), when the artifact has them.
    pub requested: Option<String>,
    /// Whether the registry was asked (false: all from the store).
    pub fetched: bool,
    /// Who signed the manifest, when a signers policy asked and a
    /// signature held (filled by whoever checks it).
    pub signer: Option<String>,
}

/// A registry client over a store.
pub struct Registry {
    transport: Transport,
    credentials: Credentials,
    store: Store,
    deadlines: Deadlines,
    /// Bearer tokens by (registry, repository, push?).
    tokens: Mutex<HashMap<(String, String, bool), String>>,
}

impl Registry {
    /// Sets up the client; opens (and checks) the store.
    pub fn new(config: RegistryConfig) -> Result<Registry, RegistryError> {
        let credentials = match &config.credentials {
            Some(p) => Credentials::read(p)?,
            None => Credentials::default(),
        };
        let roots = match &config.ca_file {
            Some(p) => read_ca(p)?,
            None => Vec::new(),
        };
        let transport = Transport::new(config.insecure.clone(), roots).map_err(|why| {
            RegistryError::Config {
                path: config.ca_file.clone().unwrap_or_default(),
                why,
            }
        })?;
        Ok(Registry {
            transport,
            credentials,
            store: Store::open(&config.store)?,
            deadlines: config.deadlines,
            tokens: Mutex::new(HashMap::new()),
        })
    }

    /// The store.
    pub fn store(&self) -> &Store {
        &self.store
    }

    /// The Tick at `reference`, from the store when pinned and complete
    /// there and `online` is false, else from the registry. The wasm layer
    /// may be at most `max_wasm` bytes (declared and streamed).
    pub async fn pull(
        &self,
        reference: &Reference,
        max_wasm: u64,
        online: bool,
    ) -> Result<Pulled, RegistryError> {
        if let Some(digest) = reference.digest() {
            if let Some(p) = self.stored(reference, &digest, max_wasm)? {
                return Ok(p);
            }
            if !online {
                return Err(RegistryError::NotStored {
                    reference: reference.to_string(),
                });
            }
        }
        let (manifest_bytes, digest) = self.fetch_manifest(reference).await?;
        let manifest = parse_manifest(reference, &manifest_bytes)?;
        let artifact = manifest.tick().map_err(|why| RegistryError::Layout {
            reference: reference.to_string(),
            why,
        })?;
        check_wasm_size(reference, &artifact, max_wasm)?;
        let pinned = reference.at(digest);
        let what = |d: &Descriptor| format!("{pinned}: the {} layer {}", d.media_type, d.digest);
        if let Some(req) = &artifact.requested {
            if req.size > MAX_TICK_MANIFEST_BYTES {
                return Err(RegistryError::TooLarge {
                    what: what(req),
                    bound: "the requested-grants bound",
                    max: MAX_TICK_MANIFEST_BYTES,
                });
            }
        }
        // Layers first, the manifest last: a manifest in the store means
        // its layers are there.
        let wasm = self
            .fetch_blob(&pinned, &artifact.wasm, max_wasm, &what(&artifact.wasm))
            .await?;
        if let Some(req) = &artifact.requested {
            self.fetch_blob(&pinned, req, MAX_TICK_MANIFEST_BYTES, &what(req))
                .await?;
        }
        self.store.put(&manifest_bytes)?;
        let requested = self.requested_text(&artifact)?;
        Ok(Pulled {
            reference: pinned,
            manifest: digest,
            layout: manifest,
            wasm,
            wasm_digest: artifact.wasm.digest,
            requested,
            fetched: true,
            signer: None,
        })
    }

    fn stored(
        &self,
        reference: &Reference,
        digest: &Digest,
        max_wasm: u64,
    ) -> Result<Option<Pulled>, RegistryError> {
        if !self.store.path(digest).exists() {
            return Ok(None);
        }
        let bytes = self.store.read(digest, MAX_MANIFEST_BYTES)?;
        let manifest = parse_manifest(reference, &bytes)?;
        let artifact = manifest.tick().map_err(|why| RegistryError::Layout {
            reference: reference.to_string(),
            why,
        })?;
        check_wasm_size(reference, &artifact, max_wasm)?;
        let complete = self.store.has(&artifact.wasm.digest, artifact.wasm.size)
            && artifact
                .requested
                .as_ref()
                .is_none_or(|r| self.store.has(&r.digest, r.size));
        if !complete {
            return Ok(None);
        }
        let requested = self.requested_text(&artifact)?;
        Ok(Some(Pulled {
            reference: reference.clone(),
            manifest: *digest,
            layout: manifest,
            wasm: self.store.path(&artifact.wasm.digest),
            wasm_digest: artifact.wasm.digest,
            requested,
            fetched: false,
            signer: None,
        }))
    }

    fn requested_text(&self, artifact: &TickArtifact) -> Result<Option<String>, RegistryError> {
        let Some(req) = &artifact.requested else {
            return Ok(None);
        };
        let bytes = self.store.read(&req.digest, MAX_TICK_MANIFEST_BYTES)?;
        String::from_utf8(bytes)
            .map(Some)
            .map_err(|_| RegistryError::Layout {
                reference: req.digest.to_string(),
                why: "the requested-grants layer is not UTF-8".into(),
            })
    }

    /// The manifest's bytes and their digest (checked against a pinned
    /// reference and any digest header).
    pub async fn fetch_manifest(
        &self,
        reference: &Reference,
    ) -> Result<(Vec<u8>, Digest), RegistryError> {
        let path = format!(
            "/v2/{}/manifests/{}",
            reference.repository(),
            reference.api_reference()
        );
        let mut headers = HeaderMap::new();
        headers.insert(
            http::header::ACCEPT,
            HeaderValue::from_static("application/vnd.oci.image.manifest.v1+json, application/vnd.oci.image.index.v1+json"),
        );
        let deadline = self.deadlines.start(Kind::Manifest);
        let answer = self
            .request(
                reference,
                false,
                Method::GET,
                &path,
                headers,
                Bytes::new(),
                &deadline,
            )
            .await?;
        if answer.status == StatusCode::NOT_FOUND {
            return Err(RegistryError::NotFound {
                reference: reference.to_string(),
            });
        }
        if !answer.status.is_success() {
            return Err(answer
                .into_error(format!("the manifest of {reference}"))
                .await);
        }
        let header = answer.header(http::header::HeaderName::from_static(
            "docker-content-digest",
        ));
        let bytes = answer
            .bytes(
                MAX_MANIFEST_BYTES,
                &format!("the manifest of {reference}"),
                "the manifest bound",
            )
            .await?;
        let actual = Digest::of(&bytes);
        let expected = match (
            reference.digest(),
            header.and_then(|h| h.parse::<Digest>().ok()),
        ) {
            (Some(pinned), _) => Some(pinned),
            (None, h) => h,
        };
        if let Some(expected) = expected.filter(|e| *e != actual) {
            return Err(RegistryError::DigestMismatch {
                what: format!("the manifest of {reference}"),
                expected,
                actual,
            });
        }
        Ok((bytes, actual))
    }

    /// Fetches a blob into the store (unless there), checking size and
    /// digest as it streams; returns its path.
    pub async fn fetch_blob(
        &self,
        reference: &Reference,
        d: &Descriptor,
        max: u64,
        what: &str,
    ) -> Result<PathBuf, RegistryError> {
        if self.store.has(&d.digest, d.size) {
            return Ok(self.store.path(&d.digest));
        }
        let too_large = |max| RegistryError::TooLarge {
            what: what.to_string(),
            bound: "its bound",
            max,
        };
        if d.size > max {
            return Err(too_large(max));
        }
        let path = format!("/v2/{}/blobs/{}", reference.repository(), d.digest);
        // One deadline for the request, its redirects and the whole body.
        let deadline = self.deadlines.start(Kind::Blob);
        let mut answer = self
            .request(
                reference,
                false,
                Method::GET,
                &path,
                HeaderMap::new(),
                Bytes::new(),
                &deadline,
            )
            .await?;
        // Blob stores may redirect (to a CDN); credentials stay behind.
        let mut hops = 0;
        while answer.status.is_redirection() {
            hops += 1;
            let location = answer
                .header(http::header::LOCATION)
                .filter(|_| hops <= MAX_REDIRECTS);
            let Some(location) = location else {
                return Err(answer.into_error(format!("{what} (redirects)")).await);
            };
            let origin = self.transport.endpoint(reference.authority());
            let (to, p) = self.resolve_url(&origin, &location)?;
            answer = self
                .transport
                .send(
                    &to,
                    Method::GET,
                    &p,
                    &HeaderMap::new(),
                    Bytes::new(),
                    &deadline,
                )
                .await?;
        }
        if !answer.status.is_success() {
            return Err(answer.into_error(what.to_string()).await);
        }
        if let Some(n) = answer.declared_length().filter(|&n| n != d.size) {
            return Err(RegistryError::Layout {
                reference: reference.to_string(),
                why: format!(
                    "the registry sends {n} bytes for its {} layer {}, which the manifest says is {} bytes",
                    d.media_type, d.digest, d.size
                ),
            });
        }
        let mut w = self.store.writer()?;
        while let Some(chunk) = answer.chunk().await? {
            if w.len() + chunk.len() as u64 > d.size.min(max) {
                return Err(if w.len() + chunk.len() as u64 > max {
                    too_large(max)
                } else {
                    RegistryError::Layout {
                        reference: reference.to_string(),
                        why: format!(
                            "the registry sent more than the {} bytes the manifest says its {} layer {} is",
                            d.size, d.media_type, d.digest
                        ),
                    }
                });
            }
            w.write(&chunk)?;
        }
        w.finish(&d.digest, d.size, what)
    }

    /// Pushes a Tick: the wasm, its requested grants, the config, then the
    /// manifest under the reference's tag. Returns the manifest's digest.
    pub async fn push(
        &self,
        reference: &Reference,
        wasm: &[u8],
        component: bool,
        requested: Option<&str>,
    ) -> Result<Digest, RegistryError> {
        let wasm_d = Descriptor::of(layout::WASM_LAYER_MEDIA_TYPE, wasm);
        let config = layout::wasm_config(&wasm_d, component);
        let config_d = Descriptor::of(layout::WASM_CONFIG_MEDIA_TYPE, &config);
        let req_d =
            requested.map(|r| Descriptor::of(layout::TICK_MANIFEST_MEDIA_TYPE, r.as_bytes()));
        self.upload(reference, &wasm_d, Bytes::copy_from_slice(wasm))
            .await?;
        if let (Some(d), Some(r)) = (&req_d, requested) {
            self.upload(reference, d, Bytes::copy_from_slice(r.as_bytes()))
                .await?;
        }
        self.upload(reference, &config_d, Bytes::from(config))
            .await?;
        let manifest = Manifest::for_tick(&config_d, &wasm_d, req_d.as_ref());
        self.put_manifest(reference, &manifest).await
    }

    /// Puts a manifest under the reference's tag (or digest); returns its
    /// digest.
    pub async fn put_manifest(
        &self,
        reference: &Reference,
        manifest: &Manifest,
    ) -> Result<Digest, RegistryError> {
        let bytes = serde_json::to_vec(manifest).expect("a manifest serializes");
        let digest = Digest::of(&bytes);
        let target = match reference.target() {
            Target::Tag(t) => t.clone(),
            Target::Digest(_) => digest.to_string(),
        };
        self.put_manifest_bytes(
            reference,
            &target,
            layout::MANIFEST_MEDIA_TYPE,
            &bytes,
            format!("putting the manifest of {reference}"),
        )
        .await?;
        self.store.put(&bytes)?;
        Ok(digest)
    }

    /// Uploads one blob (monolithic: POST, then PUT with the digest),
    /// unless the registry has it.
    pub async fn upload(
        &self,
        reference: &Reference,
        d: &Descriptor,
        bytes: Bytes,
    ) -> Result<(), RegistryError> {
        let repo = reference.repository();
        let deadline = self.deadlines.start(Kind::Blob);
        let head = self
            .request(
                reference,
                true,
                Method::HEAD,
                &format!("/v2/{repo}/blobs/{}", d.digest),
                HeaderMap::new(),
                Bytes::new(),
                &deadline,
            )
            .await?;
        if head.status.is_success() {
            return Ok(());
        }
        let start = self
            .request(
                reference,
                true,
                Method::POST,
                &format!("/v2/{repo}/blobs/uploads/"),
                HeaderMap::new(),
                Bytes::new(),
                &deadline,
            )
            .await?;
        if start.status != StatusCode::ACCEPTED {
            return Err(start
                .into_error(format!("starting an upload to {reference}"))
                .await);
        }
        let location =
            start
                .header(http::header::LOCATION)
                .ok_or_else(|| RegistryError::Layout {
                    reference: reference.to_string(),
                    why: "the registry started an upload without a Location".into(),
                })?;
        let origin = self.transport.endpoint(reference.authority());
        let (to, path) = self.resolve_url(&origin, &location)?;
        if (&to.host, to.port) != (&origin.host, origin.port) {
            return Err(RegistryError::Layout {
                reference: reference.to_string(),
                why: "the registry sent an upload location on another host".into(),
            });
        }
        let sep = if path.contains('?') { '&' } else { '?' };
        let path = format!("{path}{sep}digest={}", query_escape(&d.digest.to_string()));
        let mut headers = HeaderMap::new();
        headers.insert(
            http::header::CONTENT_TYPE,
            HeaderValue::from_static("application/octet-stream"),
        );
        let done = self
            .request(
                reference,
                true,
                Method::PUT,
                &path,
                headers,
                bytes,
                &deadline,
            )
            .await?;
        if done.status != StatusCode::CREATED {
            return Err(done
                .into_error(format!("uploading {} to {reference}", d.digest))
                .await);
        }
        Ok(())
    }

    /// Pushes a signature of the manifest `subject` (at `reference`'s
    /// repository) as a referrer: an artifact manifest whose subject is the
    /// Tick's manifest. Where the registry does not index referrers itself
    /// (no `OCI-Subject` in its answer), the tag-scheme index is updated
    /// too. Returns the signature manifest's digest.
    pub async fn push_signature(
        &self,
        reference: &Reference,
        subject: &Descriptor,
        signature: &[u8],
    ) -> Result<Digest, RegistryError> {
        use crate::signature::{EMPTY_CONFIG, EMPTY_CONFIG_TYPE, SIGNATURE_TYPE};
        let config = Descriptor::of(EMPTY_CONFIG_TYPE, EMPTY_CONFIG);
        let layer = Descriptor::of(SIGNATURE_TYPE, signature);
        self.upload(reference, &config, Bytes::from_static(EMPTY_CONFIG))
            .await?;
        self.upload(reference, &layer, Bytes::copy_from_slice(signature))
            .await?;
        let manifest = Manifest {
            schema_version: 2,
            media_type: Some(layout::MANIFEST_MEDIA_TYPE.into()),
            artifact_type: Some(SIGNATURE_TYPE.into()),
            config,
            layers: vec![layer],
            subject: Some(subject.clone()),
            annotations: Default::default(),
        };
        let bytes = serde_json::to_vec(&manifest).expect("a manifest serializes");
        let digest = Digest::of(&bytes);
        let answer = self
            .put_manifest_bytes(
                reference,
                &digest.to_string(),
                layout::MANIFEST_MEDIA_TYPE,
                &bytes,
                format!("putting a signature of {}", subject.digest),
            )
            .await?;
        let indexed = answer.headers.contains_key("oci-subject");
        self.store.put(&bytes)?;
        if !indexed {
            let mut entry = Descriptor::of(layout::MANIFEST_MEDIA_TYPE, &bytes);
            entry.artifact_type = Some(SIGNATURE_TYPE.into());
            let tag = reference.at(subject.digest);
            let mut index = self.referrers_by_tag(&tag).await?.unwrap_or_else(|| {
                serde_json::json!({
                    "schemaVersion": 2, "mediaType": layout::INDEX_MEDIA_TYPE, "manifests": []
                })
            });
            if let Some(list) = index["manifests"].as_array_mut() {
                list.push(serde_json::to_value(&entry).expect("a descriptor serializes"));
            }
            let body = serde_json::to_vec(&index).expect("an index serializes");
            self.put_manifest_bytes(
                reference,
                &subject.digest.tag_form(),
                layout::INDEX_MEDIA_TYPE,
                &body,
                format!("indexing a signature of {}", subject.digest),
            )
            .await?;
        }
        Ok(digest)
    }

    /// PUTs a manifest or index (`bytes`, of `media_type`) under `target`
    /// (a tag or digest) in the reference's repository; `what` names it in
    /// an error. The answer, when the registry took it.
    async fn put_manifest_bytes(
        &self,
        reference: &Reference,
        target: &str,
        media_type: &'static str,
        bytes: &[u8],
        what: String,
    ) -> Result<Answer, RegistryError> {
        let mut headers = HeaderMap::new();
        headers.insert(
            http::header::CONTENT_TYPE,
            HeaderValue::from_static(media_type),
        );
        let path = format!("/v2/{}/manifests/{target}", reference.repository());
        let deadline = self.deadlines.start(Kind::Manifest);
        let answer = self
            .request(
                reference,
                true,
                Method::PUT,
                &path,
                headers,
                Bytes::copy_from_slice(bytes),
                &deadline,
            )
            .await?;
        if !answer.status.is_success() {
            return Err(answer.into_error(what).await);
        }
        Ok(answer)
    }

    /// The tag-scheme referrers index of a pinned reference, if any.
    async fn referrers_by_tag(
        &self,
        pinned: &Reference,
    ) -> Result<Option<serde_json::Value>, RegistryError> {
        let Some(d) = pinned.digest() else {
            return Ok(None);
        };
        let path = format!("/v2/{}/manifests/{}", pinned.repository(), d.tag_form());
        let mut headers = HeaderMap::new();
        headers.insert(
            http::header::ACCEPT,
            HeaderValue::from_static(layout::INDEX_MEDIA_TYPE),
        );
        let deadline = self.deadlines.start(Kind::Manifest);
        let answer = self
            .request(
                pinned,
                false,
                Method::GET,
                &path,
                headers,
                Bytes::new(),
                &deadline,
            )
            .await?;
        if answer.status == StatusCode::NOT_FOUND {
            return Ok(None);
        }
        if !answer.status.is_success() {
            return Err(answer
                .into_error(format!("the signatures of {pinned}"))
                .await);
        }
        let body = answer
            .bytes(
                MAX_MANIFEST_BYTES,
                &format!("the signature index of {pinned}"),
                "the manifest bound",
            )
            .await?;
        Ok(Some(index_of(&body, pinned)?))
    }

    /// The signatures of a pinned reference's manifest (at most
    /// `MAX_SIGNATURES`), each checked to be a signature artifact whose
    /// subject is that manifest: from the registry's referrers API, else
    /// the tag scheme; from the store alone when `online` is false. What is
    /// fetched is kept in the store (by digest) for offline starts.
    pub async fn signatures(
        &self,
        pinned: &Reference,
        online: bool,
    ) -> Result<Vec<Vec<u8>>, RegistryError> {
        use crate::signature::SIGNATURE_TYPE;
        let Some(subject) = pinned.digest() else {
            return Ok(Vec::new());
        };
        let remembered = self
            .store
            .dir()
            .join(format!(".signatures-{}", subject.hex()));
        let list: Vec<Descriptor> = if online {
            let path = format!(
                "/v2/{}/referrers/{subject}?artifactType={}",
                pinned.repository(),
                query_escape(SIGNATURE_TYPE)
            );
            let deadline = self.deadlines.start(Kind::Manifest);
            let answer = self
                .request(
                    pinned,
                    false,
                    Method::GET,
                    &path,
                    HeaderMap::new(),
                    Bytes::new(),
                    &deadline,
                )
                .await?;
            let index = if answer.status.is_success() {
                let body = answer
                    .bytes(
                        MAX_MANIFEST_BYTES,
                        &format!("the signature index of {pinned}"),
                        "the manifest bound",
                    )
                    .await?;
                Some(index_of(&body, pinned)?)
            } else {
                drop(answer);
                self.referrers_by_tag(pinned).await?
            };
            let list: Vec<Descriptor> = match index {
                None => Vec::new(),
                Some(i) => serde_json::from_value(i["manifests"].clone()).map_err(|_| {
                    RegistryError::Malformed {
                        what: format!("the signature index of {pinned}"),
                        expected: "an OCI image index (its `manifests` a list of descriptors)",
                    }
                })?,
            };
            let signatures: Vec<Descriptor> = list
                .into_iter()
                .filter(|d| d.artifact_type.as_deref() == Some(SIGNATURE_TYPE))
                .collect();
            if signatures.len() > crate::limits::MAX_SIGNATURES {
                tracing::warn!(
                    reference = %pinned,
                    listed = signatures.len(),
                    "more signatures listed than MAX_SIGNATURES ({}): only the first are looked at",
                    crate::limits::MAX_SIGNATURES
                );
            }
            let list: Vec<Descriptor> = signatures
                .into_iter()
                .take(crate::limits::MAX_SIGNATURES)
                .collect();
            // Which signature manifests belong to this digest, for a start
            // without the network (each is checked again when read).
            let names: Vec<String> = list.iter().map(|d| d.digest.to_string()).collect();
            let _ = std::fs::write(&remembered, names.join("\n"));
            list
        } else {
            let text = std::fs::read_to_string(&remembered).unwrap_or_default();
            text.lines()
                .filter_map(|l| l.parse::<Digest>().ok())
                .take(crate::limits::MAX_SIGNATURES)
                .map(|digest| Descriptor {
                    media_type: layout::MANIFEST_MEDIA_TYPE.into(),
                    digest,
                    size: 0,
                    artifact_type: None,
                    annotations: Default::default(),
                })
                .collect()
        };
        let mut out = Vec::new();
        for d in list {
            let at = pinned.at(d.digest);
            let bytes = if self.store.path(&d.digest).exists() {
                self.store.read(&d.digest, MAX_MANIFEST_BYTES)?
            } else if online {
                let (bytes, _) = self.fetch_manifest(&at).await?;
                bytes
            } else {
                continue;
            };
            let Ok(m) = serde_json::from_slice::<Manifest>(&bytes) else {
                continue;
            };
            let ours = m.subject.as_ref().is_some_and(|s| s.digest == subject);
            let [layer] = m.layers.as_slice() else {
                continue;
            };
            if !ours
                || layer.media_type != SIGNATURE_TYPE
                || layer.size > crate::limits::MAX_SIGNATURE_BYTES
            {
                continue;
            }
            self.store.put(&bytes)?;
            let sig = if self.store.has(&layer.digest, layer.size) {
                self.store
                    .read(&layer.digest, crate::limits::MAX_SIGNATURE_BYTES)?
            } else if online {
                self.fetch_blob(
                    &at,
                    layer,
                    crate::limits::MAX_SIGNATURE_BYTES,
                    &format!("a signature of {subject}"),
                )
                .await?;
                self.store
                    .read(&layer.digest, crate::limits::MAX_SIGNATURE_BYTES)?
            } else {
                continue;
            };
            out.push(sig);
        }
        Ok(out)
    }

    /// Sends a request to the reference's registry with whatever auth it
    /// asks for: anonymous first, then Basic or a bearer token (cached per
    /// repository and access) on a 401, once; all of it by `deadline`.
    #[allow(clippy::too_many_arguments)]
    pub(crate) async fn request(
        &self,
        reference: &Reference,
        push: bool,
        method: Method,
        path: &str,
        headers: HeaderMap,
        body: Bytes,
        deadline: &Deadline,
    ) -> Result<Answer, RegistryError> {
        let to = self.transport.endpoint(reference.authority());
        // Credentials and tokens by the registry as dialed (a Docker config
        // names registries the way they are reached).
        let registry = reference.authority().to_string();
        let key = (registry.clone(), reference.repository().to_string(), push);
        let cached = lock(&self.tokens).get(&key).cloned();
        let send = |auth: Option<String>| {
            let mut h = headers.clone();
            if let Some(a) = auth.and_then(|a| HeaderValue::from_str(&a).ok()) {
                h.insert(http::header::AUTHORIZATION, a);
            }
            let (to, method, body) = (to.clone(), method.clone(), body.clone());
            async move {
                self.transport
                    .send(&to, method, path, &h, body, deadline)
                    .await
            }
        };
        let answer = send(cached.clone()).await?;
        if answer.status != StatusCode::UNAUTHORIZED {
            return Ok(answer);
        }
        let basic = self.credentials.for_registry(&registry).cloned();
        let unauthorized = |why: String| RegistryError::Unauthorized {
            host: registry.clone(),
            repository: reference.repository().to_string(),
            why,
        };
        let challenge = answer
            .header(http::header::WWW_AUTHENTICATE)
            .and_then(|v| Challenge::parse(&v));
        let auth = match challenge {
            Some(Challenge::Basic) => {
                let b = basic.ok_or_else(|| unauthorized(no_credentials(&registry)))?;
                b.header()
            }
            Some(Challenge::Bearer {
                realm,
                service,
                scope,
            }) => {
                let scope = scope.unwrap_or_else(|| {
                    format!(
                        "repository:{}:{}",
                        reference.repository(),
                        if push { "pull,push" } else { "pull" }
                    )
                });
                let within = self.deadlines.start(Kind::Token).min(*deadline);
                let token = self
                    .token(
                        &to,
                        &realm,
                        service.as_deref(),
                        &scope,
                        basic.as_ref(),
                        &within,
                    )
                    .await
                    .map_err(|e| match e {
                        RegistryError::Status {
                            status: 401 | 403, ..
                        } => unauthorized(no_credentials(&registry)),
                        e => e,
                    })?;
                format!("Bearer {token}")
            }
            None => {
                return Err(unauthorized(
                    "it asked for a kind of authentication tickbox does not speak".into(),
                ))
            }
        };
        let retried = send(Some(auth.clone())).await?;
        if retried.status == StatusCode::UNAUTHORIZED || retried.status == StatusCode::FORBIDDEN {
            return Err(unauthorized(
                if self.credentials.for_registry(&registry).is_some() {
                    "the credentials were refused".into()
                } else {
                    no_credentials(&registry)
                },
            ));
        }
        lock(&self.tokens).insert(key, auth);
        Ok(retried)
    }

    async fn token(
        &self,
        registry: &Endpoint,
        realm: &str,
        service: Option<&str>,
        scope: &str,
        basic: Option<&Basic>,
        deadline: &Deadline,
    ) -> Result<String, RegistryError> {
        let mut url = format!(
            "{realm}{}scope={}",
            if realm.contains('?') { '&' } else { '?' },
            query_escape(scope)
        );
        if let Some(s) = service {
            url.push_str(&format!("&service={}", query_escape(s)));
        }
        let (to, path) = self.resolve_url(registry, &url)?;
        let mut headers = HeaderMap::new();
        // Credentials go to the token service only over HTTPS or loopback
        // (resolve_url refused plain HTTP elsewhere).
        if let Some(b) = basic {
            if let Ok(v) = HeaderValue::from_str(&b.header()) {
                headers.insert(http::header::AUTHORIZATION, v);
            }
        }
        let answer = self
            .transport
            .send(&to, Method::GET, &path, &headers, Bytes::new(), deadline)
            .await?;
        if !answer.status.is_success() {
            return Err(answer.into_error("a token".into()).await);
        }
        let body = answer
            .bytes(MAX_TOKEN_BYTES, "a token answer", "the token bound")
            .await?;
        let v: serde_json::Value =
            serde_json::from_slice(&body).map_err(|_| RegistryError::Unauthorized {
                host: to.authority(),
                repository: String::new(),
                why: "the token service did not answer JSON".into(),
            })?;
        v.get("token")
            .or_else(|| v.get("access_token"))
            .and_then(|t| t.as_str())
            .filter(|t| t.bytes().all(|b| b.is_ascii_graphic()))
            .map(str::to_string)
            .ok_or_else(|| RegistryError::Unauthorized {
                host: to.authority(),
                repository: String::new(),
                why: "the token service sent no usable token".into(),
            })
    }

    /// An absolute or root-relative URL a registry sent, relative to `base`.
    fn resolve_url(&self, base: &Endpoint, url: &str) -> Result<(Endpoint, String), RegistryError> {
        if url.starts_with('/') {
            return Ok((base.clone(), url.to_string()));
        }
        let uri: http::Uri = url.parse().map_err(|_| {
            RegistryError::Reference(format!(
                "the registry sent a URL tickbox cannot use: {}",
                tickbox_protocol::text::escape(tickbox_protocol::text::truncate(url, 200))
            ))
        })?;
        self.transport.endpoint_of(&uri)
    }
}

fn no_credentials(registry: &str) -> String {
    format!(
        "no credentials for {registry} in the Docker config file (docker login, or DOCKER_CONFIG)"
    )
}

fn parse_manifest(reference: &Reference, bytes: &[u8]) -> Result<Manifest, RegistryError> {
    let layout = |why: String| RegistryError::Layout {
        reference: reference.to_string(),
        why,
    };
    let v: serde_json::Value = serde_json::from_slice(bytes)
        .map_err(|e| layout(format!("its manifest is not JSON: {e}")))?;
    if v.get("mediaType").and_then(|m| m.as_str()) == Some(layout::INDEX_MEDIA_TYPE)
        || v.get("manifests").is_some()
    {
        return Err(layout(
            "it is an image index; a Tick is one wasm artifact".into(),
        ));
    }
    serde_json::from_value(v).map_err(|e| {
        layout(format!(
            "its manifest is malformed: {}",
            tickbox_protocol::text::escape(&e.to_string())
        ))
    })
}

fn check_wasm_size(
    reference: &Reference,
    artifact: &TickArtifact,
    max: u64,
) -> Result<(), RegistryError> {
    if artifact.wasm.size > max {
        return Err(RegistryError::TooLarge {
            what: format!("{reference}: the wasm layer ({} bytes)", artifact.wasm.size),
            bound: "max_wasm_size",
            max,
        });
    }
    Ok(())
}

fn read_ca(
    path: &std::path::Path,
) -> Result<Vec<rustls::pki_types::CertificateDer<'static>>, RegistryError> {
    use rustls::pki_types::pem::PemObject;
    use std::io::Read;
    let bad = |why: String| RegistryError::Config {
        path: path.to_path_buf(),
        why,
    };
    let mut pem = Vec::new();
    std::fs::File::open(path)
        .and_then(|f| {
            f.take(crate::limits::MAX_CA_BYTES + 1)
                .read_to_end(&mut pem)
        })
        .map_err(|e| bad(e.to_string()))?;
    if pem.len() as u64 > crate::limits::MAX_CA_BYTES {
        return Err(bad(format!(
            "larger than {} bytes",
            crate::limits::MAX_CA_BYTES
        )));
    }
    let certs = rustls::pki_types::CertificateDer::pem_slice_iter(&pem)
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| bad(format!("not PEM certificates: {e}")))?;
    if certs.is_empty() {
        return Err(bad("no certificate in it".into()));
    }
    Ok(certs)
}

/// A signature index the registry sent, as JSON; one that is not refuses
/// the signatures (never read as "none").
fn index_of(body: &[u8], pinned: &Reference) -> Result<serde_json::Value, RegistryError> {
    serde_json::from_slice(body).map_err(|_| RegistryError::Malformed {
        what: format!("the signature index of {pinned}"),
        expected: "JSON",
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_signature_index_that_is_not_json_refuses_the_signatures() {
        let pinned: Reference = "oci://localhost:5000/t/c@sha256:0000000000000000000000000000000000000000000000000000000000000000"
            .parse()
            .unwrap();
        let e = index_of(b"<html>\x1b]2;owned\x07</html>", &pinned).unwrap_err();
        let shown = e.to_string();
        assert!(
            shown.contains("is not JSON") && !shown.contains("owned"),
            "{shown}"
        );
        // Positive control: an index is read.
        let index = index_of(br#"{"manifests": []}"#, &pinned).unwrap();
        assert_eq!(index["manifests"], serde_json::json!([]));
    }
}
