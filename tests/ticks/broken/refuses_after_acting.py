#!/usr/bin/env python3
"""add changes the state, then answers -32602 as if nothing happened (breaks §3.4). Needs --allow-mutations."""
from base import Tick, RpcError


class T(Tick):
    def tool_add(self, args):
        self.change(args["amount"])
        raise RpcError(-32602, "amount out of range")


T().run()
