#!/usr/bin/env python3
"""Answers unknown methods with -32600 instead of -32601 (breaks §3.4)."""
from base import Tick, RpcError


class T(Tick):
    def unknown_method(self, method):
        raise RpcError(-32600, "invalid request")


T().run()
