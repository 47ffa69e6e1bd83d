#!/usr/bin/env python3
"""add emits a tick/update with null data (breaks §8.2). Needs --allow-mutations."""
from base import Tick


class T(Tick):
    def change(self, delta):
        with self.lock:
            self.value += delta
            self.seq += 1
            self.send({"method": "tick/update", "params": {"seq": self.seq, "data": None}})


T().run()
