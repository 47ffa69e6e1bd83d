#!/usr/bin/env python3
"""Declares protocol 2 (breaks §4.3)."""
from base import Tick


class T(Tick):
    def descriptor(self):
        return {**super().descriptor(), "protocol": 2}


T().run()
