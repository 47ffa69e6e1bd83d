// TypeScript declarations of tickbox.js. A tool's `args` is declared once
// with the `t` builders; `Args<typeof spec>` is the type its method takes:
//
//   static tools = { increment: { description: "…", mutates: true, args: { amount: t.integer() } } };
//   increment(ctx: Ctx, { amount }: Args<typeof Counter.tools.increment>) { … }

export declare const PROTOCOL: 3;
export declare const INVALID_REQUEST: -32600;
export declare const METHOD_NOT_FOUND: -32601;
export declare const INVALID_PARAMS: -32602;
export declare const REVISION_MISMATCH: -32004;
export declare const TOOL_FAILED: -32000;
export declare const INTERNAL_ERROR: -32603;
export declare const MAX_LINE_BYTES: number;

/** A JSON Schema fragment that also carries the TypeScript type it accepts. */
export interface Schema<T> {
  readonly __type?: T;
  readonly optional?: boolean;
  [keyword: string]: unknown;
}
type Bounds = { minimum?: number; maximum?: number };
type Lengths = { minLength?: number; maxLength?: number; pattern?: string };
type Items = { minItems?: number; maxItems?: number };
export type Infer<S> = S extends Schema<infer T> ? T : never;
type Optional<P> = { [K in keyof P]: P[K] extends { optional: true } ? K : never }[keyof P];
/** The arguments object a tool with these `args` declarations receives. */
export type ArgsOf<P extends Record<string, Schema<unknown>>> = {
  [K in Exclude<keyof P, Optional<P>>]: Infer<P[K]>;
} & { [K in Optional<P>]?: Infer<P[K]> };
export type Args<D extends ToolSpec> = D["args"] extends Record<string, Schema<unknown>> ? ArgsOf<D["args"]> : {};

export declare const t: {
  integer(o?: Bounds): Schema<number>;
  number(o?: Bounds): Schema<number>;
  string(o?: Lengths): Schema<string>;
  boolean(): Schema<boolean>;
  array<T>(items: Schema<T>, o?: Items): Schema<T[]>;
  enum<V extends string | number | boolean>(...values: V[]): Schema<V>;
  optional<T>(schema: Schema<T>): Schema<T> & { optional: true };
  nullable<T>(schema: Schema<T>): Schema<T | null>;
  object<P extends Record<string, Schema<unknown>>>(props: P): Schema<ArgsOf<P>>;
};

export interface ToolSpec {
  description: string;
  /** Whether a call can change anything besides its result (§5.6). */
  mutates?: boolean;
  args?: Record<string, Schema<unknown>>;
}

/** A tool failed after it started: -32000 unless another code is given. */
export declare class ToolError extends Error {
  constructor(message: string, code?: number, data?: unknown);
  code: number;
  data: unknown;
}
/** Refused before anything changed: -32602, "not executed" (§3.4). */
export declare class Rejected extends ToolError {
  constructor(message: string, data?: unknown);
}

export declare class Ctx {
  readonly cols: number;
  readonly rows: number;
  /** Calls onTimer every `ms` (at least 10) until cancelled; returns its id. */
  every(ms: number): number;
  after(ms: number): number;
  cancel(id: number | null): void;
  /** A read-only tool that changed only what the view shows asks for a redraw. */
  redraw(): void;
  quit(): void;
}

/** Subclass it; declare `static kind`, `title`, `description`, `tools`
 * (and optionally `recoverWith`, `series`), and a method per tool. */
export declare class Tick {
  static kind: string;
  static title: string;
  static description?: string;
  static tools?: Record<string, ToolSpec>;
  static recoverWith?: string;
  static series?: Record<string, "first" | "last">;
  onStart?(ctx: Ctx): void;
  state(): unknown;
  view(ctx: Ctx): string | string[];
  onKey(ctx: Ctx, key: string): void;
  onTimer(ctx: Ctx, id: number): void;
}

export declare class KeyDecoder {
  feed(data: Uint8Array): string[];
}

/** The sans-IO dispatcher: events in, frames (whole lines) out. */
export declare class Dispatcher {
  constructor(tick: Tick, clock: () => number, cols?: number, rows?: number, report?: (problem: string) => void);
  readonly done: boolean;
  seq: number;
  nextDeadline(): number | null;
  feed(data: Uint8Array): Uint8Array;
  keys(data: Uint8Array): Uint8Array;
  resize(cols: number, rows: number): Uint8Array;
  timers(): Uint8Array;
  view(): string | string[] | null;
  handleLine(line: Uint8Array): void;
}

export declare function problem(schema: object, value: unknown, where?: string): string | null;
export declare function paint(view: string | string[]): Uint8Array;
export declare function box(title: string, lines: string[], footer?: string, width?: number): string[];
