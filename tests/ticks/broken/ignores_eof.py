#!/usr/bin/env python3
"""Keeps running after stdin EOF (breaks the §4.5 SHOULD: exit on EOF)."""
import time
from base import Tick


class T(Tick):
    def on_eof(self):
        while True:
            time.sleep(1)


T().run()
