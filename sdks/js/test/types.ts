// The TypeScript declarations (tickbox.d.ts) against a Tick written in
// TypeScript: `Args<typeof X.tools.name>` is the type the declared schema
// describes. cli/tests/it/sdks.rs compiles it with tsc --strict. The line
// that expects an error is the positive control: tsc fails when the error
// does not happen (if Args<> were `any`, say).
import { Tick, Ctx, t, Args, Rejected, box } from "../tickbox.js";

class Counter extends Tick {
  static kind = "example.counter";
  static title = "Counter";
  static tools = {
    increment: { description: "Add.", mutates: true, args: { amount: t.integer() } },
    named: { description: "Opt.", args: { name: t.optional(t.string()), tags: t.array(t.string()), mode: t.enum("a", "b") } },
  };
  value = 0;
  state() { return { value: this.value }; }
  increment(ctx: Ctx, { amount }: Args<typeof Counter.tools.increment>) {
    const n: number = amount;
    if (n > 1) throw new Rejected("no");
    return { value: this.value += n };
  }
  named(ctx: Ctx, a: Args<typeof Counter.tools.named>) {
    const s: string | undefined = a.name;
    const tags: string[] = a.tags;
    const m: "a" | "b" = a.mode;
    return { s, tags, m };
  }
  view(ctx: Ctx) { return box("x", [`${ctx.cols}`]); }
}
// @ts-expect-error: amount is a number, not a string
const bad: Args<typeof Counter.tools.increment> = { amount: "1" };
export { Counter, bad };
