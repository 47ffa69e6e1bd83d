"""One MCP session through a load balancer, kept across a pause: the MCP
Python SDK's `ClientSession` (the `initialize` handshake, so the server
gives it an `Mcp-Session-Id`) against the example counter.

    python3 sticky_client.py URL N

Calls `increment` (amount 1) N times, printing `value V` after each; then
prints `paused` and waits for one line on stdin (the test drains and stops
the other host meanwhile); then calls it N more times, printing each value,
and `done`. Any failure ends the run with `FAIL what: why` on stderr and
exit 1. Run by mcp/tests/it/drain.rs.
"""

import sys
import warnings

import anyio

PATIENCE = 60


def fail(what, why):
    print(f"FAIL {what}: {why}", file=sys.stderr, flush=True)
    sys.exit(1)


async def increments(session, n):
    for _ in range(n):
        with anyio.fail_after(PATIENCE):
            r = await session.call_tool("increment", {"amount": 1})
        if r.is_error:
            fail("increment", r)
        value = (r.structured_content or {}).get("value")
        if not isinstance(value, int):
            fail("increment", r)
        print(f"value {value}", flush=True)


async def run(url, n):
    from mcp import ClientSession
    from mcp.client.streamable_http import streamable_http_client

    async with streamable_http_client(url) as streams:
        read, write = streams[0], streams[1]
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            async with ClientSession(read, write) as session:
                with anyio.fail_after(PATIENCE):
                    init = await session.initialize()
                if init.server_info.name != "tickbox":
                    fail("initialize", init)
                await increments(session, n)
                print("paused", flush=True)
                line = await anyio.to_thread.run_sync(sys.stdin.readline)
                if not line:
                    fail("pause", "stdin closed")
                await increments(session, n)
    print("done", flush=True)


def main():
    if len(sys.argv) != 3:
        sys.exit("usage: sticky_client.py URL N")
    anyio.run(run, sys.argv[1], int(sys.argv[2]))


if __name__ == "__main__":
    main()
