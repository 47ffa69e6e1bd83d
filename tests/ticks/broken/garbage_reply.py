#!/usr/bin/env python3
"""Answers unparseable lines with an error under a made-up id 0 (breaks §3.2)."""
from base import Tick


class T(Tick):
    def on_garbage(self, line):
        self.send({"id": 0, "error": {"code": -32700, "message": "parse error"}})


T().run()
