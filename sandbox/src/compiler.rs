//! The two compilers: which one made a piece of code. A leaf that the
//! compile worker, the cache and the engine's tiers all name.

/// Which of wasmtime's compilers made a piece of code.
///
/// **Winch** is wasmtime's baseline compiler: one pass per function, no
/// optimisation, several times faster to compile than **Cranelift**, whose
/// code runs faster. The two make code for differently configured engines
/// (Winch uses its own calling convention), so each has its own `Engine`
/// and its own cache entries. Both get the same configuration otherwise:
/// epoch interruption, the component model, and the same limits at run time,
/// so what a guest can do does not depend on the compiler.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Compiler {
    /// The optimizing compiler (what a Tick runs with in the long run).
    Cranelift,
    /// The baseline compiler (a fast first start).
    Winch,
}

impl Compiler {
    /// The name used on the command line, in cache keys and in `cache ls`.
    pub fn name(self) -> &'static str {
        match self {
            Compiler::Cranelift => "cranelift",
            Compiler::Winch => "winch",
        }
    }

    /// The compiler named `s`, if any.
    pub fn parse(s: &str) -> Option<Compiler> {
        match s {
            "cranelift" => Some(Compiler::Cranelift),
            "winch" => Some(Compiler::Winch),
            _ => None,
        }
    }
}

impl std::fmt::Display for Compiler {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}
