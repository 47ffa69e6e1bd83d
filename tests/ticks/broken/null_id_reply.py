#!/usr/bin/env python3
"""Answers unparseable lines with a JSON-RPC parse error carrying id: null (breaks §3.2)."""
from base import Tick


class T(Tick):
    def on_garbage(self, line):
        self.send({"id": None, "error": {"code": -32700, "message": "parse error"}})


T().run()
