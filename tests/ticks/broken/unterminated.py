#!/usr/bin/env python3
"""Writes a final message without its newline when stdin closes (breaks §3.1)."""
from base import Tick


class T(Tick):
    def on_eof(self):
        self.write(self.line({"method": "tick/update", "params": {"seq": self.seq + 1, "data": self.data()}}).rstrip("\n"))


T().run()
