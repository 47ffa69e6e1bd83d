#!/usr/bin/env python3
"""Executes calls whatever their revision (breaks §7.2: -32004 without executing)."""
from base import Tick


class T(Tick):
    def check_revision(self, params):
        pass


T().run()
