"""A tool's argument schema, derived from its Python signature, and the
check of call arguments against it (§7.2: the Tick checks again what the
host already validated).

Supported hints: int, float, str, bool, list[T], dict (any object),
Literal[...], T | None (nullable), and Annotated[T, Range(...) or Len(...)]
for bounds. A parameter with a default is optional; every other one is
required; arguments the signature does not name are refused.
"""

import inspect
import types
import typing

# Integers the protocol carries exactly (§2.2): 2^53 - 1.
MAX_INTEGER = (1 << 53) - 1


class Range:
    """Bounds of a number: Annotated[int, Range(0, 60000)]."""

    def __init__(self, minimum=None, maximum=None):
        self.minimum, self.maximum = minimum, maximum

    def schema(self):
        return {k: v for k, v in (("minimum", self.minimum), ("maximum", self.maximum)) if v is not None}


class Len:
    """Bounds of a string's or a list's length: Annotated[str, Len(1, 80)]."""

    def __init__(self, minimum=None, maximum=None):
        self.minimum, self.maximum = minimum, maximum


class SchemaError(TypeError):
    """A hint the SDK cannot express as JSON Schema (the author's mistake)."""


def of_hint(hint):
    """JSON Schema of one type hint."""
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if origin is typing.Annotated:
        schema = of_hint(args[0])
        for extra in args[1:]:
            if isinstance(extra, Range):
                schema.update(extra.schema())
            elif isinstance(extra, Len):
                prefix = "Items" if schema.get("type") == "array" else "Length"
                if extra.minimum is not None:
                    schema["min" + prefix] = extra.minimum
                if extra.maximum is not None:
                    schema["max" + prefix] = extra.maximum
        return schema
    if origin in (typing.Union, types.UnionType):
        rest = [a for a in args if a is not type(None)]
        if len(rest) != 1 or len(args) != 2:
            raise SchemaError(f"only `T | None` unions are supported, not {hint!r}")
        return {"anyOf": [of_hint(rest[0]), {"type": "null"}]}
    if origin is typing.Literal:
        return {"enum": list(args)}
    if origin is list:
        return {"type": "array", "items": of_hint(args[0])} if args else {"type": "array"}
    simple = {int: "integer", float: "number", str: "string", bool: "boolean", dict: "object", list: "array"}
    if hint in simple:
        return {"type": simple[hint]}
    raise SchemaError(f"no JSON Schema for the hint {hint!r}")


def of_function(fn, skip):
    """The input schema of a tool method: its parameters after the first `skip`."""
    hints = typing.get_type_hints(fn, include_extras=True)
    params = list(inspect.signature(fn).parameters.values())[skip:]
    props, required = {}, []
    for p in params:
        if p.kind not in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY):
            raise SchemaError(f"{fn.__name__}: parameter {p.name} must be a plain or keyword parameter")
        if p.name not in hints:
            raise SchemaError(f"{fn.__name__}: parameter {p.name} has no type hint")
        props[p.name] = of_hint(hints[p.name])
        if p.default is p.empty:
            required.append(p.name)
    schema = {"type": "object", "properties": props, "additionalProperties": False}
    if required:
        schema["required"] = required
    return schema


# The JSON type names of of_hint's schemas, as tests of a decoded value.
_KIND_OK = {
    "integer": lambda v: isinstance(v, int) and not isinstance(v, bool) and -MAX_INTEGER <= v <= MAX_INTEGER,
    "number": lambda v: isinstance(v, (int, float)) and not isinstance(v, bool),
    "string": lambda v: isinstance(v, str),
    "boolean": lambda v: isinstance(v, bool),
    "object": lambda v: isinstance(v, dict),
    "array": lambda v: isinstance(v, list),
    "null": lambda v: v is None,
}


def validator(schema):
    """`schema` compiled once into a yes/no test, for the path every call
    takes: `problem` looks up every keyword it knows in every schema it
    walks, a dozen lookups and tests per value even for a tool without
    arguments, on each call in the component's interpreter. The test agrees
    with `problem` on every value (the property tests hold the two to it);
    `problem` runs only when it says no, to say why."""
    if "anyOf" in schema:
        alternatives = [validator(s) for s in schema["anyOf"]]
        return lambda v: any(ok(v) for ok in alternatives)
    if "enum" in schema:
        enum = schema["enum"]
        return lambda v: any(v == e and type(v) is type(e) for e in enum)
    kind = schema.get("type")
    # In problem's order: a bound is compared only with a value of the type.
    tests = [_KIND_OK[kind]] if kind else []
    if "minimum" in schema:
        tests.append(lambda v, m=schema["minimum"]: not v < m)
    if "maximum" in schema:
        tests.append(lambda v, m=schema["maximum"]: not v > m)
    for key in ("minLength", "minItems"):
        if key in schema:
            tests.append(lambda v, m=schema[key]: not len(v) < m)
    for key in ("maxLength", "maxItems"):
        if key in schema:
            tests.append(lambda v, m=schema[key]: not len(v) > m)
    if kind == "array" and "items" in schema:
        item = validator(schema["items"])
        tests.append(lambda v: all(item(x) for x in v))
    if kind == "object" and "properties" in schema:
        required = schema.get("required", [])
        props = {name: validator(s) for name, s in schema["properties"].items()}

        def members_ok(v):
            for name in required:
                if name not in v:
                    return False
            for name, item in v.items():
                ok = props.get(name)
                if ok is None or not ok(item):
                    return False
            return True

        tests.append(members_ok)
    if not tests:
        return lambda v: True
    test = tests[0]
    for more in tests[1:]:
        test = (lambda a, b: lambda v: a(v) and b(v))(test, more)
    return test


def problem(schema, v, where="args"):
    """Why `v` breaks `schema` (the subset of_hint makes), or None."""
    if "anyOf" in schema:
        if all(problem(s, v, where) for s in schema["anyOf"]):
            return f"{where} has the wrong type"
        return None
    if "enum" in schema:
        # bool is an int in Python: compare types too, as JSON does.
        if not any(v == e and type(v) is type(e) for e in schema["enum"]):
            return f"{where} must be one of {schema['enum']}"
        return None
    kind = schema.get("type")
    if kind and not _KIND_OK[kind](v):
        return f"{where} must be of type {kind}"
    if "minimum" in schema and v < schema["minimum"]:
        return f"{where} must be at least {schema['minimum']}"
    if "maximum" in schema and v > schema["maximum"]:
        return f"{where} must be at most {schema['maximum']}"
    for key in ("minLength", "minItems"):
        if key in schema and len(v) < schema[key]:
            return f"{where} breaks {key} {schema[key]}"
    for key in ("maxLength", "maxItems"):
        if key in schema and len(v) > schema[key]:
            return f"{where} breaks {key} {schema[key]}"
    if kind == "array" and "items" in schema:
        for i, item in enumerate(v):
            p = problem(schema["items"], item, f"{where}[{i}]")
            if p:
                return p
    if kind == "object" and "properties" in schema:
        for name in schema.get("required", []):
            if name not in v:
                return f"{where}.{name} is required"
        for name, item in v.items():
            if name not in schema["properties"]:
                return f"{where}.{name} is not an argument of this tool"
            p = problem(schema["properties"][name], item, f"{where}.{name}")
            if p:
                return p
    return None
