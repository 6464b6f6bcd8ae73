"""Settings of the LLM layer (env prefix ``COACHBUS_LLM_``).

Without ``COACHBUS_LLM_BASE_URL`` (and without a per-tier URL) the layer is
disabled: the router answers from the deterministic tier and never opens a socket.
"""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from pydantic import Field, SecretStr
from pydantic_settings import BaseSettings, SettingsConfigDict

LLMTier = Literal["small", "strong"]
StructuredMode = Literal["auto", "json_schema", "json_object"]


class LLMSettings(BaseSettings):
    """Endpoints, timeouts, limits and per-agent switches of the LLM layer."""

    model_config = SettingsConfigDict(
        env_prefix="COACHBUS_LLM_", env_ignore_empty=True, extra="ignore"
    )

    base_url: str | None = None
    # Separate endpoints per tier (e.g. a small model on one GPU pool, the strong
    # one on another); each falls back to ``base_url``.
    small_base_url: str | None = None
    strong_base_url: str | None = None
    api_key: SecretStr = SecretStr("")
    small_model: str = "Qwen/Qwen3-30B-A3B"
    strong_model: str = "Qwen/Qwen3-235B-A22B"

    # How to ask for structured output. ``auto`` sends vLLM's json_schema and, if
    # the server refuses that shape (llama.cpp's server answers HTTP 500), switches
    # that endpoint to ``{"type": "json_object", "schema": ...}`` for good.
    structured_output: StructuredMode = "auto"

    # Wall-clock per call, retries included. The Coach sits on the user's fast path.
    default_timeout_s: float = Field(default=30.0, gt=0)
    timeouts_s: dict[str, float] = Field(default_factory=lambda: {"coach": 8.0, "synth": 45.0})
    connect_timeout_s: float = Field(default=3.0, gt=0)

    retry_attempts: int = Field(default=3, ge=1, le=10)
    retry_wait_initial_s: float = Field(default=0.2, ge=0)
    retry_wait_max_s: float = Field(default=2.0, ge=0)
    retry_wait_jitter_s: float = Field(default=0.3, ge=0)

    # In-flight requests per endpoint: beyond the server's batch size requests only
    # queue there, and queueing here keeps the per-call timeouts honest.
    # vLLM batches: the limit protects the server, it should not be the bottleneck
    # (at 16, 64 concurrent users reached only ~0.4 of the ideal throughput).
    max_concurrency: int = Field(default=64, ge=1, le=4096)
    breaker_failure_threshold: int = Field(default=5, ge=1)
    breaker_reset_s: float = Field(default=15.0, gt=0)

    # Qwen3 thinks by default; thinking costs seconds, so it is opt-in per agent.
    thinking: dict[str, bool] = Field(
        default_factory=lambda: {
            "coach": False,
            "shadow": False,
            "persona": False,
            "plasticity": False,
            "stability": False,
            "synth": False,
        }
    )
    # Hard cap on max_tokens: a structured answer that needs more is broken
    # (vllm#17393: Qwen3 can emit whitespace until the length limit).
    max_tokens_cap: int = Field(default=2048, ge=16)
    # A run of this many whitespace characters aborts the generation early.
    whitespace_run_limit: int = Field(default=160, ge=16)
    temperature: float = Field(default=0.2, ge=0, le=2)
    # vLLM only accepts ``priority`` with --scheduling-policy=priority; turn it off
    # for servers started without it.
    send_priority: bool = True
    cache_salt: str | None = None

    # Prompt budgets in tokens, per agent; the prefix shared by the agents of a
    # turn gets its own budget so that every agent truncates it identically.
    prompt_budgets: dict[str, int] = Field(
        default_factory=lambda: {
            "coach": 3000,
            "shadow": 6000,
            "persona": 6000,
            "plasticity": 4000,
            "stability": 4000,
            "synth": 6000,
        }
    )
    default_prompt_budget: int = Field(default=4000, ge=64)
    shared_prefix_budget: int = Field(default=2600, ge=32)

    # The router's policy; unset = the shipped ``policy.toml``.
    policy_file: Path | None = None
    # A folder of instruction overrides, one file per decision kind
    # (``risk_screen.txt``, ``coach_reply.txt``, …): a team tries a prompt without a
    # release, and ``coachbus replay --prompts`` scores it (see PromptBuilder.build).
    prompts_dir: Path | None = None

    @property
    def enabled(self) -> bool:
        return bool(self.base_url or self.small_base_url or self.strong_base_url)

    def url_for(self, tier: LLMTier) -> str | None:
        specific = self.small_base_url if tier == "small" else self.strong_base_url
        return specific or self.base_url

    def model_for(self, tier: LLMTier) -> str:
        return self.small_model if tier == "small" else self.strong_model

    def timeout_for(self, agent: str) -> float:
        return self.timeouts_s.get(agent, self.default_timeout_s)

    def thinking_for(self, agent: str) -> bool:
        return self.thinking.get(agent, False)

    def prompt_budget_for(self, agent: str) -> int:
        return self.prompt_budgets.get(agent, self.default_prompt_budget)
