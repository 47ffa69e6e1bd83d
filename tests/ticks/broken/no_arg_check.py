#!/usr/bin/env python3
"""Trusts the host and never checks args against the schema (breaks §7.2: -32602)."""
from base import Tick, RpcError


class T(Tick):
    def validate(self, tool, args):
        if not hasattr(self, "tool_" + str(tool)):
            raise RpcError(-32602, "unknown tool")

    def tool_echo(self, args):
        return {"text": args.get("text")}


T().run()
