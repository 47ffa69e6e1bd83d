// tickbox.js: write a Tick in JavaScript (ESM). The sans-IO heart of the
// SDK: protocol bytes, keys, resizes and the clock go in; frames and the
// view come out. The loops that wait and feed are component.js (a
// componentize-js component of the `tick` world) and native.js (Node, for
// debugging the same source). The rules kept, as the Rust SDK's dispatcher
// keeps them:
//   - every request with a usable id (an integer 0..2^53-1) gets exactly one
//     response; a line that is not a JSON object, or has no usable id or no
//     method, is dropped without a reply, never answered with id null (§3.2);
//   - after every key, timer and mutating call the state is encoded and
//     compared with the last; only a difference bumps seq and sends one
//     tick/update (§8.2, §8.3), before the response of the call that
//     caused it;
//   - another revision gets -32004, an unknown tool or bad args -32602,
//     both before the tool runs (§7.2);
//   - a read-only tool promised to change nothing (§5.6): after it the state
//     is not encoded and the view is redrawn only when the tool asks
//     (ctx.redraw()). A read-only tool that changed the state anyway breaks
//     the protocol; the change goes out with the next event's update.

export const PROTOCOL = 3;
const enc = new TextEncoder();
const dec = new TextDecoder("utf-8", { fatal: true });
// §3.4 codes.
export const INVALID_REQUEST = -32600, METHOD_NOT_FOUND = -32601, INVALID_PARAMS = -32602;
export const REVISION_MISMATCH = -32004, TOOL_FAILED = -32000, INTERNAL_ERROR = -32603;
// §3.5: longest line; longer ones are discarded up to their newline.
export const MAX_LINE_BYTES = 8 << 20;
// §5.3, §8.2: 512 KiB encoded, less 16 KiB of headroom because the host
// measures after re-encoding (§2.3).
const SAFE_ENCODED = (512 << 10) - (16 << 10);
// Timers never fire more often than this, so a zero period cannot spin.
const MIN_PERIOD_MS = 10;
const REVISION = "1";

/** A tool failed after it started: -32000 unless another code is given. */
export class ToolError extends Error {
  constructor(message, code = TOOL_FAILED, data = undefined) {
    super(message);
    this.code = code;
    this.data = data;
  }
}

/** Refused before anything changed: -32602, "not executed" (§3.4). */
export class Rejected extends ToolError {
  constructor(message, data) {
    super(message, INVALID_PARAMS, data);
  }
}

// ---- argument schemas: declared once, checked on every call ----

const kind = (type, extra = {}) => ({ type, ...extra });
/** Schema builders; `t.object({...})` is a tool's `args`. */
export const t = {
  integer: (o = {}) => kind("integer", o),
  number: (o = {}) => kind("number", o),
  string: (o = {}) => kind("string", o),
  boolean: () => kind("boolean"),
  array: (items, o = {}) => kind("array", { items, ...o }),
  enum: (...values) => ({ enum: values }),
  optional: (schema) => ({ ...schema, optional: true }),
  nullable: (schema) => ({ anyOf: [schema, { type: "null" }] }),
  object: (props = {}) => ({ type: "object", properties: props, additionalProperties: false }),
};

/** The JSON Schema of `args` as declared (optional marks become `required`). */
function inputSchema(props) {
  const properties = {}, required = [];
  for (const [name, s] of Object.entries(props ?? {})) {
    const { optional, ...rest } = s;
    properties[name] = strip(rest);
    if (!optional) required.push(name);
  }
  const schema = { type: "object", properties, additionalProperties: false };
  if (required.length) schema.required = required;
  return schema;
}
const strip = (s) => {
  if (s.type === "object" && s.properties) return inputSchema(s.properties);
  if (s.items) return { ...s, items: strip(s.items) };
  if (s.anyOf) return { ...s, anyOf: s.anyOf.map(strip) };
  return s;
};

const typeOk = {
  integer: (v) => Number.isSafeInteger(v),
  number: (v) => typeof v === "number",
  string: (v) => typeof v === "string",
  boolean: (v) => typeof v === "boolean",
  null: (v) => v === null,
  array: (v) => Array.isArray(v),
  object: (v) => v !== null && typeof v === "object" && !Array.isArray(v),
};

/** Why `v` breaks `schema` (the subset `t` makes), or null. */
export function problem(schema, v, where = "args") {
  if (schema.anyOf) return schema.anyOf.every((s) => problem(s, v, where)) ? `${where} has the wrong type` : null;
  if (schema.enum) return schema.enum.includes(v) ? null : `${where} must be one of ${JSON.stringify(schema.enum)}`;
  if (schema.type && !typeOk[schema.type](v)) return `${where} must be of type ${schema.type}`;
  if (schema.minimum !== undefined && v < schema.minimum) return `${where} must be at least ${schema.minimum}`;
  if (schema.maximum !== undefined && v > schema.maximum) return `${where} must be at most ${schema.maximum}`;
  if (schema.minLength !== undefined || schema.maxLength !== undefined || schema.minItems !== undefined || schema.maxItems !== undefined) {
    // JSON Schema counts a string's length in code points.
    const len = typeof v === "string" ? [...v].length : v.length;
    if (len < (schema.minLength ?? schema.minItems ?? 0)) return `${where} is too short`;
    if (len > (schema.maxLength ?? schema.maxItems ?? Infinity)) return `${where} is too long`;
  }
  if (schema.pattern !== undefined && typeof v === "string" && !new RegExp(schema.pattern, "u").test(v)) return `${where} must match ${schema.pattern}`;
  if (schema.type === "array" && schema.items) {
    for (let i = 0; i < v.length; i++) {
      const p = problem(schema.items, v[i], `${where}[${i}]`);
      if (p) return p;
    }
  }
  if (schema.type === "object" && schema.properties) {
    for (const name of schema.required ?? []) if (!Object.hasOwn(v, name)) return `${where}.${name} is required`;
    for (const name in v) {
      if (!Object.hasOwn(schema.properties, name)) return `${where}.${name} is not an argument of this tool`;
      const p = problem(schema.properties[name], v[name], `${where}.${name}`);
      if (p) return p;
    }
  }
  return null;
}

/** A schema compiled once into a yes/no test, for the path every call
 * takes: in componentize-js's interpreter, walking the schema generically
 * (and building the messages' paths) was a fifth of a call's cost.
 * `problem` runs only when the test says no, to say why; the property
 * tests hold the two to the same answers. Its loops count: a `for...of`
 * steps an iterator through a call per element in that interpreter. */
export function validator(schema) {
  if (schema.anyOf) {
    const alts = schema.anyOf.map(validator);
    return (v) => alts.some((a) => a(v));
  }
  if (schema.enum) return (v) => schema.enum.includes(v);
  const tests = [];
  if (schema.type) tests.push(typeOk[schema.type]);
  const { minimum, maximum } = schema;
  if (minimum !== undefined) tests.push((v) => typeof v !== "number" || v >= minimum);
  if (maximum !== undefined) tests.push((v) => typeof v !== "number" || v <= maximum);
  if (schema.minLength !== undefined || schema.maxLength !== undefined || schema.minItems !== undefined || schema.maxItems !== undefined) {
    const min = schema.minLength ?? schema.minItems ?? 0, max = schema.maxLength ?? schema.maxItems ?? Infinity;
    tests.push((v) => {
      const len = typeof v === "string" ? [...v].length : v.length;
      return len >= min && len <= max;
    });
  }
  if (schema.pattern !== undefined) {
    const re = new RegExp(schema.pattern, "u");
    tests.push((v) => typeof v !== "string" || re.test(v));
  }
  if (schema.type === "array" && schema.items) {
    const item = validator(schema.items);
    tests.push((v) => v.every(item));
  }
  if (schema.type === "object" && schema.properties) {
    const required = schema.required ?? [];
    const props = new Map(Object.entries(schema.properties).map(([k, s]) => [k, validator(s)]));
    tests.push((v) => {
      for (let i = 0; i < required.length; i++) if (!Object.hasOwn(v, required[i])) return false;
      for (const name in v) {
        const test = props.get(name);
        if (test === undefined || !test(v[name])) return false;
      }
      return true;
    });
  }
  if (tests.length === 1) return tests[0];
  return (v) => {
    for (let i = 0; i < tests.length; i++) if (!tests[i](v)) return false;
    return true;
  };
}

// ---- the Tick and what its handlers may ask ----

/** Subclass it: static kind/title/description/tools, then handlers. */
export class Tick {
  state() { return null; }
  view() { return ""; }
  onKey() {}
  onTimer() {}
}

export class Ctx {
  constructor(clock, cols, rows) {
    Object.assign(this, { clock, cols, rows, timers: new Map(), nextId: 1, quitAsked: false, redrawAsked: false });
  }
  #add(delay, period) {
    const id = this.nextId++;
    this.timers.set(id, { due: this.clock() + delay, period });
    return id;
  }
  /** Calls onTimer every `ms` (at least 10) until cancelled; no bursts. */
  every(ms) { ms = Math.max(ms, MIN_PERIOD_MS); return this.#add(ms, ms); }
  after(ms) { return this.#add(Math.max(ms, 0), null); }
  cancel(id) { this.timers.delete(id); }
  redraw() { this.redrawAsked = true; }
  quit() { this.quitAsked = true; }
}

// ---- keys ----

const FINAL = { A: "up", B: "down", C: "right", D: "left", H: "home", F: "end", Z: "backtab" };
const TILDE = { 1: "home", 7: "home", 4: "end", 8: "end", 2: "insert", 3: "delete", 5: "pageup", 6: "pagedown" };
const MAX_PENDING = 64;

/** Key bytes to names: a printable key is its character, others are
 * "enter", "tab", "backspace", "esc", "up", …, "ctrl-a", or "unknown".
 * A sequence cut by the end of a read waits for the next one. */
export class KeyDecoder {
  pending = new Uint8Array(0);
  feed(data) {
    const s = new Uint8Array(this.pending.length + data.length);
    s.set(this.pending);
    s.set(data, this.pending.length);
    const keys = [];
    let i = 0;
    scan: while (i < s.length) {
      const b = s[i];
      if (b === 0x1b) {
        if (i + 1 >= s.length) { keys.push("esc"); i++; continue; }
        const n = s[i + 1];
        if (n === 0x5b || n === 0x4f) {
          let j = i + 2;
          while (j < s.length && !(s[j] >= 0x40 && s[j] <= 0x7e)) j++;
          if (j >= s.length) break scan;
          const fin = String.fromCharCode(s[j]), params = String.fromCharCode(...s.subarray(i + 2, j));
          keys.push((fin === "~" ? TILDE[params] : FINAL[fin]) ?? "unknown");
          i = j + 1;
        } else if (n === 0x1b) { keys.push("esc"); i++; } else { keys.push("unknown"); i += 2; }
        continue;
      }
      if (b === 0x0d || b === 0x0a) keys.push("enter");
      else if (b === 0x09) keys.push("tab");
      else if (b === 0x7f || b === 0x08) keys.push("backspace");
      else if (b >= 0x01 && b <= 0x1a) keys.push("ctrl-" + String.fromCharCode(0x60 + b));
      else if (b < 0x20) keys.push("unknown");
      else {
        const n = b >= 0xf0 && b <= 0xf7 ? 4 : b >= 0xe0 ? 3 : b >= 0xc0 ? 2 : 1;
        if (i + n > s.length) break;
        try {
          keys.push(new TextDecoder("utf-8", { fatal: true }).decode(s.subarray(i, i + n)));
          i += n;
        } catch {
          keys.push("unknown");
          i += 1;
        }
        continue;
      }
      i++;
    }
    this.pending = s.slice(i);
    if (this.pending.length > MAX_PENDING) { keys.push("unknown"); this.pending = new Uint8Array(0); }
    return keys;
  }
}

// ---- drawing ----

/** The bytes that replace the screen with `view` (a string or lines). */
export function paint(view) {
  const lines = Array.isArray(view) ? view : String(view).split("\n");
  return enc.encode("\x1b[H\x1b[2J" + lines.join("\r\n"));
}

/** `lines` framed under `title`, then `footer`: a list of lines. */
export function box(title, lines, footer, width = 0) {
  // Indexed loops: spread calls and iterators are slow in componentize-js's
  // interpreter, and this runs on every redraw.
  let inner = Math.max(width, title.length + 4);
  for (let i = 0; i < lines.length; i++) if (lines[i].length > inner) inner = lines[i].length;
  const out = ["+-- " + title + " " + "-".repeat(inner - title.length - 3) + "+"];
  for (let i = 0; i < lines.length; i++) out.push("| " + lines[i].padEnd(inner) + " |");
  out.push("+" + "-".repeat(inner + 2) + "+");
  if (footer) out.push(footer);
  return out;
}

// ---- the dispatcher ----

// What an event that wrote nothing returns: no allocation on the idle path.
const NOTHING = new Uint8Array(0);

/** One running Tick. Each event method returns the frames to write (a
 * Uint8Array of whole lines); `view()` gives the screen when it must be
 * redrawn. `clock` is monotonic milliseconds. */
export class Dispatcher {
  constructor(tick, clock, cols = 120, rows = 30, report = () => {}) {
    this.tick = tick;
    this.report = report;
    this.ctx = new Ctx(clock, cols, rows);
    this.spec = tick.constructor;
    this.tools = new Map(Object.entries(this.spec.tools ?? {}).map(([name, d]) =>
      [name, { ...d, schema: inputSchema(d.args) }]));
    for (const tool of this.tools.values()) tool.valid = validator(tool.schema);
    this.seq = 0;
    this.out = [];
    this.line = [];
    this.lineBytes = 0;
    this.discarding = false;
    this.keyDecoder = new KeyDecoder();
    this.dirty = true;
    tick.onStart?.(this.ctx);
    this.encoded = this.#encodedState() ?? "null";
    const p = this.declarationProblem();
    if (p) report(p);
  }

  get done() { return this.ctx.quitAsked; }

  nextDeadline() {
    if (this.ctx.timers.size === 0) return null; // no iterator on every wait of a Tick without timers
    let min = null;
    for (const t of this.ctx.timers.values()) if (min === null || t.due < min) min = t.due;
    return min;
  }

  /** Protocol bytes from stdin; complete lines are handled. */
  feed(data) {
    let start = 0;
    for (;;) {
      const end = data.indexOf(0x0a, start);
      if (end >= 0 && this.lineBytes === 0 && !this.discarding && end - start <= MAX_LINE_BYTES) {
        // A whole line in this read (the usual case): handled in place.
        this.handleLine(data.subarray(start, end));
        start = end + 1;
        continue;
      }
      const piece = data.subarray(start, end < 0 ? data.length : end);
      if (!this.discarding) {
        if (this.lineBytes + piece.length > MAX_LINE_BYTES) {
          this.discarding = true;
          this.line = [];
          this.lineBytes = 0;
        } else if (piece.length > 0) {
          // Kept past this read: a copy, since the caller may reuse `data`.
          this.line.push(piece.slice());
          this.lineBytes += piece.length;
        }
      }
      if (end < 0) break;
      if (!this.discarding) this.handleLine(concat(this.line, this.lineBytes));
      this.line = [];
      this.lineBytes = 0;
      this.discarding = false;
      start = end + 1;
    }
    return this.#flush();
  }

  keys(data) {
    const keys = this.keyDecoder.feed(data);
    for (const k of keys) this.#guarded("onKey", k);
    if (keys.length) { this.#sync(); this.dirty = true; }
    return this.#flush();
  }

  /** A repaint, never an update (§8.3). */
  resize(cols, rows) {
    this.ctx.cols = Math.max(cols, 1);
    this.ctx.rows = Math.max(rows, 1);
    this.dirty = true;
    return this.#flush();
  }

  timers() {
    if (this.ctx.timers.size === 0) return NOTHING;
    const now = this.ctx.clock();
    const due = [...this.ctx.timers].filter(([, t]) => t.due <= now).sort((a, b) => a[1].due - b[1].due);
    for (const [id] of due) {
      const timer = this.ctx.timers.get(id);
      if (!timer) continue; // cancelled by an earlier handler
      if (timer.period === null) this.ctx.timers.delete(id);
      else while (timer.due <= now) timer.due += timer.period; // skip missed periods
      this.#guarded("onTimer", id);
      this.#sync();
      this.dirty = true;
    }
    return this.#flush();
  }

  /** The screen when it must be redrawn, else null. */
  view() {
    if (!this.dirty && !this.ctx.redrawAsked) return null;
    this.dirty = this.ctx.redrawAsked = false;
    try {
      return this.tick.view(this.ctx);
    } catch (e) {
      return `view failed: ${e}`;
    }
  }

  handleLine(bytes) {
    let msg;
    try {
      // A trailing \r (a \r\n line end) is whitespace to JSON.parse.
      msg = JSON.parse(dec.decode(bytes));
    } catch {
      return; // not JSON: no usable id, no reply (§3.2)
    }
    if (msg === null || typeof msg !== "object" || Array.isArray(msg)) return;
    const id = msg.id, method = msg.method;
    if (!Number.isSafeInteger(id) || id < 0 || typeof method !== "string") return;
    try {
      if (msg.jsonrpc !== "2.0") throw new ToolError('invalid request: jsonrpc must be "2.0"', INVALID_REQUEST);
      if (method === "tick/read") {
        // The state as encoded when it last changed: no re-encoding.
        this.out.push(`{"jsonrpc":"2.0","id":${id},"result":{"seq":${this.seq},"data":${this.encoded}}}\n`);
        return;
      }
      let result;
      if (method === "tick/describe") result = this.describe();
      else if (method === "tick/call") result = this.call(msg.params);
      else throw new ToolError(`unknown method ${method}`, METHOD_NOT_FOUND);
      // A result that is not JSON (a BigInt) throws in #send before anything
      // is written, and the catch below answers with an error instead.
      this.#send({ jsonrpc: "2.0", id, result: result ?? null });
    } catch (e) {
      // One response per request, whatever broke.
      const err = e instanceof ToolError ? e : new ToolError(`tickbox.js: internal error: ${e}`, INTERNAL_ERROR);
      const error = { code: err.code, message: err.message };
      if (err.data !== undefined) error.data = err.data;
      this.#send({ jsonrpc: "2.0", id, error });
    }
  }

  call(params) {
    if (params === null || typeof params !== "object" || Array.isArray(params)) throw new Rejected("tick/call params must be an object");
    if (params.revision !== REVISION) {
      throw new ToolError("the Tick Tool catalog changed; describe the Tick and prepare the call again", REVISION_MISMATCH);
    }
    const name = params.tool, args = params.args ?? {};
    const tool = typeof name === "string" ? this.tools.get(name) : undefined;
    if (!tool) throw new Rejected(`unknown tool \`${name}\``);
    if (!tool.valid(args)) throw new Rejected(problem(tool.schema, args) ?? "args break the tool's schema");
    let result;
    try {
      result = this.tick[name](this.ctx, args);
    } catch (e) {
      throw e instanceof ToolError ? e : new ToolError(`${name} failed: ${e}`);
    } finally {
      // A read-only tool promised to change nothing (header).
      if (tool.mutates) {
        this.#sync();
        this.dirty = true;
      }
    }
    return result;
  }

  describe() {
    const p = this.declarationProblem();
    if (p) throw new ToolError(p, INTERNAL_ERROR);
    const s = this.spec;
    const d = {
      protocol: PROTOCOL, kind: s.kind, title: s.title, description: s.description ?? "", revision: REVISION,
      tools: [...this.tools].map(([name, t]) => ({ name, description: t.description ?? "", input_schema: t.schema, mutates: !!t.mutates })),
    };
    if (s.recoverWith) d.recover_with = s.recoverWith;
    if (s.series) d.state = { series: Object.entries(s.series).map(([path, newest]) => ({ path, newest })) };
    if (enc.encode(JSON.stringify(d)).length > SAFE_ENCODED) throw new ToolError("the descriptor is too big for tick/describe (§5.3)", INTERNAL_ERROR);
    return d;
  }

  /** The §5.3 rules that depend on the author's declarations. */
  declarationProblem() {
    const s = this.spec;
    if (!String(s.kind ?? "").trim() || !String(s.title ?? "").trim()) return "tickbox.js: static kind and title must not be empty (§5.3)";
    for (const [name] of this.tools) {
      if (!name.trim()) return "tickbox.js: a tool has an empty name (§5.3)";
      if (typeof this.tick[name] !== "function") return `tickbox.js: the tool ${name} has no method of that name`;
    }
    if (s.recoverWith && (!this.tools.has(s.recoverWith) || this.tools.get(s.recoverWith).mutates)) {
      return `tickbox.js: recoverWith names ${s.recoverWith}, which is not a read-only tool (§9)`;
    }
    for (const [path, newest] of Object.entries(s.series ?? {})) {
      if (!(path === "" || path.startsWith("/")) || !["first", "last"].includes(newest)) {
        return `tickbox.js: series ${path}: must be a JSON Pointer and "first" or "last" (§5.3)`;
      }
    }
    return null;
  }

  /** state() as JSON, or null when it cannot be encoded. */
  #encodedState() {
    try {
      return JSON.stringify(this.tick.state()) ?? "null";
    } catch (e) {
      this.report(`tickbox.js: state() cannot be encoded as JSON: ${e}; no update was sent`);
      return null;
    }
  }

  /** Sends one update when the state changed; whether it did. */
  #sync() {
    const encoded = this.#encodedState();
    if (encoded === null || encoded === this.encoded) return false;
    // UTF-8 takes at most 3 bytes per UTF-16 unit: encode to measure only
    // a state that might be too big.
    if (encoded.length * 3 + 40 > SAFE_ENCODED && enc.encode(encoded).length + 40 > SAFE_ENCODED) {
      // Sending it would end the session (§8.2): keep the old state.
      this.report("tickbox.js: the state is too big for tick/update (§8.2); no update was sent");
      return false;
    }
    this.seq += 1;
    this.encoded = encoded;
    // null is "nothing yet": readable, never an update.
    if (encoded !== "null") this.out.push(`{"jsonrpc":"2.0","method":"tick/update","params":{"seq":${this.seq},"data":${encoded}}}\n`);
    return true;
  }

  #guarded(handler, arg) {
    try {
      this.tick[handler](this.ctx, arg);
    } catch (e) {
      this.report(`tickbox.js: ${handler} failed: ${e}`);
    }
  }

  #send(frame) {
    this.out.push(JSON.stringify(frame) + "\n");
  }

  /** The frames of this event, encoded at once (frames are kept as text). */
  #flush() {
    if (this.out.length === 0) return NOTHING;
    const out = enc.encode(this.out.length === 1 ? this.out[0] : this.out.join(""));
    this.out = [];
    return out;
  }
}

function concat(parts, total) {
  const all = new Uint8Array(total);
  let at = 0;
  for (const p of parts) { all.set(p, at); at += p.length; }
  return all;
}
