"""The LLM layer: how every agent thinks.

Client (OpenAI-compatible, streaming, retries, breaker, limits), router (the
cheapest tier that carries a decision, policy in ``policy.toml``), controller
(bounded generate → evaluate → repair loops), prompt builder (shared prefix,
per-agent budgets), token counting, and the simulator (``coachbus llm-sim``).
See docs/llm.md.
"""

from coachbus.llm.api import (
    ChatRequest,
    ChatResult,
    CircuitOpenError,
    LLMConnectionError,
    LLMDisabledError,
    LLMError,
    LLMHTTPError,
    LLMTimeoutError,
    Message,
    OutputError,
)
from coachbus.llm.breaker import CircuitBreaker
from coachbus.llm.client import ChatStream, LLMClient, describe
from coachbus.llm.controller import (
    Budget,
    BudgetExceededError,
    Controller,
    ControlOutcome,
    Generation,
    RepairContext,
    StopReason,
    error_signature,
)
from coachbus.llm.prompt import (
    Prompt,
    PromptBudgetError,
    PromptBuilder,
    PromptContext,
    Section,
    render_chatml,
    shared_prefix_ratio,
)
from coachbus.llm.router import (
    DECISION_KINDS,
    OPTIONAL_KINDS,
    REPORTED_KINDS,
    DecisionContext,
    DecisionPolicy,
    Outcome,
    Policy,
    Router,
    Severity,
    TrailStep,
)
from coachbus.llm.settings import LLMSettings, LLMTier
from coachbus.llm.tokens import EstimateCounter, TokenCounter, count_messages, default_counter

__all__ = [
    "DECISION_KINDS",
    "OPTIONAL_KINDS",
    "REPORTED_KINDS",
    "Budget",
    "BudgetExceededError",
    "ChatRequest",
    "ChatResult",
    "ChatStream",
    "CircuitBreaker",
    "CircuitOpenError",
    "ControlOutcome",
    "Controller",
    "DecisionContext",
    "DecisionPolicy",
    "EstimateCounter",
    "Generation",
    "LLMClient",
    "LLMConnectionError",
    "LLMDisabledError",
    "LLMError",
    "LLMHTTPError",
    "LLMSettings",
    "LLMTier",
    "LLMTimeoutError",
    "Message",
    "Outcome",
    "OutputError",
    "Policy",
    "Prompt",
    "PromptBudgetError",
    "PromptBuilder",
    "PromptContext",
    "RepairContext",
    "Router",
    "Section",
    "Severity",
    "StopReason",
    "TokenCounter",
    "TrailStep",
    "count_messages",
    "default_counter",
    "describe",
    "error_signature",
    "render_chatml",
    "shared_prefix_ratio",
]
