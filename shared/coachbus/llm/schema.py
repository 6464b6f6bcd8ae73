"""JSON-Schema plumbing: the ``response_format`` we send, parsing and validating
what comes back, and (for the simulator) generating schema-valid instances."""

from __future__ import annotations

import functools
import json
import random
import re
import uuid
from datetime import UTC, datetime, timedelta
from typing import Any, Literal

from pydantic import BaseModel, ValidationError

from coachbus.llm.api import M, OutputFailure

_THINK = re.compile(r"<think>.*?</think>", re.DOTALL)
_FENCE = re.compile(r"^```(?:json)?\s*(.*?)\s*```$", re.DOTALL)
_NAME = re.compile(r"[^A-Za-z0-9_-]")


def schema_name(model: type[BaseModel]) -> str:
    # OpenAI-style servers accept [A-Za-z0-9_-]{1,64} only.
    return _NAME.sub("_", model.__name__)[:64] or "result"


@functools.cache
def _schema_of(model: type[BaseModel]) -> dict[str, Any]:
    # Building a JSON schema walks the whole model; it never changes, and it was
    # the largest single cost per LLM call in the benchmark profile.
    return model.model_json_schema()


def response_format(
    model: type[BaseModel], mode: Literal["json_schema", "json_object"]
) -> dict[str, Any]:
    """The ``response_format`` body field for ``model``.

    ``json_schema`` is the OpenAI/vLLM/SGLang shape. ``json_object`` with an inline
    ``schema`` is what llama.cpp's servers understand (they answer the other with 500).
    """
    schema = _schema_of(model)
    if mode == "json_object":
        return {"type": "json_object", "schema": schema}
    return {
        "type": "json_schema",
        "json_schema": {"name": schema_name(model), "schema": schema, "strict": True},
    }


def strip_reasoning(text: str) -> str:
    """Drop inline ``<think>`` blocks (servers without a reasoning parser leave them
    in the content); an unclosed block means the answer never started."""
    text = _THINK.sub("", text)
    if "<think>" in text:
        text = text.split("<think>", 1)[0]
    return text.strip()


class ParseFailure(Exception):
    def __init__(self, kind: OutputFailure, errors: list[str]) -> None:
        super().__init__(f"{kind}: {errors}")
        self.kind = kind
        self.errors = errors


def parse_structured(text: str, model: type[M], finish_reason: str | None) -> M:
    """Parse and validate a structured answer, whatever the server promised.

    Servers differ in what they enforce (llama.cpp ignores numeric bounds, a
    length cut leaves half a document), so the pydantic model has the last word.
    """
    body = strip_reasoning(text)
    fenced = _FENCE.match(body)
    if fenced:
        body = fenced.group(1)
    if not body:
        kind: OutputFailure = "truncated" if finish_reason == "length" else "empty"
        raise ParseFailure(kind, ["the answer is empty"])
    try:
        raw = json.loads(body)
    except json.JSONDecodeError as exc:
        if finish_reason == "length":
            raise ParseFailure(
                "truncated", [f"answer cut at the token limit ({exc.msg} at char {exc.pos})"]
            ) from exc
        raise ParseFailure("invalid_json", [f"invalid JSON: {exc.msg} at char {exc.pos}"]) from exc
    try:
        return model.model_validate(raw)
    except ValidationError as exc:
        errors = [
            f"{'.'.join(str(p) for p in err['loc']) or '<root>'}: {err['msg']}"
            for err in exc.errors(include_url=False)
        ]
        raise ParseFailure("schema", errors) from exc


# --------------------------------------------------------------------------- instances

_WORDS = [
    "steady",
    "progress",
    "small",
    "step",
    "focus",
    "plan",
    "morning",
    "walk",
    "week",
    "goal",
    "habit",
    "energy",
    "rest",
    "clear",
    "kind",
    "honest",
    "gentle",
    "start",
    "today",
    "review",
    "practice",
    "notice",
    "value",
    "time",
    "calm",
    "reason",
    "choice",
    "effort",
    "trust",
    "routine",
    "balance",
    "learn",
    "attempt",
    "support",
    "reflect",
]


class InstanceGenerator:
    """Generate an instance that validates against a JSON Schema as pydantic emits it
    (object/array/string/enum/const/integer/number with bounds/boolean/null, anyOf,
    oneOf, allOf, $ref into $defs, dicts via additionalProperties/propertyNames)."""

    def __init__(self, schema: dict[str, Any], rng: random.Random) -> None:
        self.root = schema
        self.rng = rng

    def generate(self) -> Any:
        return self._gen(self.root, depth=0)

    def _resolve(self, ref: str) -> dict[str, Any]:
        if not ref.startswith("#/"):
            raise ValueError(f"only local $ref are supported, got {ref!r}")
        node: Any = self.root
        for part in ref[2:].split("/"):
            node = node[part.replace("~1", "/").replace("~0", "~")]
        if not isinstance(node, dict):
            raise ValueError(f"$ref {ref!r} does not point at a schema")
        return node

    def _gen(self, schema: dict[str, Any] | bool, depth: int) -> Any:
        if schema is True or schema == {}:
            return self._string({}, depth)
        if schema is False:
            raise ValueError("cannot generate an instance of the false schema")
        assert isinstance(schema, dict)
        if "$ref" in schema:
            merged = {
                **self._resolve(schema["$ref"]),
                **{k: v for k, v in schema.items() if k != "$ref"},
            }
            return self._gen(merged, depth)
        if "const" in schema:
            return schema["const"]
        if "enum" in schema:
            return self.rng.choice(schema["enum"])
        for key in ("anyOf", "oneOf"):
            if key in schema:
                options = schema[key]
                non_null = [o for o in options if o.get("type") != "null"]
                # Deep in a recursive model prefer null to terminate.
                if len(non_null) < len(options) and (depth > 6 or self.rng.random() < 0.15):
                    return None
                return self._gen(self.rng.choice(non_null or options), depth)
        if "allOf" in schema:
            merged = {}
            for part in schema["allOf"]:
                merged.update(self._resolve(part["$ref"]) if "$ref" in part else part)
            return self._gen(merged, depth)
        kind = schema.get("type")
        if isinstance(kind, list):
            non_null = [k for k in kind if k != "null"]
            kind = non_null[0] if non_null else "null"
        if kind is None:
            kind = "object" if "properties" in schema else "string"
        gen = {
            "object": self._object,
            "array": self._array,
            "string": self._string,
            "integer": self._integer,
            "number": self._number,
            "boolean": self._boolean,
            "null": self._null,
        }.get(kind)
        if gen is None:
            raise ValueError(f"unsupported schema type {kind!r}")
        return gen(schema, depth)

    def _boolean(self, schema: dict[str, Any], depth: int) -> bool:
        return self.rng.random() < 0.5

    def _null(self, schema: dict[str, Any], depth: int) -> None:
        return None

    def _object(self, schema: dict[str, Any], depth: int) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for name, sub in schema.get("properties", {}).items():
            out[name] = self._gen(sub, depth + 1)
        extra = schema.get("additionalProperties")
        if isinstance(extra, dict):
            names = schema.get("propertyNames", {})
            if "$ref" in names:
                names = self._resolve(names["$ref"])
            if "enum" in names:
                keys = list(names["enum"])
            else:
                count = max(schema.get("minProperties", 0), 1 if depth < 4 else 0)
                keys = [f"{self.rng.choice(_WORDS)}_{i}" for i in range(count)]
            for key in keys:
                out[str(key)] = self._gen(extra, depth + 1)
        return out

    def _array(self, schema: dict[str, Any], depth: int) -> list[Any]:
        prefix = [self._gen(s, depth + 1) for s in schema.get("prefixItems", [])]
        lo = max(int(schema.get("minItems", 0)) - len(prefix), 0)
        hi = schema.get("maxItems")
        hi = (int(hi) - len(prefix)) if hi is not None else lo + (3 if depth < 4 else 0)
        if depth > 4:
            hi = min(hi, lo)  # recursive models: only what minItems demands
        items = schema.get("items")
        if items is None or items is False or hi <= 0:
            return prefix
        count = self.rng.randint(max(lo, min(1, hi)), max(lo, min(hi, lo + 3)))
        out: list[Any] = []
        for _ in range(count * 4):
            if len(out) >= count:
                break
            value = self._gen(items, depth + 1)
            if schema.get("uniqueItems") and value in out:
                continue
            out.append(value)
        return prefix + out

    def _string(self, schema: dict[str, Any], depth: int) -> str:
        fmt = schema.get("format")
        if fmt == "date-time":
            moment = datetime(2025, 1, 1, tzinfo=UTC) + timedelta(
                minutes=self.rng.randint(0, 10**6)
            )
            return moment.isoformat()
        if fmt == "date":
            return (
                (datetime(2025, 1, 1) + timedelta(days=self.rng.randint(0, 900))).date().isoformat()
            )
        if fmt == "uuid":
            bits = self.rng.getrandbits(128)
            return str(uuid.UUID(int=bits, version=4))
        lo = int(schema.get("minLength", 1))
        hi = int(schema.get("maxLength", max(lo, 60)))
        text = " ".join(self.rng.choice(_WORDS) for _ in range(self.rng.randint(1, 6)))
        while len(text) < lo:
            text += " " + self.rng.choice(_WORDS)
        return text[:hi].rstrip() if len(text[:hi].rstrip()) >= lo else text[:hi]

    def _bounds(
        self, schema: dict[str, Any]
    ) -> tuple[float | None, float | None, float | None, float | None]:
        return (
            schema.get("minimum"),
            schema.get("maximum"),
            schema.get("exclusiveMinimum"),
            schema.get("exclusiveMaximum"),
        )

    def _integer(self, schema: dict[str, Any], depth: int) -> int:
        mn, mx, xmn, xmx = self._bounds(schema)
        lo = int(mn) if mn is not None else (int(xmn) + 1 if xmn is not None else 0)
        hi = int(mx) if mx is not None else (int(xmx) - 1 if xmx is not None else lo + 100)
        if mn is not None and lo < mn:
            lo += 1
        step = int(schema.get("multipleOf", 1))
        candidates = [v for v in range(lo, hi + 1) if v % step == 0] or [lo]
        return self.rng.choice(candidates[:1000])

    def _number(self, schema: dict[str, Any], depth: int) -> float:
        mn, mx, xmn, xmx = self._bounds(schema)
        lo = float(mn if mn is not None else (xmn if xmn is not None else 0.0))
        hi = float(mx if mx is not None else (xmx if xmx is not None else lo + 100.0))
        for _ in range(20):
            value = round(self.rng.uniform(lo, hi), 3)
            if (xmn is None or value > xmn) and (xmx is None or value < xmx) and lo <= value <= hi:
                return value
        return (lo + hi) / 2
