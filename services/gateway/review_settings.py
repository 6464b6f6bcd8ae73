"""The human tier's settings (env prefix ``COACHBUS_REVIEW_``), the gateway's alone.

The audit topic's retention is a topic setting every deployment's topic job needs,
so it is ``CoachbusSettings.review_audit_retention_ms`` (COACHBUS_REVIEW_AUDIT_RETENTION_MS).
"""

from __future__ import annotations

from typing import Literal

from pydantic import AnyHttpUrl, Field, SecretStr
from pydantic_settings import BaseSettings, SettingsConfigDict


class ReviewSettings(BaseSettings):
    model_config = SettingsConfigDict(
        env_prefix="COACHBUS_REVIEW_", env_ignore_empty=True, extra="ignore"
    )

    # A claim lapses this long after it was taken, renewed or used to answer: a
    # reviewer who walks away must not hold a crisis for ever.
    claim_ttl_s: float = Field(default=600.0, ge=10.0, le=86_400.0)
    # Where the console page and the reviewer API are served: the public port, the
    # internal port only (operators reach it over their own network), or no page
    # at all (the reviewer API stays on the public port then).
    console: Literal["public", "internal", "off"] = "public"
    # A high or critical item waiting longer than this raises the alert
    # CoachbusReviewWaiting (exported as coachbus_review_wait_limit_seconds, so the
    # rule itself never needs editing).
    alert_after_s: float = Field(default=300.0, ge=1.0)
    # How long a reviewer's request waits for its action to be folded from the log
    # (the verdict every replica agrees on) before it answers 504.
    confirm_timeout_s: float = Field(default=10.0, gt=0.0, le=120.0)
    # The person's recent turns of the item's session a reviewer sees.
    session_turns: int = Field(default=10, ge=1, le=100)
    # After the final of a turn that went to a human, the turn's event stream stays
    # open this long for the reviewer's answer, so the chat the person has open shows
    # it at once (0: it closes at the final, and a client polls the turn instead).
    stream_hold_s: float = Field(default=900.0, ge=0.0, le=86_400.0)
    # Called for every new high or critical item with its id, severity and age only.
    webhook_url: AnyHttpUrl | None = None
    # Signs each call (HMAC-SHA256 of the body, header X-Coachbus-Signature).
    webhook_secret: SecretStr | None = None
    webhook_attempts: int = Field(default=5, ge=1, le=20)
    webhook_timeout_s: float = Field(default=5.0, gt=0.0, le=60.0)
    # The first retry waits this long, each next one twice as long.
    webhook_backoff_s: float = Field(default=1.0, ge=0.0, le=600.0)
