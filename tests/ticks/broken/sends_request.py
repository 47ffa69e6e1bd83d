#!/usr/bin/env python3
"""Sends a request to the host at startup (breaks §3.2)."""
from base import Tick


class T(Tick):
    def start(self):
        self.send({"id": 1, "method": "host/ping", "params": {}})


T().run()
