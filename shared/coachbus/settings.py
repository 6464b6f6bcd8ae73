"""Settings shared by every service, read from the environment.

Each group has its own env prefix so that a deployment can set exactly what a
service needs. Secrets are ``SecretStr`` so they never end up in a log line or a
repr by accident.
"""

from __future__ import annotations

import json
import secrets
from functools import lru_cache
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field, SecretStr, field_validator, model_validator
from pydantic_settings import BaseSettings, NoDecode, SettingsConfigDict

from coachbus.roster import AGENT_SERVICES, WORKERS

if TYPE_CHECKING:
    from coachbus.bus.pacing import FetchPacer

# Bytes beyond the text's own (see max_message_bytes and max_result_bytes).
_ENVELOPE_BYTES = 16 * 1024
_RESULT_BYTES = 256 * 1024
_PLACEHOLDERS = {"changeme", "changethis", "secret", "password", ""}
# Outside local, an API key is a bearer secret on the open internet: 32 characters
# of random key material (``secrets.token_urlsafe(32)`` gives 43) are out of reach
# of guessing; "alice:x" is not.
MIN_API_KEY_CHARS = 32


class KafkaSettings(BaseSettings):
    """How to reach the broker. Unset bootstrap servers mean: use the embedded one."""

    model_config = SettingsConfigDict(env_prefix="KAFKA_", env_ignore_empty=True, extra="ignore")

    bootstrap_servers: str | None = None
    security_protocol: Literal["PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL"] = "PLAINTEXT"
    sasl_mechanism: Literal["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"] | None = None
    sasl_username: str | None = None
    sasl_password: SecretStr | None = None
    ssl_cafile: str | None = None
    ssl_certfile: str | None = None
    ssl_keyfile: str | None = None
    # A low fetch wait is what makes a hop cost milliseconds instead of a
    # quarter of a second on brokers that re-read their log on a timer (the
    # embedded Tansu). Below 15 ms a hop there gets no faster (4 ms p50 at 5 and
    # at 15 ms), but polling costs twice the CPU (see bus.pacing).
    fetch_max_wait_ms: int = Field(default=15, ge=0, le=10_000)
    # Once a replica works on ``fetch_busy_at`` users' turns at once, its fetches
    # wait this long instead: turns queue anyway, and polling less gives the CPU
    # back to them (see bus.pacing). At or below fetch_max_wait_ms: never changes.
    fetch_max_wait_busy_ms: int = Field(default=25, ge=0, le=10_000)
    fetch_busy_at: int = Field(default=4, ge=1)
    # With nothing in hand for ``fetch_idle_after_s``, fetches wait this long: idle
    # polling is what a quiet stack burns (see bus.pacing). At or below
    # fetch_max_wait_ms: never changes.
    fetch_max_wait_idle_ms: int = Field(default=250, ge=0, le=10_000)
    fetch_idle_after_s: float = Field(default=5.0, ge=0)
    # LLM calls are long: the poll loop never waits for them (see bus.dispatch),
    # but keep generous head-room for a stalled event loop anyway.
    max_poll_interval_ms: int = Field(default=600_000, ge=10_000)
    # Kafka's minimum by default: a killed consumer's partitions move after ~6 s.
    session_timeout_ms: int = Field(default=6_000, ge=1_000)
    heartbeat_interval_ms: int = Field(default=1_000, ge=100)

    @property
    def servers(self) -> str:
        return self.bootstrap_servers or "127.0.0.1:9092"

    def client_kwargs(self) -> dict[str, object]:
        """Keyword arguments understood by aiokafka clients and FastStream's broker."""
        kwargs: dict[str, object] = {"security_protocol": self.security_protocol}
        if self.sasl_mechanism:
            kwargs["sasl_mechanism"] = self.sasl_mechanism
            kwargs["sasl_plain_username"] = self.sasl_username
            kwargs["sasl_plain_password"] = (
                self.sasl_password.get_secret_value() if self.sasl_password else None
            )
        if self.security_protocol in {"SSL", "SASL_SSL"}:
            import ssl

            ctx = ssl.create_default_context(cafile=self.ssl_cafile)
            if self.ssl_certfile:
                ctx.load_cert_chain(self.ssl_certfile, self.ssl_keyfile)
            kwargs["ssl_context"] = ctx
        return kwargs

    def pacer(self) -> FetchPacer:
        """A fetch pacer for one consumer (each keeps its own current wait)."""
        from coachbus.bus.pacing import FetchPacer

        return FetchPacer(
            base_ms=self.fetch_max_wait_ms,
            busy_ms=self.fetch_max_wait_busy_ms,
            busy_at=self.fetch_busy_at,
            idle_ms=self.fetch_max_wait_idle_ms,
            idle_after_s=self.fetch_idle_after_s,
        )


class ApiKey(BaseModel):
    """One entry of ``COACHBUS_API_KEYS``: ``user_id:key`` or ``user_id:key:reviewer``."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    user_id: str
    key: SecretStr
    reviewer: bool = False


class CoachbusSettings(BaseSettings):
    """Pipeline-wide settings (env prefix ``COACHBUS_``)."""

    # hide_input_in_errors: a validation error would otherwise print the raw input,
    # COACHBUS_API_KEYS and every key in it included, into the start-up log.
    model_config = SettingsConfigDict(
        env_prefix="COACHBUS_", env_ignore_empty=True, extra="ignore", hide_input_in_errors=True
    )

    environment: Literal["local", "staging", "production"] = "local"
    topic_prefix: str = Field(default="coachbus.", pattern=r"^[A-Za-z0-9._-]*$")
    partitions: int = Field(default=6, ge=1, le=1024)
    replication_factor: int = Field(default=1, ge=1)
    # The gateway's public port when ``--port`` does not say (``coachbus run``, and
    # ``faststream run`` without ``--port``).
    gateway_port: int = Field(default=8000, ge=1, le=65535)
    # The interface a service listens on when ``faststream run`` gets no ``--host``.
    host: str = "127.0.0.1"
    # /metrics and the API docs (/docs, /openapi.json, /redoc) of the gateway are
    # served here, on the same host as the public port, never on the public port
    # itself. 0: a free port picked at start (logged).
    gateway_internal_port: int = Field(default=9000, ge=0, le=65535)
    # ``coachbus run`` only: the embedded broker's port, and the agents' and Synth's
    # /metrics and /healthz ports by service name (JSON, e.g. '{"shadow": 9101}'; a
    # service not named keeps its default, 8101-8106). Settings rather than flags
    # alone so a machine where a default port is taken runs ``make run`` unchanged.
    embedded_broker_port: int = Field(default=9092, ge=1, le=65535)
    service_ports: dict[str, int] = Field(default_factory=dict)
    api_keys: Annotated[list[ApiKey], NoDecode] = Field(default_factory=list)
    max_message_chars: int = Field(default=8_000, ge=1)
    # The gateway's cache of recent turns (replayed to late listeners): at most this
    # many turns and this many MiB of their events, oldest out first.
    turn_cache_turns: int = Field(default=10_000, ge=1)
    turn_cache_mb: int = Field(default=64, ge=1)
    # Every service hands freed heap memory back to the OS this often (see
    # coachbus.memory_trim); 0 turns it off.
    malloc_trim_s: float = Field(default=10.0, ge=0)
    # Per API key: sustained messages per minute (bursts up to the same number).
    rate_limit_per_minute: int = Field(default=60, ge=1)
    # Event streams (SSE) one user may hold open at once; more get 429.
    max_streams_per_user: int = Field(default=8, ge=1)
    # Browser origins allowed to call the API (CORS); empty: same origin only.
    cors_origins: Annotated[list[str], NoDecode] = Field(default_factory=list)
    # Synth gives up waiting for missing agents after this long and answers degraded.
    turn_deadline_ms: int = Field(default=20_000, ge=100)
    # Key-ordered concurrency: how many turns of different users one replica runs at once.
    max_concurrency: int = Field(default=64, ge=1, le=10_000)
    # Synth answers once these agents have reported (or the deadline passes).
    synth_required_agents: Annotated[list[str], NoDecode] = Field(
        default_factory=lambda: list[str](WORKERS)
    )
    # How Synth's streamed reply begins. "rendered": with the deterministic rendering's
    # first sentence (its acknowledgement, checked when it is built), shown at once,
    # and the model writes what follows it: the first synthesis text comes before
    # the model's first token. "model": the model writes the whole reply; the first
    # text waits for its first sentence.
    synth_opening: Literal["rendered", "model"] = "rendered"
    log_level: Literal["DEBUG", "INFO", "WARNING", "ERROR"] = "INFO"
    # Per-turn LLM budget carried in the user message, so a redelivery cannot refill it.
    turn_token_budget: int = Field(default=24_000, ge=0)
    turn_wall_clock_ms: int = Field(default=60_000, ge=100)
    # Retention (see coachbus.topics and docs/reliability.md): what people tell a
    # coach must not outlive its use. Event topics keep records this long; the DLQ
    # (original bytes) less; compacted state drops overwritten values and erase
    # tombstones within these bounds.
    retention_ms: int = Field(default=7 * 86_400_000, ge=3_600_000)
    dlq_retention_ms: int = Field(default=3 * 86_400_000, ge=3_600_000)
    compaction_lag_ms: int = Field(default=86_400_000, ge=60_000)
    tombstone_retention_ms: int = Field(default=86_400_000, ge=60_000)
    # The review audit (who claimed, answered, closed which item): it holds no one's
    # words, and accounting for reviews may be owed for longer than a week.
    review_audit_retention_ms: int = Field(default=90 * 86_400_000, ge=3_600_000)
    # The help-lines file crisis replies and the web chat show (unset: the shipped
    # coachbus/content/helplines.toml). A service that shows help lines reads and
    # checks it as it starts (coachbus.safety.helplines.Helplines.configured).
    helplines_file: Path | None = None
    # Whose help lines those are: a locale of that file, e.g. de-AT, checked with it.
    # Unset: the default of each user's language.
    locale: str | None = None
    # The LLM layer reads COACHBUS_LLM_* through its own settings (coachbus.llm.settings).

    @field_validator("api_keys", mode="before")
    @classmethod
    def _parse_api_keys(cls, value: object) -> object:
        if not isinstance(value, str):
            return value
        keys: list[dict[str, object]] = []
        for raw in value.split(","):
            entry = raw.strip()
            if not entry:
                continue
            parts = entry.split(":")
            if len(parts) not in (2, 3) or not parts[0] or not parts[1]:
                raise ValueError(
                    "COACHBUS_API_KEYS entries must be 'user_id:key' or 'user_id:key:reviewer'"
                )
            if len(parts) == 3 and parts[2] != "reviewer":
                raise ValueError(f"unknown role {parts[2]!r} (only 'reviewer' is known)")
            keys.append({"user_id": parts[0], "key": parts[1], "reviewer": len(parts) == 3})
        return keys

    @field_validator("cors_origins", mode="before")
    @classmethod
    def _parse_origins(cls, value: object) -> object:
        if isinstance(value, str):
            return [v.strip() for v in value.split(",") if v.strip()]
        return value

    @field_validator("synth_required_agents", mode="before")
    @classmethod
    def _parse_agents(cls, value: object) -> object:
        if isinstance(value, str):
            value = [v.strip() for v in value.split(",") if v.strip()]
        known = set(WORKERS)
        if isinstance(value, list) and not set(value) <= known:
            raise ValueError(f"unknown agents {sorted(set(value) - known)}; known: {sorted(known)}")
        return value

    @field_validator("service_ports", mode="before")
    @classmethod
    def _ports_json(cls, value: object) -> object:
        # The environment source decodes JSON itself; values handed over as keyword
        # strings (the embedded stack passes its env that way) arrive undecoded.
        return json.loads(value) if isinstance(value, str) else value

    @field_validator("service_ports")
    @classmethod
    def _known_services(cls, value: dict[str, int]) -> dict[str, int]:
        # A misspelt name would silently keep the default port: the very clash the
        # operator set it to avoid. The gateway's port has its own setting.
        known = set(AGENT_SERVICES)
        if not set(value) <= known:
            raise ValueError(
                f"unknown services {sorted(set(value) - known)}; known: {sorted(known)}"
                " (the gateway's ports: COACHBUS_GATEWAY_PORT, COACHBUS_GATEWAY_INTERNAL_PORT)"
            )
        bad = {k: v for k, v in value.items() if not 1 <= v <= 65535}
        if bad:
            raise ValueError(f"ports out of range: {bad}")
        return value

    @model_validator(mode="after")
    def _refuse_placeholders(self) -> CoachbusSettings:
        # One key for two users would make them one user (the key is the identity):
        # refused everywhere. The error names the users, never the key.
        owners: dict[str, str] = {}
        for entry in self.api_keys:
            first = owners.setdefault(entry.key.get_secret_value(), entry.user_id)
            if first != entry.user_id:
                raise ValueError(
                    f"users {first!r} and {entry.user_id!r} have the same API key; "
                    "every user needs a key of their own"
                )
        if self.environment == "local":
            return self
        for entry in self.api_keys:
            key = entry.key.get_secret_value()
            if key.lower() in _PLACEHOLDERS:
                raise ValueError(
                    f"API key of {entry.user_id!r} is a placeholder; "
                    f"refusing to start in {self.environment}"
                )
            if len(key) < MIN_API_KEY_CHARS:
                raise ValueError(
                    f"API key of {entry.user_id!r} has {len(key)} characters, fewer than "
                    f"{MIN_API_KEY_CHARS}; refusing to start in {self.environment} "
                    "(make one with: python -c 'import secrets; print(secrets.token_urlsafe(32))')"
                )
        return self

    @property
    def max_message_bytes(self) -> int:
        """The most bytes a user message may take, on the wire and on the bus: the one
        limit for a user-messages record.

        The agents dead-letter a user-messages record longer than this; the gateway
        refuses a request body longer than this and never publishes a longer record.

        Why this number: the text may hold ``max_message_chars`` characters, and
        UTF-8 takes at most 4 bytes for one; the envelope around it (ids of at most
        128 characters each, timestamps, budget, language) takes well under 1 KiB
        today, and 16 KiB leaves room for the optional fields a contract may add
        without a new version. JSON escapes a control character in 6 bytes, so a
        text of them can still exceed this: the gateway checks the encoded record,
        not the character count (services/gateway/ingress.py).
        """
        return self.max_message_chars * 4 + _ENVELOPE_BYTES

    @property
    def max_result_bytes(self) -> int:
        """The most bytes an agent result or a reply may take on the bus: Synth's limit
        for the agent topics and the tail of replies.

        Larger than a user message on purpose: a result carries what an agent made
        of the message (quotes of it as evidence, goals, steps, a reply text, its tier
        and token usage), so it gets the message's text allowance plus 256 KiB
        for the agent's own structure. A result over this is a runaway agent, not a
        long message, and is dead-lettered rather than joined.
        """
        return self.max_message_chars * 4 + _RESULT_BYTES

    def topic(self, name: str) -> str:
        return f"{self.topic_prefix}{name}"


def generate_dev_key() -> str:
    return "cb-dev-" + secrets.token_urlsafe(32)


@lru_cache(maxsize=1)
def get_settings() -> CoachbusSettings:
    return CoachbusSettings()


@lru_cache(maxsize=1)
def get_kafka_settings() -> KafkaSettings:
    return KafkaSettings()


def faststream_security(kafka: KafkaSettings) -> object | None:
    """The same connection settings, in the shape FastStream's broker takes."""
    from faststream.security import BaseSecurity, SASLPlaintext, SASLScram256, SASLScram512

    kwargs = kafka.client_kwargs()
    ssl_context = kwargs.get("ssl_context")
    use_ssl = kafka.security_protocol in {"SSL", "SASL_SSL"}
    if kafka.sasl_mechanism is None:
        return BaseSecurity(ssl_context=ssl_context, use_ssl=use_ssl) if use_ssl else None  # type: ignore[arg-type]
    cls = {"PLAIN": SASLPlaintext, "SCRAM-SHA-256": SASLScram256, "SCRAM-SHA-512": SASLScram512}[
        kafka.sasl_mechanism
    ]
    password = kafka.sasl_password.get_secret_value() if kafka.sasl_password else ""
    return cls(
        username=kafka.sasl_username or "",
        password=password,
        ssl_context=ssl_context,  # type: ignore[arg-type]
        use_ssl=use_ssl,
    )
