//! Link flags for the `tickbox` executable.
//!
//! `TICKBOX_PACK_RELOCS=1` packs the executable's relative relocations
//! (`-z pack-relative-relocs`, DT_RELR) on Linux with glibc: the dynamic
//! loader applies some hundred thousand of them at every process start,
//! and the packed table is a few kilobytes instead of megabytes to read
//! and page in (see BENCHMARKS.md, "Whole-process start"). It is off by
//! default: the measured gain was within the noise (27 fewer page faults
//! a start), while the executable then needs glibc 2.36 or newer where it
//! runs (older loaders refuse it: "version `GLIBC_ABI_DT_RELR' not
//! found") and a linker that knows the flag (rust-lld or GNU ld 2.38+), a
//! trap for `cargo install` on an older system.

fn main() {
    println!("cargo:rerun-if-env-changed=TICKBOX_PACK_RELOCS");
    let var = |k: &str| std::env::var(k).unwrap_or_default();
    let linux_gnu = var("CARGO_CFG_TARGET_OS") == "linux" && var("CARGO_CFG_TARGET_ENV") == "gnu";
    let wanted = linux_gnu && var("TICKBOX_PACK_RELOCS") == "1";
    if wanted {
        println!("cargo:rustc-link-arg-bins=-Wl,-z,pack-relative-relocs");
    }
}
