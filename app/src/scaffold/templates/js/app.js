// The counter of the Tick protocol's Appendix A, on the tickbox.js SDK.
//
// A person presses `+` or `-` in the view; a client calls `increment`;
// `auto` adds one on a timer. All change one value, and the SDK turns every
// change into one `tick/update`. Build: ./build.sh; debug natively:
// node ../../sdks/js/native.js app.js

import { Rejected, Tick, box, t } from "./tickbox.js";

const HISTORY = 256, IN_STATE = 32; // changes kept; changes the state carries (§6.4)
const MAX = Number.MAX_SAFE_INTEGER; // every value stays exact in JSON

export default class Counter extends Tick {
  static kind = "example.counter";
  static title = "Counter";
  static description = "Keyboard and tool calls share one value.";
  static recoverWith = "history";
  static series = { "/recent": "last" };
  static tools = {
    increment: { description: "Add an integer to the counter.", mutates: true, args: { amount: t.integer() } },
    history: { description: "Read the last 256 changes." },
    auto: {
      description: "Add one every every_ms milliseconds (20 to 60000); 0 stops.",
      mutates: true,
      args: { every_ms: t.integer({ minimum: 0, maximum: 60000 }) },
    },
  };
  value = 0; changes = 0; log = []; autoMs = 0; timer = null;

  /** The one place the value changes, for keys, tools and the timer. */
  change(by) {
    if (Math.abs(this.value + by) <= MAX) {
      this.value += by;
      this.log.push({ seq: ++this.changes, value: this.value });
      if (this.log.length > HISTORY) this.log.shift();
    }
    return this.value;
  }
  state() { return { value: this.value, recent: this.log.slice(-IN_STATE) }; }
  increment(ctx, { amount }) {
    if (Math.abs(this.value + amount) > MAX) throw new Rejected("the counter would overflow");
    return { value: this.change(amount) };
  }
  history() { return { recent: this.log }; }
  auto(ctx, { every_ms }) {
    if (every_ms > 0 && every_ms < 20) throw new Rejected("every_ms is 0 or 20..60000");
    ctx.cancel(this.timer);
    this.autoMs = every_ms;
    this.timer = every_ms ? ctx.every(every_ms) : null;
    return { every_ms };
  }
  onTimer() { this.change(1); }
  onKey(ctx, key) { if (key === "+" || key === "-") this.change(key === "+" ? 1 : -1); }
  view(ctx) {
    const auto = this.autoMs ? `+1 every ${this.autoMs} ms` : "off";
    const rows = [`Counter: ${this.value}`, `auto: ${auto}`, `view: ${ctx.cols}x${ctx.rows}`];
    return box("Counter (JavaScript)", rows, "[+] add one  [-] subtract one", 33);
  }
}
