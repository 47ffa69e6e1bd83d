#!/usr/bin/env python3
"""Uses a kind that is not a lowercase dotted name (breaks the §5.4 SHOULD)."""
from base import Tick


class T(Tick):
    kind = "BaseTick"


T().run()
