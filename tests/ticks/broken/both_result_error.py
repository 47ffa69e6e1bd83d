#!/usr/bin/env python3
"""Answers unknown methods with both result and error (breaks §3.2)."""
from base import Tick


class T(Tick):
    def answer(self, rid, method, params):
        frame = super().answer(rid, method, params)
        if method.startswith("tick/"):
            return frame
        return {**frame, "result": None}


T().run()
