// Property tests of the JavaScript SDK's dispatcher and key decoder, with
// fast-check, seeded from the fuzz corpus the Rust SDK's fuzz targets use
// (fuzz/corpus/dispatch and keys: sessions recorded from the test Ticks).
//
//   node sdks/js/test/properties.js                        must pass
//   TICKBOX_SDK_BROKEN=seq node sdks/js/test/properties.js must fail
//
// The second is the positive control: the same properties against a
// dispatcher that reuses update seqs. cli/tests/it/sdks.rs runs both.

import fc from "fast-check";
import { readdirSync, readFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { Dispatcher, KeyDecoder, Rejected, Tick, problem, t, validator } from "../tickbox.js";

const corpusDir = join(dirname(fileURLToPath(import.meta.url)), "../../../fuzz/corpus");
const corpus = (target) => {
  const files = readdirSync(join(corpusDir, target)).sort();
  if (!files.length) throw new Error(`no seeds in ${target}`);
  return files.map((f) => new Uint8Array(readFileSync(join(corpusDir, target, f))));
};
const enc = new TextEncoder();
const latin1 = (b) => String.fromCharCode(...b);
const bytes = (s) => Uint8Array.from(s, (c) => c.charCodeAt(0));
// The fixtures' sessions, also with the revision this SDK serves, so that
// the seeds reach the tools and not only the revision check.
const SEEDS = corpus("dispatch");
SEEDS.push(...SEEDS.map((s) => bytes(latin1(s).replaceAll('"revision":"r1"', '"revision":"1"'))));
const KEY_SEEDS = corpus("keys");

if (process.env.TICKBOX_SDK_BROKEN === "seq") {
  // The deliberate bug: seq stops at 1, so later updates repeat it.
  Object.defineProperty(Dispatcher.prototype, "seq", {
    get() { return this.brokenSeq; },
    set(v) { this.brokenSeq = Math.min(v, 1); },
  });
}

class Fuzzed extends Tick {
  static kind = "fuzz.dispatch";
  static title = "Fuzzed";
  static recoverWith = "history";
  static series = { "/log": "last" };
  // The fixtures' tool names (tests/ticks), so their sessions reach tools.
  static tools = {
    increment: { description: "Add to the value.", mutates: true, args: { amount: t.integer() } },
    bump: { description: "Add one.", mutates: true },
    history: { description: "The log." },
    echo: { description: "Args back.", args: { text: t.optional(t.string()), n: t.optional(t.nullable(t.integer())) } },
    fail: { description: "Fails after starting.", mutates: true },
    refuse: { description: "Refuses.", mutates: true, args: { why: t.string() } },
  };
  value = 0;
  log = [];
  state() { return { value: this.value, log: this.log }; }
  increment(ctx, { amount }) {
    this.value += amount;
    this.log = [...this.log, this.value].slice(-64);
    return { value: this.value };
  }
  bump(ctx) { return this.increment(ctx, { amount: 1 }); }
  history() { return { log: this.log }; }
  echo(ctx, args) { return args; }
  fail() { throw new Error("boom"); }
  refuse(ctx, { why }) { throw new Rejected(why); }
  onKey(ctx, key) { if (key === "+") this.value += 1; }
}

function usableId(line) {
  let msg;
  try {
    msg = JSON.parse(new TextDecoder("utf-8", { fatal: true }).decode(line));
  } catch {
    return null;
  }
  if (msg === null || typeof msg !== "object" || Array.isArray(msg) || typeof msg.method !== "string") return null;
  return Number.isSafeInteger(msg.id) && msg.id >= 0 ? msg.id : null;
}

const split = (data, byte) => {
  const parts = [];
  let at = 0;
  for (let i = 0; i < data.length; i++) if (data[i] === byte) { parts.push(data.subarray(at, i)); at = i + 1; }
  parts.push(data.subarray(at));
  return parts;
};

// Feeds a session (protocol lines, then key bytes after 0xff) cut at `cuts`.
function run(session, cuts) {
  const ff = session.indexOf(0xff);
  const lines = ff < 0 ? session : session.subarray(0, ff), keys = ff < 0 ? new Uint8Array(0) : session.subarray(ff + 1);
  const d = new Dispatcher(new Fuzzed(), () => 0);
  let out = "", at = 0;
  for (const cut of [...cuts.map((c) => c % (lines.length + 1))].sort((a, b) => a - b).concat([lines.length])) {
    out += latin1(d.feed(lines.subarray(at, cut)));
    at = Math.max(at, cut);
  }
  out += latin1(d.keys(keys));
  return { lines, out };
}

const ids = fc.oneof(fc.integer({ min: -3, max: 40 }), fc.constant(2 ** 53), fc.constant(null), fc.string({ maxLength: 3 }), fc.double());
const jsonValue = fc.jsonValue({ maxDepth: 2 });
const callParams = fc.record({
  tool: fc.constantFrom("increment", "bump", "history", "echo", "fail", "refuse", "nope", ""),
  args: fc.oneof(fc.record({ amount: fc.integer() }), fc.dictionary(fc.constantFrom("amount", "text", "n", "why", "x"), jsonValue), jsonValue),
  revision: fc.constantFrom("1", "1", "r1", 1),
});
const request = fc.tuple(ids, fc.constantFrom("tick/describe", "tick/read", "tick/call", "tick/other", 7, null),
  fc.oneof(callParams, jsonValue), fc.constantFrom("2.0", "2.0", "1.0"))
  .map(([id, method, params, jsonrpc]) => enc.encode(JSON.stringify({ jsonrpc, id, method, params })));
// Well-formed calls that change the state, so sessions have several updates.
const change = fc.tuple(fc.nat(50), fc.constantFrom("increment", "bump"), fc.integer({ min: 1, max: 9 }))
  .map(([id, tool, amount]) => enc.encode(JSON.stringify({ jsonrpc: "2.0", id, method: "tick/call", params: { tool, args: tool === "bump" ? {} : { amount }, revision: "1" } })));
const seedLines = SEEDS.flatMap((s) => split(s, 0x0a));
const line = fc.oneof(request, request, change, fc.uint8Array({ maxLength: 40 }), fc.constantFrom(...seedLines));
const session = fc.oneof(fc.constantFrom(...SEEDS), fc.array(line, { maxLength: 12 }).map((ls) => {
  const parts = ls.flatMap((l) => [l, Uint8Array.of(0x0a)]);
  return Uint8Array.from(parts.flatMap((p) => [...p]));
}));

fc.assert(fc.property(session, fc.array(fc.nat(), { maxLength: 6 }), (s, cuts) => {
  const { lines, out } = run(s, cuts);
  if (out && !out.endsWith("\n")) throw new Error("a partial line");
  const expected = split(lines, 0x0a).slice(0, -1).map(usableId).filter((i) => i !== null);
  const answered = [];
  let lastSeq = 0;
  for (const frame of out.split("\n").slice(0, -1)) {
    const msg = JSON.parse(new TextDecoder().decode(bytes(frame)));
    if (msg.jsonrpc !== "2.0") throw new Error(frame);
    if ("id" in msg) {
      if (msg.id === null) throw new Error(`id null: ${frame}`);
      answered.push(msg.id);
      if (("result" in msg) === ("error" in msg)) throw new Error(frame);
      if ("error" in msg && !(Number.isInteger(msg.error.code) && typeof msg.error.message === "string")) throw new Error(frame);
      const r = msg.result;
      if (r && typeof r === "object" && Object.keys(r).sort().join() === "data,seq" && r.seq < lastSeq) throw new Error(`a read below the last update: ${frame}`);
    } else {
      if (msg.method !== "tick/update" || msg.params.data === null) throw new Error(frame);
      if (!(msg.params.seq > lastSeq)) throw new Error(`update seq ${msg.params.seq} after ${lastSeq}`);
      lastSeq = msg.params.seq;
    }
  }
  if (JSON.stringify(answered) !== JSON.stringify(expected)) {
    throw new Error(`answered ${answered}, expected ${expected}: one response per request, in order`);
  }
  if (run(s, []).out !== out) throw new Error("how the input was cut changed the output");
}), { numRuns: 300, seed: 30, examples: SEEDS.map((s) => [s, []]) });

fc.assert(fc.property(fc.oneof(fc.constantFrom(...KEY_SEEDS), fc.uint8Array({ maxLength: 40 })), fc.array(fc.nat(100), { maxLength: 5 }), (data, cuts) => {
  const whole = new KeyDecoder();
  const expected = whole.feed(data);
  const d = new KeyDecoder(), got = [];
  let at = 0;
  // Except right after an ESC: a read that ends with a lone ESC is the
  // Escape key (tickbox.js, as the Rust SDK decides).
  const ok = cuts.map((c) => c % (data.length + 1)).filter((c) => c === 0 || data[c - 1] !== 0x1b);
  for (const cut of ok.sort((a, b) => a - b).concat([data.length])) {
    got.push(...d.feed(data.subarray(at, Math.max(at, cut))));
    at = Math.max(at, cut);
  }
  if (JSON.stringify(got) !== JSON.stringify(expected) || latin1(d.pending) !== latin1(whole.pending)) {
    throw new Error(`keys differ: ${got} vs ${expected}`);
  }
}), { numRuns: 300, seed: 30 });

// The compiled test and the walking `problem` agree on every value, for
// every tool's schema (the dispatcher trusts the first, reports the second).
const tools = new Dispatcher(new Fuzzed(), () => 0).tools;
const schemas = [...tools.values()].map((tool) => tool.schema).concat([
  t.object({ s: t.string({ minLength: 1, maxLength: 3, pattern: "^[a-c]*$" }), xs: t.optional(t.array(t.integer({ minimum: -2, maximum: 2 }), { maxItems: 2 })), e: t.optional(t.enum("a", 1, true)) }),
].map((o) => ({ ...o, required: Object.keys(o.properties).filter((k) => !o.properties[k].optional) })));
const argsLike = fc.oneof(jsonValue, fc.dictionary(fc.constantFrom("amount", "text", "n", "why", "s", "xs", "e", "x"),
  fc.oneof(jsonValue, fc.constantFrom("a", "abc", "abd", "", 1, true, [1, 2], [3], [1, 2, 2]))));
fc.assert(fc.property(fc.constantFrom(...schemas), argsLike, (schema, v) => {
  if (validator(schema)(v) !== (problem(schema, v) === null)) throw new Error(`disagree on ${JSON.stringify(v)} for ${JSON.stringify(schema)}`);
}), { numRuns: 1000, seed: 30 });

console.log("properties hold");
