#!/usr/bin/env python3
"""Answers every tick/read twice (breaks §3.2: exactly once)."""
from base import Tick


class T(Tick):
    def respond(self, rid, method, params):
        super().respond(rid, method, params)
        if method == "tick/read":
            super().respond(rid, method, params)


T().run()
