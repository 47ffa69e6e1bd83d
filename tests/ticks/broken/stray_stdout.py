#!/usr/bin/env python3
"""Prints a banner on stdout before speaking the protocol (breaks §3.1)."""
from base import Tick


class T(Tick):
    def start(self):
        self.write("Starting up...\n")


T().run()
