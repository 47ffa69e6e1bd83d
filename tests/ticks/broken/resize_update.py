#!/usr/bin/env python3
"""Emits a tick/update when its terminal is resized (breaks §8.3)."""
import signal
from base import Tick


class T(Tick):
    def start(self):
        signal.signal(signal.SIGWINCH, lambda *_: self.change(0))


T().run()
