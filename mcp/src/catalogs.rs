//! The catalog cache, which lets a shared Tick start on its first use
//! (`start = "on-first-use"` in a ticks file) and still be listed before.
//!
//! A Tick's catalog (its `tick/describe` result) is what `tools/list` and
//! `resources/list` show. An instance of the same wasm bytes with the same
//! grants, run by the same tickbox speaking the same Tick protocol,
//! describes itself the same way, so the catalog one run saw can stand in
//! for the Tick in the next run's listings until a client uses it.
//!
//! - **The key** is a SHA-256 of the Tick's wasm digest (the very bytes
//!   the host read at its start), its grants and bounds in force (with the
//!   environment's values, which the serialized grants leave out), its
//!   arguments, the Tick protocol version and tickbox's version, then
//!   `-catalog`. Anything else (another build of the Tick, a changed
//!   grant, a new tickbox) is another key, and misses.
//! - **Where**: beside the compiled code, in the compile cache's private
//!   directory, under its MAC key ([`tickbox_sandbox::cache`]): an entry
//!   is trusted only if tickbox wrote it for this key, read with
//!   `O_NOFOLLOW` and at most
//!   [`MAX_CACHED_CATALOG_BYTES`].
//!   It is then parsed and validated as the Tick's own answer would be.
//! - **Failing closed**: a missing, tampered, oversized, unreadable or
//!   invalid entry is ignored (with a warning naming the rule when it was
//!   there but refused) and the Tick starts with the host as any other
//!   does; its catalog is then written, so the next start is lazy.
//! - **The bytes stay the same**: a lazy Tick's launcher is pinned to the
//!   digest its key was made of, so its first use refuses to start bytes
//!   that changed since the host started, rather than run a Tick whose
//!   catalog the clients never saw.
//!
//! A native Tick always starts with the host: its catalog depends on more
//! than tickbox could digest (its interpreter, the files it loads, its
//! environment), so nothing could key it.

use crate::limits::MAX_CACHED_CATALOG_BYTES;
use std::sync::Arc;
use std::time::Duration;
use tickbox_host::session::{Session, SessionConfig};
use tickbox_protocol::Descriptor;
use tickbox_sandbox::{LaunchError, Launcher};

/// What a key's name ends with: what the entry holds.
const KIND: &str = "catalog";

/// A shared Tick started on its first use: how to start it, and the
/// cached catalog that lists it until then.
#[derive(Clone)]
pub struct OnFirstUse {
    /// Starts the instance, pinned to the bytes the catalog was keyed by.
    pub launcher: Launcher,
    /// The instance's session timeouts.
    pub config: SessionConfig,
    /// An instance with no request and no subscription this long is
    /// stopped ([`INSTANCE_IDLE_TIMEOUT`](crate::limits::INSTANCE_IDLE_TIMEOUT)
    /// by default); its state is lost.
    pub idle_timeout: Duration,
    /// The catalog from the cache.
    pub(crate) catalog: Arc<Descriptor>,
    /// Its cache key, to write the started Tick's catalog when it differs.
    pub(crate) key: String,
}

/// The cache key of the catalog of `launcher`'s Tick and the digest it was
/// made of; None for a native Tick, without a compile cache, or when the
/// file cannot be read.
fn key_of(launcher: &Launcher) -> Option<(String, tickbox_sandbox::WasmDigest)> {
    let Launcher::Wasm { engine, spec, .. } = launcher else {
        return None;
    };
    let cache = engine.cache()?;
    let digest = match tickbox_sandbox::consent::digest_file(&spec.path) {
        Ok(d) => d,
        Err(e) => {
            tracing::warn!(path = %spec.path.display(), "cannot read the Tick to key its catalog: {e}");
            return None;
        }
    };
    let grants = serde_json::to_vec(&spec.grants).ok()?;
    let env = serde_json::to_vec(&spec.grants.env).ok()?;
    let args = serde_json::to_vec(&spec.args).ok()?;
    let protocol = tickbox_protocol::limits::PROTOCOL_VERSION.to_le_bytes();
    let digest_text = digest.to_string();
    let key = cache.key_of(
        KIND,
        &[digest_text.as_bytes(), &grants, &env, &args, &protocol],
    );
    Some((key, digest))
}

impl OnFirstUse {
    /// `launcher`'s Tick left to its first use, when the cache holds its
    /// catalog (see the module docs); None when it must start now.
    fn cached(
        launcher: &Launcher,
        (key, digest): (String, tickbox_sandbox::WasmDigest),
        config: SessionConfig,
        idle_timeout: Duration,
    ) -> Option<OnFirstUse> {
        let Launcher::Wasm { engine, .. } = launcher else {
            return None;
        };
        let entry = engine.cache()?.get_within(&key, MAX_CACHED_CATALOG_BYTES)?;
        let catalog = serde_json::from_slice(entry.code())
            .map_err(|e| e.to_string())
            .and_then(|raw| Descriptor::parse(raw).map_err(|e| e.to_string()));
        let catalog = match catalog {
            Ok(d) => Arc::new(d),
            Err(why) => {
                tracing::warn!(
                    entry = %key,
                    "cached catalog refused (not a valid tick/describe result: {why}); the Tick \
                     starts with the host"
                );
                return None;
            }
        };
        Some(OnFirstUse {
            launcher: launcher.clone().pinned(digest),
            config,
            idle_timeout,
            catalog,
            key,
        })
    }

    /// The audit stream its instances are recorded in.
    pub(crate) fn audit(&self) -> Option<&tickbox_telemetry::audit::Audit> {
        match &self.launcher {
            Launcher::Wasm { spec, .. } => spec.audit.as_ref(),
            Launcher::Native(_) => None,
        }
    }

    /// Writes `catalog` as the started Tick's, when it is not the cached one.
    pub(crate) fn refresh(&self, catalog: &Descriptor) {
        if catalog.raw != self.catalog.raw {
            // A cache write (and the eviction it may run over the whole
            // cache directory) is file work: off the async workers.
            let (launcher, key, catalog) =
                (self.launcher.clone(), self.key.clone(), catalog.clone());
            tokio::task::spawn_blocking(move || put(&launcher, &key, &catalog));
        }
    }
}

fn put(launcher: &Launcher, key: &str, catalog: &Descriptor) {
    let Launcher::Wasm { engine, .. } = launcher else {
        return;
    };
    let (Some(cache), Ok(bytes)) = (engine.cache(), serde_json::to_vec(&catalog.raw)) else {
        return;
    };
    if bytes.len() as u64 <= MAX_CACHED_CATALOG_BYTES {
        cache.put(key, &bytes);
    }
}

/// `launcher`'s Tick as a `start = "on-first-use"` entry asks: left to
/// its first use when its catalog is cached (no session, and how to start
/// it); else started and initialized now, its catalog then cached for the
/// next start (the session, kept as the instance until idle, and how to
/// start the next one).
pub(crate) async fn start_or_defer(
    name: &str,
    launcher: &Launcher,
    config: SessionConfig,
    idle_timeout: Duration,
) -> Result<(Option<Arc<Session>>, Option<OnFirstUse>), LaunchError> {
    // The file is read and hashed once: the key serves the lookup, the
    // catalog kept after a start, and the pin.
    let keyed = key_of(launcher);
    if let Some(lazy) = keyed
        .clone()
        .and_then(|k| OnFirstUse::cached(launcher, k, config.clone(), idle_timeout))
    {
        tracing::info!(tick = %name, "its catalog is cached: it starts on its first use");
        return Ok((None, Some(lazy)));
    }
    let session = launcher.open(config.clone()).await?;
    // Kept, so that the next start can be lazy.
    if let (Some((key, _)), Some(d)) = (&keyed, session.descriptor()) {
        put(launcher, key, &d);
    }
    let lazy = keyed.and_then(|(key, digest)| {
        Some(OnFirstUse {
            launcher: launcher.clone().pinned(digest),
            config,
            idle_timeout,
            catalog: session.descriptor()?,
            key,
        })
    });
    Ok((Some(Arc::new(session)), lazy))
}
