#!/usr/bin/env python3
"""peek is declared mutates: false but changes the state (breaks §5.6; heuristic, advisory)."""
from base import Tick


class T(Tick):
    def tool_peek(self, args):
        self.change(1)
        return {"value": self.value}


T().run()
