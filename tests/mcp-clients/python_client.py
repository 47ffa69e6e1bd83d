"""The MCP Python SDK (`mcp`, pinned in requirements.txt) against `tickbox mcp`
serving the example counter.

    python3 python_client.py MODE TRANSPORT TARGET...

MODE is `default` (the SDK's `mcp.Client()`, which opens with
`server/discover` and, against tickbox, adopts 2026-07-28) or `legacy` (a
`ClientSession` with the `initialize` handshake). TRANSPORT is `stdio`
(TARGET: the command that starts `tickbox mcp`) or `http` (TARGET: the URL
of `tickbox mcp --http`).

Prints one `ok CHECK` line per passed check; the first failed check ends the
run with `FAIL CHECK: why` on stderr and exit 1. Run by
cli/tests/it/mcp_clients.rs (stdio) and mcp/tests/it/sdks.rs (HTTP).
"""

import json
import os
import sys
import warnings

import anyio

URI = "tick://counter/state"
# Past i64::MAX once the value is positive: the counter refuses it (a tool error).
OVERFLOW = 9223372036854775807
PATIENCE = 60


def fail(check, why):
    print(f"FAIL {check}: {why}", file=sys.stderr, flush=True)
    sys.exit(1)


def ok(check):
    print(f"ok {check}", flush=True)


def expect(check, cond, why):
    if not cond:
        fail(check, why)
    ok(check)


def dump(model):
    return model.model_dump(mode="json", by_alias=True, exclude_none=True)


async def tool_checks(call, list_tools):
    """Returns the counter's value after the checks (HTTP sessions share the Tick)."""
    before = dump(await call("tick_state", {}))["structuredContent"]["data"]["value"]
    tools = {t["name"]: t for t in dump(await list_tools())["tools"]}
    expect(
        "tools/list names",
        {"increment", "history", "tick_state", "tick_screen"} <= set(tools),
        sorted(tools),
    )
    ann = tools["history"].get("annotations", {})
    expect("tools/list readOnlyHint on history", ann.get("readOnlyHint") is True, ann)
    ann = tools["increment"].get("annotations", {})
    expect(
        "tools/list annotations on increment",
        ann.get("readOnlyHint") is False and ann.get("destructiveHint") is True,
        ann,
    )

    r = dump(await call("increment", {"amount": 2}))
    expect(
        "tools/call ok",
        r.get("isError") is False and r.get("structuredContent") == {"value": before + 2},
        r,
    )
    r = dump(await call("increment", {"amount": OVERFLOW}))
    err = r.get("structuredContent", {}).get("error", {})
    expect(
        "tools/call tool error",
        r.get("isError") is True
        and err.get("kind") == "tool_error"
        and "overflow" in err.get("tick_message", "")
        and err.get("executed") is False,
        r,
    )
    r = dump(await call("increment", {"amount": "two"}))
    err = r.get("structuredContent", {}).get("error", {})
    expect(
        "tools/call invalid args",
        r.get("isError") is True
        and err.get("kind") == "invalid_arguments"
        and err.get("executed") is False,
        r,
    )
    r = dump(await call("history", {}))
    recent = r.get("structuredContent", {}).get("recent", [])
    expect(
        "tools/call read-only tool",
        r.get("isError") is False and recent and recent[-1]["value"] == before + 2,
        r,
    )
    return before + 2


async def resource_checks(client, value):
    listed = [r["uri"] for r in dump(await client.list_resources())["resources"]]
    expect("resources/list", URI in listed, listed)
    r = dump(await client.read_resource(URI))
    state = json.loads(r["contents"][0]["text"])
    expect("resources/read", state["data"]["value"] == value, state)


async def default_client(target):
    from mcp import Client

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        async with Client(target) as client:
            version = client.protocol_version
            expect("server/discover", version == "2026-07-28", version)
            # 2026-07-28 subscribes on a `subscriptions/listen` stream.
            async with client.listen(resource_subscriptions=[URI]) as sub:
                expect("subscriptions/listen", sub is not None, "no subscription")
                value = await tool_checks(client.call_tool, client.list_tools)
                with anyio.fail_after(PATIENCE):
                    async for event in sub:
                        if getattr(event, "uri", None) == URI:
                            break
                ok("resources/updated")
            await resource_checks(client, value)


async def legacy_client(transport, target):
    from mcp import ClientSession

    updated = anyio.Event()

    async def on_message(message):
        root = getattr(message, "root", message)
        params = getattr(root, "params", None)
        if getattr(root, "method", None) == "notifications/resources/updated" and str(
            getattr(params, "uri", "")
        ) == URI:
            updated.set()

    if transport == "stdio":
        from mcp.client.stdio import StdioServerParameters, stdio_client

        opened = stdio_client(
            StdioServerParameters(command=target[0], args=target[1:], env=dict(os.environ))
        )
    else:
        from mcp.client.streamable_http import streamable_http_client

        opened = streamable_http_client(target[0])
    async with opened as streams:
        read, write = streams[0], streams[1]
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            async with ClientSession(read, write, message_handler=on_message) as session:
                init = await session.initialize()
                expect(
                    "initialize",
                    init.server_info.name == "tickbox"
                    and init.protocol_version in ("2025-11-25", "2025-06-18"),
                    init,
                )
                await session.subscribe_resource(URI)
                ok("resources/subscribe")
                value = await tool_checks(session.call_tool, session.list_tools)
                with anyio.fail_after(PATIENCE):
                    await updated.wait()
                ok("resources/updated")
                await resource_checks(session, value)


def main():
    if len(sys.argv) < 4:
        sys.exit("usage: python_client.py default|legacy stdio|http TARGET...")
    mode, transport, target = sys.argv[1], sys.argv[2], sys.argv[3:]
    if mode == "default":
        if transport == "stdio":
            from mcp.client.stdio import StdioServerParameters

            server = StdioServerParameters(
                command=target[0], args=target[1:], env=dict(os.environ)
            )
        else:
            server = target[0]
        anyio.run(default_client, server)
    else:
        anyio.run(legacy_client, transport, target)
    print("python client: all checks passed", flush=True)


if __name__ == "__main__":
    main()
