//! The WIT files a Tick's own build needs, carried in the binary so that
//! the CLI's new-project command can write a Python or JavaScript project that builds on its
//! own: `terminal.wit` (`tickbox:terminal`, the `tick` world) and the WASI
//! 0.2 packages it resolves against, exactly as vendored in `wit/`.

/// `(path in a project, contents)`, all under `wit/`: enough to resolve the
/// `tick` world.
pub const TICK_WORLD: &[(&str, &str)] = &[
    ("wit/terminal.wit", include_str!("../wit/terminal.wit")),
    (
        "wit/deps/cli/cli.wit",
        include_str!("../wit/deps/cli/cli.wit"),
    ),
    (
        "wit/deps/clocks/clocks.wit",
        include_str!("../wit/deps/clocks/clocks.wit"),
    ),
    (
        "wit/deps/filesystem/filesystem.wit",
        include_str!("../wit/deps/filesystem/filesystem.wit"),
    ),
    ("wit/deps/io/io.wit", include_str!("../wit/deps/io/io.wit")),
    (
        "wit/deps/random/random.wit",
        include_str!("../wit/deps/random/random.wit"),
    ),
    (
        "wit/deps/sockets/sockets.wit",
        include_str!("../wit/deps/sockets/sockets.wit"),
    ),
];

#[cfg(test)]
mod tests {
    use super::TICK_WORLD;

    /// Written out alone, the files resolve the `tick` world: nothing a
    /// project's build needs is missing.
    #[test]
    fn the_files_resolve_the_tick_world_on_their_own() {
        let dir = std::env::temp_dir().join(format!("tickbox-wit-files-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        for (rel, text) in TICK_WORLD {
            let p = dir.join(rel);
            std::fs::create_dir_all(p.parent().unwrap()).unwrap();
            std::fs::write(&p, text).unwrap();
        }
        let mut resolve = wit_parser::Resolve::new();
        let (pkg, _) = resolve.push_dir(dir.join("wit")).expect("the files parse");
        let found = resolve.select_world(&[pkg], Some("tick"));
        let _ = std::fs::remove_dir_all(&dir);
        found.expect("the tick world resolves");
    }
}
