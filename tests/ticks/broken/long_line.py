#!/usr/bin/env python3
"""Starts by writing a 9 MiB line (breaks §3.6: lines are at most 8 MiB); a host would end it there."""
from base import Tick


class T(Tick):
    def start(self):
        self.write("[" + "1," * (9 * 512 * 1024) + "1]\n")


T().run()
