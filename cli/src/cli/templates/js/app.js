// The counter of the Tick protocol's Appendix A, as a JavaScript component.
//
// Built by componentize-js against the `tick` world of `wit/` (see
// build.sh): a WASI 0.2 command whose view is `tickbox:terminal`, so it
// draws on the view, takes keys (`+` and `-`) and follows resizes.
//
// The event loop is one `wasi:io/poll` call over four pollables: stdin (the
// protocol), the view's keys, the next resize, and (while `auto` runs) a
// monotonic-clock instant. Nothing blocks anywhere else, so the timer keeps
// working while the Tick waits for requests. (The JS engine's own event
// loop, promises and setTimeout, does not run while `run` waits in poll.)
//
// Protocol duties, and where they are met:
//   - stdout carries only protocol lines, each written whole (send);
//   - every request with an unsigned integer id gets exactly one response;
//     lines that do not parse, or have no usable id or method, are dropped
//     without a reply (handleLine);
//   - a call with another revision gets -32004, an unknown tool or bad
//     arguments -32602, both before anything changes (call);
//   - every change is exactly one tick/update with the next seq (change).
//
// Everything the host sends is bounded: a line longer than MAX_LINE is
// discarded up to its newline; JSON too deeply nested fails to parse and
// the line is dropped.

import { draw, getSize, keys, subscribeResize } from "tickbox:terminal/terminal@0.1.0";
import { getStdin } from "wasi:cli/stdin@0.2.12";
import { getStdout } from "wasi:cli/stdout@0.2.12";
import { now, subscribeInstant } from "wasi:clocks/monotonic-clock@0.2.12";
import { poll } from "wasi:io/poll@0.2.12";

// Longest request line kept; longer lines are discarded.
const MAX_LINE = 1 << 20;
// Changes `history` keeps, and how many of them the state carries.
const HISTORY = 256;
const IN_STATE = 32;
// Bounds of the `auto` period, in milliseconds.
const AUTO_MIN_MS = 20;
const AUTO_MAX_MS = 60000;
// The counter stays a safe integer: every value is exact in JSON.
const MAX_VALUE = Number.MAX_SAFE_INTEGER;
const REVISION = "1";
const KIND = "example.counter";

const DESCRIPTOR = {
  protocol: 3,
  kind: KIND,
  title: "Counter",
  description: "Keyboard and tool calls share one value.",
  revision: REVISION,
  tools: [
    {
      name: "increment",
      description: "Add an integer to the counter.",
      input_schema: {
        type: "object",
        properties: { amount: { type: "integer" } },
        required: ["amount"],
        additionalProperties: false,
      },
      mutates: true,
    },
    {
      name: "history",
      description: "Read the last 256 changes.",
      input_schema: { type: "object", additionalProperties: false },
      mutates: false,
    },
    {
      name: "auto",
      description: "Add one every every_ms milliseconds (20 to 60000); 0 stops.",
      input_schema: {
        type: "object",
        properties: { every_ms: { type: "integer", minimum: 0, maximum: 60000 } },
        required: ["every_ms"],
        additionalProperties: false,
      },
      mutates: true,
    },
  ],
  recover_with: "history",
  state: { series: [{ path: "/recent", newest: "last" }] },
};

/** A call refused before anything changed. */
class BadCall extends Error {
  constructor(code, message) {
    super(message);
    this.code = code;
  }
}

// How the bindings release a resource handle now (`using` declarations).
const dispose = Symbol.dispose || Symbol.for("dispose");
const encoder = new TextEncoder();
const decoder = new TextDecoder();
const isObject = (v) => typeof v === "object" && v !== null && !Array.isArray(v);

class Counter {
  constructor() {
    this.out = getStdout();
    this.value = 0;
    this.seq = 0;
    this.history = []; // {seq, value}, oldest first, at most HISTORY
    this.autoMs = 0; // 0: off
    this.nextAutoNs = 0n; // monotonic time of the next automatic step
    this.size = getSize();
  }

  // ---- output: each frame is one complete line ----

  send(frame) {
    const data = encoder.encode(JSON.stringify({ jsonrpc: "2.0", ...frame }) + "\n");
    // blocking-write-and-flush takes at most 4096 bytes a call.
    for (let i = 0; i < data.length; i += 4096) {
      this.out.blockingWriteAndFlush(data.subarray(i, i + 4096));
    }
  }

  recent(keep) {
    return this.history.slice(-keep);
  }

  state() {
    return { seq: this.seq, data: { value: this.value, recent: this.recent(IN_STATE) } };
  }

  draw() {
    const auto = this.autoMs ? `+1 every ${this.autoMs} ms` : "off";
    const view = `${this.size.cols}x${this.size.rows}`;
    draw(
      encoder.encode(
        "\x1b[H\x1b[2J" +
          "+-- Counter (JavaScript) -----------+\r\n" +
          `| Counter: ${String(this.value).padEnd(24)} |\r\n` +
          `| auto: ${auto.padEnd(27)} |\r\n` +
          `| view: ${view.padEnd(27)} |\r\n` +
          "+-----------------------------------+\r\n" +
          "[+] add one  [-] subtract one\r\n",
      ),
    );
  }

  // ---- the counter ----

  /** The one place the value changes: one change, one update. */
  change(by) {
    this.value += by;
    this.seq += 1;
    this.history.push({ seq: this.seq, value: this.value });
    if (this.history.length > HISTORY) this.history.shift();
    this.send({ method: "tick/update", params: this.state() });
    this.draw();
  }

  call(params) {
    if (params.revision !== REVISION) {
      throw new BadCall(
        -32004,
        "the Tick Tool catalog changed; describe the Tick and prepare the call again",
      );
    }
    const { tool, args } = params;
    if (!isObject(args)) throw new BadCall(-32602, "args must be an object");
    const n = Object.keys(args).length;
    if (tool === "increment") {
      const amount = args.amount;
      if (n !== 1 || !Number.isSafeInteger(amount)) {
        throw new BadCall(-32602, 'increment takes {"amount": integer} and nothing else');
      }
      if (Math.abs(this.value + amount) > MAX_VALUE) {
        throw new BadCall(-32602, "the counter would overflow");
      }
      this.change(amount);
      return { value: this.value };
    }
    if (tool === "history") {
      if (n !== 0) throw new BadCall(-32602, "history takes no arguments");
      return { recent: this.recent(HISTORY) };
    }
    if (tool === "auto") {
      const ms = args.every_ms;
      if (
        n !== 1 ||
        !Number.isSafeInteger(ms) ||
        !(ms === 0 || (ms >= AUTO_MIN_MS && ms <= AUTO_MAX_MS))
      ) {
        throw new BadCall(-32602, 'auto takes {"every_ms": 0 or 20..60000}');
      }
      this.autoMs = ms;
      this.nextAutoNs = now() + BigInt(ms) * 1_000_000n;
      this.draw();
      return { every_ms: ms };
    }
    throw new BadCall(-32602, "unknown tool");
  }

  handleLine(line) {
    let msg;
    try {
      msg = JSON.parse(decoder.decode(line));
    } catch {
      return; // not JSON (or nested too deep): no usable id, no reply
    }
    if (!isObject(msg)) return;
    const { id, method, params } = msg;
    if (!Number.isSafeInteger(id) || id < 0 || typeof method !== "string") return;
    let result;
    try {
      if (method === "tick/describe") result = DESCRIPTOR;
      else if (method === "tick/read") result = this.state();
      else if (method === "tick/call") {
        if (!isObject(params)) throw new BadCall(-32602, "tick/call needs params");
        result = this.call(params);
      } else throw new BadCall(-32601, "unknown method");
    } catch (e) {
      if (!(e instanceof BadCall)) throw e;
      this.send({ id, error: { code: e.code, message: e.message } });
      return;
    }
    this.send({ id, result });
  }

  key(byte) {
    if (byte === 0x2b && this.value < MAX_VALUE) this.change(1); // +
    else if (byte === 0x2d && this.value > -MAX_VALUE) this.change(-1); // -
  }

  tickAuto() {
    const t = now();
    if (!this.autoMs || t < this.nextAutoNs) return;
    const step = BigInt(this.autoMs) * 1_000_000n;
    this.nextAutoNs += step;
    // After a stall, do not replay every missed step at once.
    if (this.nextAutoNs < t) this.nextAutoNs = t + step;
    if (this.value < MAX_VALUE) this.change(1);
  }

  run() {
    const requests = getStdin();
    const typed = keys();
    // Pollables are children of their streams: they are kept for the whole
    // loop and polled again and again.
    const requestsReady = requests.subscribe();
    const keysReady = typed.subscribe();
    let resized = subscribeResize(this.size.generation);
    let line = [];
    let lineLen = 0;
    let discarding = false; // inside a line longer than MAX_LINE
    this.draw();
    for (;;) {
      const waiting = [requestsReady, keysReady, resized];
      const clock = this.autoMs ? subscribeInstant(this.nextAutoNs) : null;
      if (clock) waiting.push(clock);
      const ready = poll(waiting);
      // The garbage collector frees resources some time later; a pollable
      // made for one wait is released at once, so handles never pile up
      // while a fast timer runs.
      if (clock) clock[dispose]();
      if (ready.includes(3)) this.tickAuto();
      if (ready.includes(2)) {
        this.size = getSize();
        resized[dispose]();
        resized = subscribeResize(this.size.generation);
        this.draw();
      }
      if (ready.includes(1)) {
        let bytes = new Uint8Array(0);
        try {
          bytes = typed.read(64n);
        } catch {
          // The key stream never closes while the Tick runs.
        }
        for (const b of bytes) this.key(b);
      }
      if (ready.includes(0)) {
        let chunk;
        try {
          chunk = requests.read(65536n);
        } catch {
          return; // stdin closed: nothing is in flight, so exit
        }
        let start = 0;
        for (;;) {
          const end = chunk.indexOf(0x0a, start);
          const piece = chunk.subarray(start, end < 0 ? chunk.length : end);
          if (!discarding) {
            if (lineLen + piece.length > MAX_LINE) {
              discarding = true;
              line = [];
              lineLen = 0;
            } else {
              line.push(piece.slice());
              lineLen += piece.length;
            }
          }
          if (end < 0) break;
          if (!discarding) {
            const whole = new Uint8Array(lineLen);
            let at = 0;
            for (const p of line) {
              whole.set(p, at);
              at += p.length;
            }
            this.handleLine(whole);
          }
          line = [];
          lineLen = 0;
          discarding = false;
          start = end + 1;
        }
      }
    }
  }
}

/** The component's entry point, `wasi:cli/run`. */
export const run = {
  run() {
    new Counter().run();
  },
};
