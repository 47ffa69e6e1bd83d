"""Property tests of the Python SDK's dispatcher and key decoder, with
hypothesis, seeded from the fuzz corpus the Rust SDK's fuzz targets use
(fuzz/corpus/dispatch and keys: sessions recorded from the test Ticks).

    python3 sdks/python/tests/properties.py            # must pass
    TICKBOX_SDK_BROKEN=seq python3 .../properties.py   # must fail

The second line is the positive control: it runs the same properties
against a dispatcher that reuses update seqs, and a test that cannot see
that would pass it. cli/tests/it/sdks.rs runs both.
"""

import json
import os
import sys

from hypothesis import example, given, settings
from hypothesis import strategies as st

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))
CORPUS = os.path.join(HERE, "..", "..", "..", "fuzz", "corpus")

from typing import Annotated, Literal  # noqa: E402

from tickbox_tick import Dispatcher, Len, Range, Rejected, Tick, tool  # noqa: E402
from tickbox_tick import schema as schemas  # noqa: E402
from tickbox_tick.keys import Decoder  # noqa: E402

if os.environ.get("TICKBOX_SDK_BROKEN") == "seq":
    # The deliberate bug: a change sends an update without a new seq.
    _sync = Dispatcher._sync

    def _broken_sync(self):
        seq = self.seq
        changed = _sync(self)
        if changed:
            self.seq = seq
            if self.out and b'"tick/update"' in self.out[-1]:
                self.out[-1] = self.out[-1].replace(b'"seq":%d' % (seq + 1), b'"seq":%d' % seq)
        return changed

    Dispatcher._sync = _broken_sync


class Fuzzed(Tick):
    kind, title, description = "fuzz.dispatch", "Fuzzed", "The dispatcher under arbitrary input."
    recover_with, series = "history", {"/log": "last"}

    def __init__(self):
        self.value, self.log = 0, []

    def state(self):
        return {"value": self.value, "log": self.log}

    # The fixtures' tool names (tests/ticks), so their sessions reach tools.
    @tool("Add to the value.", mutates=True)
    def increment(self, ctx, amount: int):
        self.value += amount
        self.log = (self.log + [self.value])[-64:]
        return {"value": self.value}

    @tool("Add one.", mutates=True)
    def bump(self, ctx):
        return self.increment(ctx, 1)

    @tool("The log.")
    def history(self, ctx):
        return {"log": self.log}

    @tool("Any args back.")
    def echo(self, ctx, text: str = "", n: int | None = None):
        return {"text": text, "n": n}

    @tool("Fails after starting.", mutates=True)
    def fail(self, ctx):
        raise RuntimeError("boom")

    @tool("Refuses.", mutates=True)
    def refuse(self, ctx, why: str):
        raise Rejected(why)

    def on_key(self, ctx, key):
        if key == "+":
            self.value += 1


def corpus(target):
    d = os.path.join(CORPUS, target)
    out = []
    for name in sorted(os.listdir(d)):
        with open(os.path.join(d, name), "rb") as f:
            out.append(f.read())
    assert out, f"no seeds in {d}"
    return out


# The fixtures' sessions, also with the revision this SDK serves, so that
# the seeds reach the tools and not only the revision check.
SEEDS = corpus("dispatch")
SEEDS += [s.replace(b'"revision":"r1"', b'"revision":"1"') for s in SEEDS]
KEY_SEEDS = corpus("keys")

ids = st.one_of(st.integers(-3, 2**53 + 3), st.none(), st.text(max_size=3), st.floats(allow_nan=False))
methods = st.sampled_from(["tick/describe", "tick/read", "tick/call", "tick/other", 7, None])
json_values = st.recursive(st.none() | st.booleans() | st.integers(-2**63, 2**63) | st.text(max_size=5),
                           lambda c: st.lists(c, max_size=3) | st.dictionaries(st.text(max_size=4), c, max_size=3),
                           max_leaves=8)
call_params = st.fixed_dictionaries({
    "tool": st.sampled_from(["increment", "bump", "history", "echo", "fail", "refuse", "nope", ""]),
    "args": st.one_of(st.fixed_dictionaries({"amount": st.integers(-2**60, 2**60)}), st.dictionaries(
        st.sampled_from(["amount", "text", "n", "why", "x"]), json_values, max_size=3), json_values),
    "revision": st.sampled_from(["1", "1", "r1", 1]),
})
requests = st.builds(lambda i, m, p, v: json.dumps({"jsonrpc": v, "id": i, "method": m, "params": p}).encode(),
                     ids, methods, st.one_of(call_params, json_values), st.sampled_from(["2.0", "2.0", "1.0"]))
# Well-formed calls that change the state, so sessions have several updates.
changes = st.builds(lambda i, a: json.dumps({"jsonrpc": "2.0", "id": i, "method": "tick/call", "params": {
    "tool": "increment", "args": {"amount": a}, "revision": "1"}}).encode(), st.integers(0, 50), st.integers(1, 9))
lines = st.one_of(requests, requests, changes, st.binary(max_size=40), st.sampled_from([l for s in SEEDS for l in s.split(b"\n")]))
sessions = st.one_of(st.sampled_from(SEEDS), st.lists(lines, max_size=12).map(lambda ls: b"\n".join(ls) + b"\n"))


def usable_id(line):
    """The id a line must be answered with, or None (no reply at all)."""
    try:
        msg = json.loads(line)
    except (ValueError, RecursionError):
        return None
    if not isinstance(msg, dict) or not isinstance(msg.get("method"), str):
        return None
    i = msg.get("id")
    return i if type(i) is int and 0 <= i < 2**53 else None


def run(session, cuts):
    """Feeds `session` (protocol lines, then key bytes after 0xff) in pieces
    cut at `cuts`; returns the frames written."""
    lines, _, keys = session.partition(b"\xff")
    d = Dispatcher(Fuzzed(), clock=lambda: 0)
    out, at = b"", 0
    for cut in sorted(c % (len(lines) + 1) for c in cuts) + [len(lines)]:
        out += d.feed(lines[at:cut])
        at = max(at, cut)
    out += d.keys(keys)
    return lines, out


@settings(max_examples=300, deadline=None, derandomize=True, database=None)
@given(sessions, st.lists(st.integers(0, 10**6), max_size=6))
@example(SEEDS[-1], [])
def test_dispatcher_keeps_the_protocol(session, cuts):
    lines, out = run(session, cuts)
    assert out == b"" or out.endswith(b"\n"), "a partial line"
    expected = [i for i in (usable_id(l) for l in lines.split(b"\n")[:-1]) if i is not None]
    answered, last_seq, updates = [], 0, 0
    for frame in out.split(b"\n")[:-1]:
        msg = json.loads(frame)
        assert msg["jsonrpc"] == "2.0", frame
        if "id" in msg:
            assert msg["id"] is not None, f"id null: {frame}"
            answered.append(msg["id"])
            assert ("result" in msg) != ("error" in msg), frame
            if "error" in msg:
                assert type(msg["error"]["code"]) is int and isinstance(msg["error"]["message"], str), frame
            elif isinstance(msg["result"], dict) and set(msg["result"]) == {"seq", "data"}:
                assert msg["result"]["seq"] >= last_seq, f"a read below the last update: {frame}"
        else:
            assert msg["method"] == "tick/update", frame
            assert msg["params"]["seq"] > last_seq, f"update seq {msg['params']['seq']} after {last_seq}"
            assert msg["params"]["data"] is not None
            last_seq, updates = msg["params"]["seq"], updates + 1
    assert answered == expected, "one response per request, in order, never to a line without a usable id"
    # How the input was cut changes nothing.
    assert out == run(session, [])[1]


@settings(max_examples=300, deadline=None, derandomize=True, database=None)
@given(st.one_of(st.sampled_from(KEY_SEEDS), st.binary(max_size=40)), st.lists(st.integers(0, 100), max_size=5))
def test_keys_do_not_depend_on_how_reads_split_them(data, cuts):
    whole = Decoder()
    expected = whole.feed(data)
    d, got, at = Decoder(), [], 0
    # Except right after an ESC: a read that ends with a lone ESC is the
    # Escape key (keys.py, as the Rust SDK decides).
    cuts = [c % (len(data) + 1) for c in cuts]
    for cut in sorted(c for c in cuts if c == 0 or data[c - 1] != 0x1B) + [len(data)]:
        got += d.feed(data[at:cut])
        at = max(at, cut)
    assert got == expected and d.pending == whole.pending, (data, cuts)


def _every_hint(ctx, s: Annotated[str, Len(1, 3)], xs: Annotated[list[Annotated[int, Range(-2, 2)]], Len(0, 2)] = [],
                e: Literal["a", 1, True] | None = None, f: float = 0.0, b: bool = False, o: dict = {}):
    pass


# Every tool's schema, and one with every hint the SDK turns into a schema.
SCHEMAS = [entry[1] for entry in Dispatcher(Fuzzed(), clock=lambda: 0).tools.values()]
SCHEMAS.append(schemas.of_function(_every_hint, 1))
# Mostly values at the bounds of the schemas above, so both tests see them.
bounds = st.sampled_from(["a", "abc", "abcd", "", 1, 2, 3, -3, 1.5, True, False, None, [1, 2], [3], [1, 2, 2], [], {}])
values = st.one_of(bounds, bounds, bounds, json_values)


def schema_and_args(schema):
    """Args mostly of the schema's own names (others are refused at once)."""
    names = sorted(schema.get("properties", {})) + ["x"]
    return st.tuples(st.just(schema), st.one_of(json_values, st.dictionaries(st.sampled_from(names), values, max_size=3)))


@settings(max_examples=2000, deadline=None, derandomize=True, database=None)
@given(st.sampled_from(SCHEMAS).flatmap(schema_and_args))
# Each bound broken alone, which random dicts seldom reach.
@example((SCHEMAS[-1], {"s": "a", "xs": [3]}))
@example((SCHEMAS[-1], {"s": "a", "xs": [-3]}))
@example((SCHEMAS[-1], {"s": "a", "xs": [1, 2, 2]}))
@example((SCHEMAS[-1], {"s": "abcd"}))
@example((SCHEMAS[-1], {"s": ""}))
@example((SCHEMAS[-1], {"xs": []}))
def test_the_compiled_test_agrees_with_problem(case):
    # The dispatcher trusts the first, and reports the second.
    schema, v = case
    assert schemas.validator(schema)(v) == (schemas.problem(schema, v) is None), (schema, v)


if __name__ == "__main__":
    test_dispatcher_keeps_the_protocol()
    test_keys_do_not_depend_on_how_reads_split_them()
    test_the_compiled_test_agrees_with_problem()
    print("properties hold")
