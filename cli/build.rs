//! Link flags for the `tickbox` executable.
//!
//! Release builds for Linux with glibc pack their relative relocations
//! (`-z pack-relative-relocs`, DT_RELR): the dynamic loader applies some
//! hundred thousand of them at every process start, and the packed table
//! is a few kilobytes instead of megabytes to read and page in (see
//! BENCHMARKS.md, "Whole-process start"). The executable then needs glibc
//! 2.36 or newer where it runs (the loader refuses it with "version
//! `GLIBC_ABI_DT_RELR' not found" on older ones) and a linker that knows
//! the flag (rust-lld, the default, or GNU ld 2.38+).
//! `TICKBOX_PACK_RELOCS=0` builds without it, `=1` with it in any profile.

fn main() {
    println!("cargo:rerun-if-env-changed=TICKBOX_PACK_RELOCS");
    let var = |k: &str| std::env::var(k).unwrap_or_default();
    let linux_gnu = var("CARGO_CFG_TARGET_OS") == "linux" && var("CARGO_CFG_TARGET_ENV") == "gnu";
    let wanted = match var("TICKBOX_PACK_RELOCS").as_str() {
        "0" => false,
        "1" => linux_gnu,
        _ => linux_gnu && var("PROFILE") == "release",
    };
    if wanted {
        println!("cargo:rustc-link-arg-bins=-Wl,-z,pack-relative-relocs");
    }
}
