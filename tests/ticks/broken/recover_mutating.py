#!/usr/bin/env python3
"""Names a mutating tool as recover_with (breaks §5.3 / §9)."""
from base import Tick


class T(Tick):
    def descriptor(self):
        return {**super().descriptor(), "recover_with": "add"}


T().run()
