#!/usr/bin/env python3
"""Answers a call to an unknown tool with -32000, "executed" (breaks §7.2: -32602)."""
from base import Tick, RpcError


class T(Tick):
    def validate(self, tool, args):
        if not hasattr(self, "tool_" + str(tool)):
            raise RpcError(-32000, "no such tool")
        super().validate(tool, args)


T().run()
