//! What the embedding program tells the application layer once: where
//! things are kept and how the engine runs. The CLI fills it from its
//! environment (`TICKBOX_*`); a library never reads the environment.

use std::path::PathBuf;
use tickbox_host::backend::native::Hygiene;
use tickbox_registry::policy::Source;
use tickbox_sandbox::{CompilePolicy, GuestYield};

/// Process-level settings for an [`App`](crate::App).
#[derive(Clone, Debug, Default)]
pub struct Settings {
    /// The compile cache's directory (`None`: no cache).
    pub cache_dir: Option<PathBuf>,
    /// The compile cache's bound, in bytes.
    pub cache_max_bytes: u64,
    /// How a guest yields to the host's other work.
    pub guest_yield: GuestYield,
    /// Where approvals of manifests are kept (`None`: nowhere, so a Tick
    /// whose manifest asks for grants cannot be approved).
    pub trust_dir: Option<PathBuf>,
    /// How Ticks without cached optimized code are compiled, or why the
    /// caller's setting is unusable (reported when the engine is made).
    pub compile_policy: Option<Result<CompilePolicy, String>>,
    /// Where pulled Ticks are kept.
    pub store_dir: Option<PathBuf>,
    /// A Docker config with registry credentials.
    pub docker_config: Option<PathBuf>,
    /// A signers policy named outside the request (the CLI: its
    /// environment), used when the request names none.
    pub signers: Option<Source>,
    /// The signers policy used when nobody names one, if it exists.
    pub default_signers_file: Option<PathBuf>,
    /// The compiler worker: an executable that compiles under the Tick's
    /// compile bounds (`None`: compile in this process).
    pub compile_worker: Option<PathBuf>,
    /// The size at which an audit file is rotated.
    pub audit_max_bytes: u64,
    /// The bytes of audit lines one session's own doings may write.
    pub audit_session_max_bytes: u64,
    /// How this process hosts native Ticks and compile workers: its
    /// subreaper bookkeeping, cgroups, the open-file limit Ticks start with
    /// (`tickbox_sandbox::ProcessHygiene::native` where the embedder
    /// installed it; default: none of it, so nothing sweeps).
    pub native: Hygiene,
}
