#!/usr/bin/env python3
"""Counts tick/describe calls in its state (breaks §4.4: describe is free of side effects)."""
from base import Tick


class T(Tick):
    def describe(self):
        self.change(0)
        return self.descriptor()


T().run()
