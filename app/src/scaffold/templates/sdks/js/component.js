// The componentize-js entry point of a Tick: `wasi:cli/run` over the
// Dispatcher of tickbox.js. build.sh copies it next to the author's app.js
// (whose default export is the Tick class) and componentizes this file.
// One `wasi:io/poll` waits for stdin, the view's keys, the next resize and
// the next timer together, so timers run while no request comes (the JS
// engine's own event loop does not run while `run` waits in poll).

import { draw, getSize, keys, subscribeResize } from "tickbox:terminal/terminal@0.1.0";
import { getStdin } from "wasi:cli/stdin@0.2.12";
import { getStdout } from "wasi:cli/stdout@0.2.12";
import { now, subscribeInstant } from "wasi:clocks/monotonic-clock@0.2.12";
import { poll } from "wasi:io/poll@0.2.12";
import App from "./app.js";
import { Dispatcher, paint } from "./tickbox.js";

const dispose = Symbol.dispose || Symbol.for("dispose");
const READ = 65536n;
// blocking-write-and-flush takes at most 4096 bytes a call.
const WRITE_CHUNK = 4096;

function loop(tick) {
  const out = getStdout();
  const write = (data) => {
    for (let i = 0; i < data.length; i += WRITE_CHUNK) out.blockingWriteAndFlush(data.subarray(i, i + WRITE_CHUNK));
  };
  let size = getSize();
  const d = new Dispatcher(tick, () => Number(now() / 1_000_000n), size.cols, size.rows,
    (text) => draw(new TextEncoder().encode(text + "\r\n")));
  const requests = getStdin(), typed = keys();
  // Stream pollables are kept for the whole loop; per-wait ones (the next
  // resize, a clock instant) are released at once, so handles never pile up.
  const waiting = [requests.subscribe(), typed.subscribe(), subscribeResize(size.generation)];
  const show = () => {
    const v = d.view();
    if (v !== null) draw(paint(v));
  };
  show();
  while (!d.done) {
    const deadline = d.nextDeadline();
    const clock = deadline === null ? null : subscribeInstant(BigInt(deadline) * 1_000_000n);
    const ready = poll(clock ? [...waiting, clock] : waiting);
    if (clock) clock[dispose]();
    write(d.timers());
    if (ready.includes(2)) {
      size = getSize();
      waiting[2][dispose]();
      waiting[2] = subscribeResize(size.generation);
      write(d.resize(size.cols, size.rows));
    }
    if (ready.includes(1)) {
      try {
        write(d.keys(typed.read(READ)));
      } catch {
        // The key stream never closes while the Tick runs.
      }
    }
    if (ready.includes(0)) {
      let chunk;
      try {
        chunk = requests.read(READ);
      } catch {
        return; // stdin closed: every request was answered; exit
      }
      write(d.feed(chunk));
    }
    show();
  }
}

export const run = {
  run() {
    loop(new App());
  },
};
