//! JSON-RPC error codes and what each says about whether a call had an effect (§3.4).

/// Invalid JSON was received by the Tick.
pub const PARSE_ERROR: i64 = -32700;
/// The request was not a valid request object.
pub const INVALID_REQUEST: i64 = -32600;
/// The method is not known to the Tick.
pub const METHOD_NOT_FOUND: i64 = -32601;
/// Unknown tool, or args that do not match its schema.
pub const INVALID_PARAMS: i64 = -32602;
/// The call's revision is not the Tick's current catalog revision.
pub const REVISION_MISMATCH: i64 = -32004;
/// The Tick failed internally (JSON-RPC's reserved code); counts as executed.
pub const INTERNAL_ERROR: i64 = -32603;
/// The tool failed after starting and may have had partial effects.
pub const TOOL_FAILED: i64 = -32000;

/// Whether an error with this code means the call may have had an effect.
///
/// Only the five "not executed" codes promise that nothing happened; every
/// other code, -32000 and any Tick-defined one, is treated as executed, because
/// assuming no effect where there was one is the dangerous mistake.
pub fn executed(code: i64) -> bool {
    !matches!(
        code,
        PARSE_ERROR | INVALID_REQUEST | METHOD_NOT_FOUND | INVALID_PARAMS | REVISION_MISMATCH
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_the_five_reserved_codes_are_not_executed() {
        for code in [
            PARSE_ERROR,
            INVALID_REQUEST,
            METHOD_NOT_FOUND,
            INVALID_PARAMS,
            REVISION_MISMATCH,
        ] {
            assert!(!executed(code), "{code} must be not executed");
        }
        for code in [TOOL_FAILED, -32001, -32603, 0, 1, 42] {
            assert!(executed(code), "{code} must count as executed");
        }
    }
}
