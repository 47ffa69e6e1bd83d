// tickbox inspect: the page's only script. Everything the Tick controls
// (names, descriptions, titles, state, screen text, results, frames) is
// put into the page with textContent or text nodes, never parsed as markup;
// the server's Content-Security-Policy allows no other script.
"use strict";

const $ = (id) => document.getElementById(id);

/** An element with a class and text (text only, never markup). */
function el(tag, cls, text) {
  const e = document.createElement(tag);
  if (cls) e.className = cls;
  if (text !== undefined && text !== null) e.textContent = String(text);
  return e;
}

function clear(node) {
  while (node.firstChild) node.removeChild(node.firstChild);
}

let catalog = null;
let maxFrames = 1000;

// ---- the token ----

// The printed URL carries the token after `#`, which the browser sends to
// no server. It is kept in this tab's sessionStorage, which only this
// origin (this port) can read, so a reload still has it, and sent as a
// header on each request. Never a cookie: the browser would send a cookie
// for 127.0.0.1 to every port there, whoever listens on it.
const TOKEN_KEY = "tickbox-inspect-token";
let token = null;

function takeToken() {
  const m = /^#(?:.*&)?token=([^&]+)/.exec(location.hash);
  if (m) {
    token = m[1];
    // Out of the address bar (and this history entry).
    history.replaceState(null, "", location.pathname + location.search);
  }
  try {
    if (token) sessionStorage.setItem(TOKEN_KEY, token);
    else token = sessionStorage.getItem(TOKEN_KEY);
  } catch (_) { /* no storage: the token lives in this page only */ }
  return token;
}

function authHeaders(more) {
  return Object.assign({ Authorization: `Bearer ${token}` }, more || {});
}

function noToken() {
  const s = $("status");
  s.textContent = "no token: open the URL tickbox inspect printed (the token follows its #)";
  s.className = "ended";
}

// ---- actions ----

async function post(path, body) {
  const r = await fetch(path, {
    method: "POST",
    headers: authHeaders({ "Content-Type": "application/json" }),
    body: JSON.stringify(body),
  });
  if (r.status === 401) noToken();
  let data = null;
  const text = await r.text();
  try { data = JSON.parse(text); } catch (_) { data = { message: text }; }
  return { status: r.status, data };
}

// ---- screen ----

const PALETTE = [
  "#000000", "#cd0000", "#00cd00", "#cdcd00", "#0000ee", "#cd00cd", "#00cdcd", "#e5e5e5",
  "#7f7f7f", "#ff0000", "#00ff00", "#ffff00", "#5c5cff", "#ff00ff", "#00ffff", "#ffffff",
];

function color(c) {
  if (typeof c === "number" && Number.isInteger(c) && c >= 0 && c < 256) {
    if (c < 16) return PALETTE[c];
    if (c >= 232) { const g = 8 + (c - 232) * 10; return `rgb(${g},${g},${g})`; }
    const n = c - 16, steps = [0, 95, 135, 175, 215, 255];
    return `rgb(${steps[Math.floor(n / 36)]},${steps[Math.floor(n / 6) % 6]},${steps[n % 6]})`;
  }
  if (Array.isArray(c) && c.length === 3 && c.every((x) => Number.isInteger(x) && x >= 0 && x < 256)) {
    return `rgb(${c[0]},${c[1]},${c[2]})`;
  }
  return null;
}

function drawScreen(s) {
  const screen = $("screen");
  clear(screen);
  $("screen-size").textContent = `${s.cols}×${s.rows}`;
  s.lines.forEach((runs, r) => {
    const line = el("div", "line");
    let col = 0;
    for (const run of runs) {
      const span = el("span", "", run.text);
      let fg = color(run.fg), bg = color(run.bg);
      if (run.inverse) { [fg, bg] = [bg || "#111", fg || "#ddd"]; }
      if (fg) span.style.color = fg;
      if (bg) span.style.backgroundColor = bg;
      if (run.bold) span.classList.add("b");
      if (run.dim) span.classList.add("d");
      if (run.italic) span.classList.add("i");
      if (run.underline) span.classList.add("u");
      if (s.cursor && s.cursor[0] === r && s.cursor[1] >= col && s.cursor[1] < col + run.text.length) {
        span.classList.add("has-cursor");
      }
      col += run.text.length;
      line.appendChild(span);
    }
    screen.appendChild(line);
  });
}

const KEYS = {
  Enter: "\r", Backspace: "\x7f", Tab: "\t", Escape: "\x1b",
  ArrowUp: "\x1b[A", ArrowDown: "\x1b[B", ArrowRight: "\x1b[C", ArrowLeft: "\x1b[D",
  Home: "\x1b[H", End: "\x1b[F", Delete: "\x1b[3~", PageUp: "\x1b[5~", PageDown: "\x1b[6~",
};

function keyBytes(e) {
  if (e.metaKey) return null;
  if (e.ctrlKey && e.key.length === 1) {
    const c = e.key.toLowerCase().charCodeAt(0);
    if (c >= 97 && c <= 122) return String.fromCharCode(c - 96);
    return null;
  }
  if (KEYS[e.key]) return KEYS[e.key];
  if (e.key.length === 1 || [...e.key].length === 1) return e.key;
  return null;
}

function setupScreen() {
  const screen = $("screen");
  screen.addEventListener("keydown", (e) => {
    const bytes = keyBytes(e);
    if (bytes === null) return;
    e.preventDefault();
    post("/api/keys", { bytes });
  });
  screen.addEventListener("paste", (e) => {
    const text = e.clipboardData ? e.clipboardData.getData("text") : "";
    if (text) { e.preventDefault(); post("/api/keys", { bytes: text }); }
  });
  // The panel's size in character cells is the Tick's terminal size.
  const probe = el("span", "", "M");
  probe.style.visibility = "hidden";
  probe.style.position = "absolute";
  screen.parentNode.appendChild(probe);
  let timer = null, last = "";
  const measure = () => {
    probe.style.font = getComputedStyle(screen).font;
    const w = probe.getBoundingClientRect().width || 8;
    const h = parseFloat(getComputedStyle(screen).lineHeight) || 17;
    const cols = Math.max(20, Math.min(1000, Math.floor((screen.clientWidth - 4) / w)));
    const rows = Math.max(5, Math.min(500, Math.floor((screen.clientHeight - 4) / h)));
    const size = `${cols}x${rows}`;
    if (size !== last) { last = size; post("/api/resize", { cols, rows }); }
  };
  new ResizeObserver(() => { clearTimeout(timer); timer = setTimeout(measure, 150); }).observe(screen);
}

// ---- state ----

function pointerChild(path, key) {
  return path + "/" + String(key).replace(/~/g, "~0").replace(/\//g, "~1");
}

function tree(value, path, changed, trimmed) {
  const li = el("li");
  const hit = changed.some((c) => c === path || c.startsWith(path + "/"));
  if (changed.includes(path)) li.classList.add("changed");
  if (trimmed.includes(path)) li.classList.add("trimmed");
  if (value !== null && typeof value === "object") {
    const ul = el("ul");
    const entries = Array.isArray(value) ? value.map((v, i) => [i, v]) : Object.entries(value);
    for (const [k, v] of entries) {
      const child = tree(v, pointerChild(path, k), hit ? changed : [], trimmed);
      child.insertBefore(el("span", "key", Array.isArray(value) ? `${k}: ` : `${JSON.stringify(k)}: `), child.firstChild);
      ul.appendChild(child);
    }
    li.appendChild(el("span", "val lit", Array.isArray(value) ? `[${value.length}]` : `{${entries.length}}`));
    li.appendChild(ul);
  } else {
    const cls = typeof value === "string" ? "str" : typeof value === "number" ? "num" : "lit";
    li.appendChild(el("span", "val " + cls, JSON.stringify(value)));
  }
  return li;
}

/** One cut trimming made, in words (its path and counts are data). */
function cutText(c) {
  const where = c.path === "" ? "the whole state" : c.path;
  switch (c.kept) {
    case "newest": return `${where}: kept its newest ${c.count} of ${c.of}`;
    case "ends": return `${where}: kept its first ${c.first} and last ${c.last} of ${c.of}`;
    case "prefix": return `${where}: kept its first ${c.bytes} of ${c.of} bytes`;
    case "members": return `${where}: kept its first ${c.count} of ${c.of} members`;
    case "nothing": return `${where}: nothing fit (${c.bytes} bytes), shown as null`;
    default: return `${where}: cut`;
  }
}

function drawState(s) {
  const root = $("state");
  clear(root);
  const meta = s.seq === null ? "no state yet" :
    `seq ${s.seq} · ${s.updates} updates · ${s.merged} merged into this one` + (s.at ? ` · at ${s.at}` : "");
  $("state-meta").textContent = meta;
  const cuts = Array.isArray(s.trimmed) ? s.trimmed : [];
  const note = $("state-trimmed");
  clear(note);
  note.hidden = cuts.length === 0;
  if (cuts.length > 0) {
    note.appendChild(el("div", "", "Trimmed to the delivery budget (what a subscriber gets); cut:"));
    const ul = el("ul");
    for (const c of cuts) ul.appendChild(el("li", "", cutText(c)));
    note.appendChild(ul);
    if (typeof s.recover_with === "string") {
      note.appendChild(el("div", "", `The rest: call ${s.recover_with}, or read the state whole.`));
    }
  }
  const ul = el("ul");
  ul.appendChild(tree(s.data, "", s.changed || [], cuts.map((c) => c.path)));
  root.appendChild(ul);
}

// ---- tools: a form per tool from its input schema ----

/** A field editor for `schema`: {node, get()} where get() returns the value,
 *  undefined to leave it out, or throws with a message. */
function field(schema, name, required) {
  schema = schema && typeof schema === "object" ? schema : {};
  const label = el("label");
  label.appendChild(el("span", "field-name", name + (required ? " *" : "")));
  const type = Array.isArray(schema.type) ? null : schema.type;
  if (Array.isArray(schema.enum) && schema.enum.length > 0) {
    const select = el("select");
    if (!required) select.appendChild(el("option", "", "(none)"));
    schema.enum.forEach((v, i) => { const o = el("option", "", JSON.stringify(v)); o.value = String(i); select.appendChild(o); });
    label.appendChild(select);
    return { node: label, get: () => {
      const o = select.selectedOptions[0];
      return o && o.value !== "" ? schema.enum[Number(o.value)] : undefined;
    } };
  }
  if (type === "boolean") {
    const box = el("input"); box.type = "checkbox";
    label.appendChild(box);
    return { node: label, get: () => box.checked };
  }
  if (type === "string" || type === "number" || type === "integer") {
    const input = el("input");
    input.type = type === "string" ? "text" : "number";
    if (type === "integer") input.step = "1";
    if (type === "number") input.step = "any";
    input.name = name;
    label.appendChild(input);
    return { node: label, get: () => {
      if (input.value === "") return undefined;
      if (type === "string") return input.value;
      const n = Number(input.value);
      if (!Number.isFinite(n)) throw new Error(`${name}: not a number`);
      return n;
    } };
  }
  if (type === "object" && schema.properties && typeof schema.properties === "object") {
    const set = el("fieldset");
    set.appendChild(el("legend", "", name));
    const fields = objectFields(schema, set);
    label.appendChild(set);
    return { node: label, get: () => {
      const v = collect(fields);
      return Object.keys(v).length === 0 && !required ? undefined : v;
    } };
  }
  if (type === "array" && schema.items && typeof schema.items === "object" && !Array.isArray(schema.items)) {
    const set = el("fieldset");
    set.appendChild(el("legend", "", name + " (list)"));
    const items = [];
    const list = el("div");
    const add = el("button", "", "+ item"); add.type = "button";
    add.addEventListener("click", () => {
      const f = field(schema.items, `${name}[${items.length}]`, true);
      items.push(f); list.appendChild(f.node);
    });
    set.appendChild(list); set.appendChild(add);
    label.appendChild(set);
    return { node: label, get: () => {
      const v = items.map((f) => f.get()).filter((x) => x !== undefined);
      return v.length === 0 && !required ? undefined : v;
    } };
  }
  // What a form cannot express: JSON for this value.
  const area = el("textarea"); area.rows = 2; area.placeholder = "JSON";
  label.appendChild(area);
  return { node: label, get: () => {
    if (area.value.trim() === "") return undefined;
    try { return JSON.parse(area.value); } catch (e) { throw new Error(`${name}: ${e.message}`); }
  } };
}

function objectFields(schema, parent) {
  const required = Array.isArray(schema.required) ? schema.required : [];
  const fields = [];
  for (const [name, sub] of Object.entries(schema.properties || {})) {
    const f = field(sub, name, required.includes(name));
    if (sub && typeof sub.description === "string") f.node.appendChild(el("span", "desc", " " + sub.description));
    fields.push([name, f]);
    parent.appendChild(f.node);
  }
  return fields;
}

function collect(fields) {
  const out = {};
  for (const [name, f] of fields) {
    const v = f.get();
    if (v !== undefined) out[name] = v;
  }
  return out;
}

function ask(text) {
  return new Promise((resolve) => {
    $("confirm-text").textContent = text;
    $("confirm").hidden = false;
    const done = (yes) => { $("confirm").hidden = true; resolve(yes); };
    $("confirm-yes").onclick = () => done(true);
    $("confirm-no").onclick = () => done(false);
    $("confirm-yes").focus();
  });
}

function showOutcome(box, r) {
  clear(box);
  const d = r.data || {};
  if (d.ok !== undefined) {
    box.appendChild(el("div", "latency", `ok in ${d.latency_ms} ms`));
    box.appendChild(el("pre", "result", JSON.stringify(d.ok, null, 2)));
  } else if (d.error) {
    const e = d.error;
    const head = e.kind === "tool" ? `error ${e.code} (${e.executed ? "may have had effects" : "not executed"})` : `refused (${e.kind})`;
    box.appendChild(el("div", "error", `${head}: ${e.message}` + (d.latency_ms !== undefined ? ` — in ${d.latency_ms} ms` : "")));
    if (e.data !== undefined && e.data !== null) box.appendChild(el("pre", "result", JSON.stringify(e.data, null, 2)));
  } else {
    box.appendChild(el("div", "error", `HTTP ${r.status}: ${d.message || ""}`));
  }
}

function drawTools(c) {
  const root = $("tools");
  clear(root);
  $("revision").textContent = c ? `catalog revision ${c.revision}` : "";
  $("tick-title").textContent = c ? c.title : "";
  if (!c) return;
  for (const tool of c.tools) {
    const form = el("form", "tool");
    form.dataset.tool = tool.name;
    const head = el("div");
    head.appendChild(el("span", "tool-name", tool.name));
    if (tool.mutates) head.appendChild(el("span", "mutates", "mutates: asks to confirm"));
    form.appendChild(head);
    form.appendChild(el("div", "desc", tool.description));
    const schema = tool.input_schema || {};
    const fieldsBox = el("div", "fields");
    const fields = objectFields(schema, fieldsBox);
    form.appendChild(fieldsBox);
    const jsonToggle = el("label");
    const jsonBox = el("input"); jsonBox.type = "checkbox"; jsonBox.className = "as-json";
    jsonToggle.appendChild(jsonBox);
    jsonToggle.appendChild(document.createTextNode(" edit the args as JSON"));
    form.appendChild(jsonToggle);
    const area = el("textarea", "args-json"); area.rows = 3; area.hidden = true; area.value = "{}";
    form.appendChild(area);
    jsonBox.addEventListener("change", () => {
      area.hidden = !jsonBox.checked; fieldsBox.hidden = jsonBox.checked;
      if (jsonBox.checked) { try { area.value = JSON.stringify(collect(fields), null, 1); } catch (_) { /* keep */ } }
    });
    const call = el("button", "call", "Call"); call.type = "submit";
    form.appendChild(call);
    const out = el("div", "outcome");
    form.appendChild(out);
    form.addEventListener("submit", async (e) => {
      e.preventDefault();
      let args;
      try {
        args = jsonBox.checked ? JSON.parse(area.value) : collect(fields);
      } catch (err) {
        clear(out); out.appendChild(el("div", "error", `not sent: ${err.message}`));
        return;
      }
      clear(out); out.appendChild(el("div", "", "calling…"));
      let r = await post("/api/call", { tool: tool.name, args });
      if (r.status === 409 && r.data && r.data.confirm) {
        const { tool: name, revision } = r.data.confirm;
        const yes = await ask(`Call ${name}? It mutates the Tick's state. Approved for catalog revision ${revision}.`);
        if (!yes) { clear(out); out.appendChild(el("div", "", "not called")); return; }
        r = await post("/api/call", { tool: tool.name, args, confirm: r.data.confirm });
      }
      showOutcome(out, r);
    });
    root.appendChild(form);
  }
}

// ---- timeline ----

const DIRS = { "to tick": "→ tick", "from tick": "← tick", "to host": "→ host", "from host": "← host" };

function frameRow(f) {
  const tr = el("tr", String(f.dir).replace(" ", "-"));
  const cells = [f.n, (f.t_ms / 1000).toFixed(3), DIRS[f.dir] || f.dir, f.method || "(response)",
    f.id === null || f.id === undefined ? "" : f.id, f.size, f.latency_ms === null || f.latency_ms === undefined ? "" : `${f.latency_ms} ms`];
  for (const c of cells) tr.appendChild(el("td", "", c));
  const p = el("td", "preview", f.preview);
  p.title = f.preview;
  tr.appendChild(p);
  tr.dataset.search = `${f.dir} ${f.method} ${f.id || ""}`.toLowerCase();
  applyFilter(tr);
  return tr;
}

function applyFilter(tr) {
  const q = $("filter").value.trim().toLowerCase();
  tr.hidden = q !== "" && !tr.dataset.search.includes(q);
}

function addFrame(f) {
  const body = $("frames").tBodies[0];
  body.appendChild(frameRow(f));
  while (body.rows.length > maxFrames) body.deleteRow(0);
  $("timeline-meta").textContent = `${body.rows.length} frames shown (the last ${maxFrames} kept)`;
}

// ---- the event stream ----

/** What the page drives: a Tick started here, or a live instance. */
function drawTarget(t) {
  if (!t) return;
  const live = t.kind === "live";
  $("target").textContent = live ? `live instance @${t.name} (${t.backend}, pid ${t.pid})` : "";
  $("timeline-title").textContent = live ? "Live socket" : "Protocol";
  $("timeline-note").textContent = t.timeline;
  const link = $("export-audit");
  link.hidden = !t.audit;
  $("no-audit").hidden = !!t.audit;
  $("no-audit").title = t.audit_note || "";
}

function hello(h) {
  drawTarget(h.target);
  catalog = h.catalog;
  maxFrames = (h.limits && h.limits.timeline_frames) || maxFrames;
  drawTools(catalog);
  drawState(h.state);
  drawScreen(h.screen);
  clear($("frames").tBodies[0]);
  h.frames.forEach(addFrame);
  if (h.frames_dropped) $("timeline-meta").textContent += ` · ${h.frames_dropped} older dropped`;
  if (h.ended) ended(h.ended);
}

function ended(e) {
  const s = $("status");
  s.textContent = `ended: ${e.reason}`;
  s.className = "ended";
  const words = $("last-words");
  clear(words);
  const lines = Array.isArray(e.last_words) ? e.last_words : [];
  words.hidden = lines.length === 0;
  if (lines.length > 0) {
    words.appendChild(el("div", "", "The Tick's last words (the end of its screen):"));
    words.appendChild(el("pre", "", lines.join("\n")));
  }
}

// The event stream is read with fetch, which can send the token as a
// header (an EventSource cannot); the server's events are `event:` and
// `data:` lines, each event ended by a blank line.
function dispatch(block, handlers) {
  let name = "message";
  const data = [];
  for (const line of block.split("\n")) {
    if (line.startsWith(":")) continue;
    const colon = line.indexOf(":");
    const field = colon < 0 ? line : line.slice(0, colon);
    let value = colon < 0 ? "" : line.slice(colon + 1);
    if (value.startsWith(" ")) value = value.slice(1);
    if (field === "event") name = value;
    else if (field === "data") data.push(value);
  }
  const f = handlers[name];
  if (!f || data.length === 0) return;
  let parsed;
  try { parsed = JSON.parse(data.join("\n")); } catch (_) { return; }
  f(parsed);
}

/** One event stream until it ends; false once the token is refused. */
async function stream(handlers) {
  const r = await fetch("/events", { headers: authHeaders(), cache: "no-store" });
  if (r.status === 401) return false;
  if (!r.ok || !r.body) throw new Error(`HTTP ${r.status}`);
  const reader = r.body.pipeThrough(new TextDecoderStream()).getReader();
  let buf = "";
  for (;;) {
    const { value, done } = await reader.read();
    if (done) return true;
    buf += value.replace(/\r\n?/g, "\n");
    let end;
    while ((end = buf.indexOf("\n\n")) >= 0) {
      dispatch(buf.slice(0, end), handlers);
      buf = buf.slice(end + 2);
    }
  }
}

async function connect() {
  const handlers = {
    hello: (h) => { $("status").textContent = "live"; $("status").className = ""; hello(h); },
    state: drawState,
    screen: drawScreen,
    catalog: (c) => { catalog = c; drawTools(c); },
    frame: addFrame,
    ended,
  };
  // As an EventSource would: a stream that ends or fails is opened again.
  for (;;) {
    try {
      if (!(await stream(handlers))) { noToken(); return; }
    } catch (_) { /* reconnect below */ }
    if ($("status").className !== "ended") $("status").textContent = "reconnecting…";
    await new Promise((resolve) => setTimeout(resolve, 2000));
  }
}

// The exports are fetched with the token and saved from memory: a plain
// link could not send the header.
function setupExports() {
  for (const a of [$("export-scenario"), $("export-audit")]) {
    a.addEventListener("click", async (e) => {
      e.preventDefault();
      const r = await fetch(a.getAttribute("href"), { headers: authHeaders(), cache: "no-store" });
      if (r.status === 401) { noToken(); return; }
      if (!r.ok) { $("status").textContent = `export: HTTP ${r.status}`; return; }
      const url = URL.createObjectURL(await r.blob());
      const save = el("a");
      save.href = url;
      save.download = a.getAttribute("download");
      document.body.appendChild(save);
      save.click();
      save.remove();
      setTimeout(() => URL.revokeObjectURL(url), 60000);
    });
  }
}

document.addEventListener("DOMContentLoaded", () => {
  $("filter").addEventListener("input", () => {
    for (const tr of $("frames").tBodies[0].rows) applyFilter(tr);
  });
  if (!takeToken()) { noToken(); return; }
  setupExports();
  setupScreen();
  connect();
});
