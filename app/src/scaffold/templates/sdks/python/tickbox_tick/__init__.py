"""tickbox_tick: write a Tick in Python.

    class Counter(Tick):
        kind, title, description = "example.counter", "Counter", "..."
        @tool("Add an integer.", mutates=True)
        def increment(self, ctx, amount: int): ...
    Run = main(Counter, __name__)

`main` makes the componentize-py entry point (`wasi:cli/run`) when the
module is imported by a component, and runs the Tick natively when the
module is run as a script (`python3 app.py`), from the same source.
"""

from . import platform
from .dispatch import (INTERNAL_ERROR, INVALID_PARAMS, REVISION_MISMATCH, TOOL_FAILED, Ctx,
                       Dispatcher, Rejected, Tick, ToolError, tool)
from .draw import box
from .schema import Len, Range

__all__ = ["Ctx", "Dispatcher", "Len", "Range", "Rejected", "Tick", "ToolError", "box", "main",
           "tool", "INTERNAL_ERROR", "INVALID_PARAMS", "REVISION_MISMATCH", "TOOL_FAILED"]


def main(tick_class, module_name):
    """Runs `tick_class()` natively when `module_name` is "__main__";
    otherwise returns the component's `Run` class (None outside a
    componentize-py build, where there is nothing to export)."""
    if module_name == "__main__":
        platform.native(tick_class())
        return None
    try:
        from wit_world import exports
    except ImportError:
        return None

    class Run(exports.Run):
        def run(self) -> None:
            platform.wasm(tick_class())

    return Run
