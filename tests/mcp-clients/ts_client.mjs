// The MCP TypeScript SDK (`@modelcontextprotocol/sdk`, pinned in
// package-lock.json) against `tickbox mcp` serving the example counter.
//
//     node ts_client.mjs stdio COMMAND ARGS...   (starts `tickbox mcp`)
//     node ts_client.mjs http URL                 (an MCP HTTP server's URL)
//
// Prints one `ok CHECK` line per passed check; the first failed check ends
// the run with `FAIL CHECK: why` on stderr and exit 1. Run by
// cli/tests/it/mcp_clients.rs (stdio) and mcp/tests/it/sdks.rs (HTTP).

import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import { ResourceUpdatedNotificationSchema } from "@modelcontextprotocol/sdk/types.js";

const URI = "tick://counter/state";
// 2^63 (JavaScript numbers cannot say i64::MAX): valid for the schema
// (an integer), refused by the counter itself, so a tool error.
const TOO_BIG = 2 ** 63;
const PATIENCE_MS = 60_000;

function fail(check, why) {
  process.stderr.write(`FAIL ${check}: ${typeof why === "string" ? why : JSON.stringify(why)}\n`);
  process.exit(1);
}

function expect(check, cond, why) {
  if (!cond) fail(check, why);
  process.stdout.write(`ok ${check}\n`);
}

const [mode, ...target] = process.argv.slice(2);
let transport;
if (mode === "stdio") {
  transport = new StdioClientTransport({
    command: target[0],
    args: target.slice(1),
    env: { ...process.env },
    stderr: "inherit",
  });
} else if (mode === "http") {
  transport = new StreamableHTTPClientTransport(new URL(target[0]));
} else {
  fail("usage", "node ts_client.mjs stdio COMMAND ARGS... | http URL");
}

const client = new Client({ name: "tickbox-ts-check", version: "1.0.0" });
let updated;
const gotUpdate = new Promise((resolve) => (updated = resolve));
client.setNotificationHandler(ResourceUpdatedNotificationSchema, (n) => {
  if (n.params.uri === URI) updated();
});

const watchdog = setTimeout(() => fail("patience", `not done within ${PATIENCE_MS} ms`), PATIENCE_MS);

await client.connect(transport);
const info = client.getServerVersion();
expect("initialize", info?.name === "tickbox", info);

const tools = Object.fromEntries((await client.listTools()).tools.map((t) => [t.name, t]));
expect(
  "tools/list names",
  ["increment", "history", "tick_state", "tick_screen"].every((n) => n in tools),
  Object.keys(tools),
);
expect(
  "tools/list readOnlyHint on history",
  tools.history.annotations?.readOnlyHint === true,
  tools.history,
);
expect(
  "tools/list annotations on increment",
  tools.increment.annotations?.readOnlyHint === false &&
    tools.increment.annotations?.destructiveHint === true,
  tools.increment,
);

await client.subscribeResource({ uri: URI });
expect("resources/subscribe", true, "");

// HTTP sessions share the Tick: count from what it holds now.
const before = (await client.callTool({ name: "tick_state", arguments: {} })).structuredContent.data
  .value;
let r = await client.callTool({ name: "increment", arguments: { amount: 2 } });
expect(
  "tools/call ok",
  r.isError === false && r.structuredContent?.value === before + 2,
  r,
);
r = await client.callTool({ name: "increment", arguments: { amount: TOO_BIG } });
let err = r.structuredContent?.error ?? {};
expect(
  "tools/call tool error",
  r.isError === true && err.kind === "tool_error" && err.executed === false,
  r,
);
r = await client.callTool({ name: "increment", arguments: { amount: "two" } });
err = r.structuredContent?.error ?? {};
expect(
  "tools/call invalid args",
  r.isError === true && err.kind === "invalid_arguments" && err.executed === false,
  r,
);
r = await client.callTool({ name: "history", arguments: {} });
const recent = r.structuredContent?.recent ?? [];
expect(
  "tools/call read-only tool",
  r.isError === false && recent.at(-1)?.value === before + 2,
  r,
);

await gotUpdate;
expect("resources/updated", true, "");

const listed = (await client.listResources()).resources.map((x) => x.uri);
expect("resources/list", listed.includes(URI), listed);
const read = await client.readResource({ uri: URI });
const state = JSON.parse(read.contents[0].text);
expect("resources/read", state.data.value === before + 2, state);

if (mode === "http") await transport.terminateSession();
await client.close();
clearTimeout(watchdog);
process.stdout.write("ts client: all checks passed\n");
