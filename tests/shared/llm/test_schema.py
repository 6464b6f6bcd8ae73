"""Schema plumbing: response_format shapes, parsing, and the simulator's instance generator."""

from __future__ import annotations

import random
from datetime import datetime
from enum import StrEnum
from typing import Annotated, Literal

import jsonschema
import pytest
from pydantic import BaseModel, Field

from coachbus.contracts.payloads import (
    CoachPayload,
    PersonaPayload,
    PlasticityPayload,
    ShadowPayload,
    StabilityPayload,
)
from coachbus.llm.schema import InstanceGenerator, ParseFailure, parse_structured, response_format

pytestmark = pytest.mark.unit


class Color(StrEnum):
    RED = "red"
    BLUE = "blue"


class Leaf(BaseModel):
    name: Annotated[str, Field(min_length=3, max_length=8)]
    weight: float = Field(gt=0, lt=1)


class Tree(BaseModel):
    """Everything pydantic emits: $defs/$ref, anyOf with null, enums, dicts, bounds, recursion."""

    color: Color
    kind: Literal["oak", "pine"]
    count: int = Field(ge=3, le=7, multiple_of=2)
    ratio: float = Field(ge=-1, le=1)
    flag: bool
    maybe: int | None
    when: datetime
    leaves: list[Leaf] = Field(min_length=1, max_length=3)
    by_color: dict[Color, Leaf]
    tags: dict[str, int]
    either: Leaf | str
    children: list[Tree] = Field(default_factory=list, max_length=2)


MODELS = [Tree, PersonaPayload, ShadowPayload, StabilityPayload, PlasticityPayload, CoachPayload]


@pytest.mark.parametrize("model", MODELS, ids=lambda m: m.__name__)
def test_generated_instances_validate(model: type[BaseModel]) -> None:
    schema = model.model_json_schema()
    for seed in range(25):
        instance = InstanceGenerator(schema, random.Random(seed)).generate()
        jsonschema.validate(instance, schema)
        model.model_validate(instance)


def test_generation_is_seeded() -> None:
    schema = Tree.model_json_schema()
    a = InstanceGenerator(schema, random.Random(1)).generate()
    b = InstanceGenerator(schema, random.Random(1)).generate()
    c = InstanceGenerator(schema, random.Random(2)).generate()
    assert a == b
    assert a != c


def test_response_format_shapes() -> None:
    vllm = response_format(Leaf, "json_schema")
    assert vllm == {
        "type": "json_schema",
        "json_schema": {"name": "Leaf", "schema": Leaf.model_json_schema(), "strict": True},
    }
    assert response_format(Leaf, "json_object") == {
        "type": "json_object",
        "schema": Leaf.model_json_schema(),
    }


def test_parse_accepts_fences_and_rejects_with_reasons() -> None:
    assert (
        parse_structured('```json\n{"name": "abc", "weight": 0.5}\n```', Leaf, "stop").name == "abc"
    )
    with pytest.raises(ParseFailure) as empty:
        parse_structured("   ", Leaf, "stop")
    assert empty.value.kind == "empty"
    with pytest.raises(ParseFailure) as unclosed:
        parse_structured("<think>still thinking", Leaf, "length")
    assert unclosed.value.kind == "truncated"
    with pytest.raises(ParseFailure) as bounds:
        parse_structured('{"name": "ab", "weight": 2}', Leaf, "stop")
    assert bounds.value.kind == "schema"
    assert sorted(e.split(":")[0] for e in bounds.value.errors) == ["name", "weight"]
