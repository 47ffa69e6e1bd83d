#!/usr/bin/env python3
"""Ignores SIGTERM (breaks the §4.5 guidance: exit promptly on SIGTERM)."""
import signal
from base import Tick


class T(Tick):
    def start(self):
        signal.signal(signal.SIGTERM, signal.SIG_IGN)


T().run()
