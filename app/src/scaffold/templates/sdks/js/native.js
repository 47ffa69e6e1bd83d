#!/usr/bin/env node
// Runs a Tick natively with Node, for debugging the same source the
// component is built from:   node native.js ./app.js
// Protocol on stdin/stdout; the view is the controlling terminal when there
// is one (keys in raw mode, resizes), else stderr.

import { openSync, readSync, writeSync } from "node:fs";
import { resolve } from "node:path";
import { pathToFileURL } from "node:url";
import tty from "node:tty";
import { Dispatcher, paint } from "./tickbox.js";

const App = (await import(pathToFileURL(resolve(process.argv[2] ?? "app.js")).href)).default;

let term = null;
try {
  const fd = openSync("/dev/tty", "r+");
  term = { input: new tty.ReadStream(fd), output: new tty.WriteStream(fd) };
  term.input.setRawMode(true);
} catch {
  // No terminal: no keys, and the view goes to stderr.
}
const viewOut = term?.output ?? process.stderr;
const size = () => [viewOut.columns || 120, viewOut.rows || 30];
const writeAll = (fd, data) => {
  for (let at = 0; at < data.length;) at += writeSync(fd, data, at);
};
const d = new Dispatcher(new App(), () => performance.now(), ...size(), (text) => process.stderr.write(text + "\n"));
let timer = null;

// After every event: draw, write nothing else, and set the next timer.
function settle() {
  const v = d.view();
  if (v !== null) viewOut.write(paint(v));
  clearTimeout(timer);
  const due = d.nextDeadline();
  if (due !== null) {
    timer = setTimeout(() => {
      writeAll(1, d.timers());
      settle();
    }, Math.max(0, due - performance.now()));
  }
  if (d.done) process.exit(0);
}

process.stdin.on("data", (chunk) => {
  writeAll(1, d.feed(new Uint8Array(chunk)));
  settle();
});
process.stdin.on("end", () => process.exit(0)); // every request was answered
term?.input.on("data", (chunk) => {
  writeAll(1, d.keys(new Uint8Array(chunk)));
  settle();
});
viewOut.on?.("resize", () => {
  writeAll(1, d.resize(...size()));
  settle();
});
settle();
