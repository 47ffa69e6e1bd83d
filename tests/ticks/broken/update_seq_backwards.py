#!/usr/bin/env python3
"""add emits two updates whose seq goes backwards (breaks §8.2). Needs --allow-mutations."""
from base import Tick


class T(Tick):
    def change(self, delta):
        with self.lock:
            self.value += delta
            self.seq += 2
            # As if two threads raced: the newer state goes out first.
            self.send({"method": "tick/update", "params": self.state()})
            self.send({"method": "tick/update", "params": {"seq": self.seq - 1, "data": self.data()}})


T().run()
