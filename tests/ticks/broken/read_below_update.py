#!/usr/bin/env python3
"""tick/read serves a stale cache, below the seq of the update just sent (breaks §6.3). Needs --allow-mutations."""
from base import Tick


class T(Tick):
    cached = {"seq": 0, "data": {"value": 0}}

    def read(self):
        return self.cached


T().run()
