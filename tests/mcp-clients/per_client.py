"""Two MCP Python SDK clients at once against one `tickbox mcp --http`
serving the example counter: the first increments it by 2, then each reads
the counter's state.

    python3 per_client.py MODE URL_A URL_B

MODE is `legacy` (each client a `ClientSession` with `initialize`: an MCP
session of its own) or `default` (the SDK's `mcp.Client()`, which adopts
2026-07-28 and has no session: each URL carries the token of a named
client). Prints one JSON line, `{"a": VALUE, "b": VALUE}`: the value each
client read after the first one's increment. Run by
cli/tests/it/per_client.rs.
"""

import json
import sys
import warnings
from contextlib import AsyncExitStack

import anyio

URI = "tick://counter/state"


def value_of(read):
    dumped = read.model_dump(mode="json", by_alias=True, exclude_none=True)
    return json.loads(dumped["contents"][0]["text"])["data"]["value"]


async def legacy(stack, url):
    from mcp import ClientSession
    from mcp.client.streamable_http import streamable_http_client

    streams = await stack.enter_async_context(streamable_http_client(url))
    session = await stack.enter_async_context(ClientSession(streams[0], streams[1]))
    await session.initialize()
    return session


async def default(stack, url):
    from mcp import Client

    return await stack.enter_async_context(Client(url))


async def run(mode, url_a, url_b):
    open_client = legacy if mode == "legacy" else default
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        async with AsyncExitStack() as stack:
            a = await open_client(stack, url_a)
            b = await open_client(stack, url_b)
            called = await a.call_tool("increment", {"amount": 2})
            if called.is_error:
                sys.exit(f"the increment failed: {called}")
            seen = {
                "a": value_of(await a.read_resource(URI)),
                "b": value_of(await b.read_resource(URI)),
            }
    print(json.dumps(seen), flush=True)


def main():
    if len(sys.argv) != 4 or sys.argv[1] not in ("legacy", "default"):
        sys.exit("usage: per_client.py legacy|default URL_A URL_B")
    anyio.run(run, *sys.argv[1:])


if __name__ == "__main__":
    main()
