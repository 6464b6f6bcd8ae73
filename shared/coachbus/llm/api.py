"""Request, result and error types of the LLM client."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Literal, TypeVar

from pydantic import BaseModel

from coachbus.contracts import Usage
from coachbus.llm.settings import LLMTier

M = TypeVar("M", bound=BaseModel)

Message = dict[str, str]
OutputFailure = Literal["invalid_json", "truncated", "whitespace", "schema", "empty"]


@dataclass(frozen=True, kw_only=True, slots=True)
class ChatRequest:
    """One chat completion, as an agent asks for it.

    ``thinking=None`` takes the agent's switch from the settings; ``timeout_s=None``
    the agent's timeout. ``deadline_at`` (the turn's absolute deadline) shortens
    the timeout further, never lengthens it.
    """

    agent: str
    tier: LLMTier = "small"
    messages: list[Message]
    response_model: type[BaseModel] | None = None
    thinking: bool | None = None
    priority: int | None = None
    max_tokens: int = 512
    temperature: float | None = None
    timeout_s: float | None = None
    deadline_at: datetime | None = None
    stop: list[str] | None = None
    # Escape hatch for server-specific fields (e.g. SGLang's or vLLM's sampling knobs).
    extra_body: dict[str, Any] = field(default_factory=dict)


@dataclass(kw_only=True, slots=True)
class ChatResult:
    """What came back. ``parsed`` is set when a ``response_model`` was asked for."""

    text: str
    parsed: BaseModel | None
    usage: Usage
    latency_s: float
    ttft_s: float | None
    finish_reason: str | None
    model: str
    tier: LLMTier
    agent: str
    # The model's reasoning (Qwen3 thinking), never parsed, kept for debugging.
    reasoning: str = ""
    # True when the server sent no usage and the counts are our own estimate.
    usage_estimated: bool = False
    attempts: int = 1

    def parsed_as(self, model: type[M]) -> M:
        if not isinstance(self.parsed, model):
            raise TypeError(f"result holds {type(self.parsed).__name__}, not {model.__name__}")
        return self.parsed


class LLMError(Exception):
    """Base of everything the client raises."""


class LLMDisabledError(LLMError):
    """No endpoint is configured for the requested tier."""


class CircuitOpenError(LLMError):
    """The endpoint's breaker is open: the call was refused without a request."""


class LLMConnectionError(LLMError):
    """The endpoint could not be reached (after retries)."""


class LLMTimeoutError(LLMError, TimeoutError):
    """The call's wall-clock (agent timeout or turn deadline) ran out."""


class LLMHTTPError(LLMError):
    def __init__(self, status: int, body: str, retry_after: float | None = None) -> None:
        super().__init__(f"HTTP {status}: {body[:300]}")
        self.status = status
        self.body = body
        self.retry_after = retry_after

    @property
    def retryable(self) -> bool:
        return self.status == 429 or self.status >= 500


class OutputError(LLMError):
    """The server answered, but the answer is unusable (tokens were spent)."""

    def __init__(self, kind: OutputFailure, errors: list[str], result: ChatResult) -> None:
        super().__init__(f"{kind}: {'; '.join(errors)[:500]}")
        self.kind = kind
        self.errors = errors
        self.result = result
