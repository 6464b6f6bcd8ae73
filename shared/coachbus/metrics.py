"""Prometheus metrics shared by all services.

Labels are bounded on purpose: agent, tier, model, outcome, decision, reason,
service, topic. Never a user or session id (unbounded cardinality, and personal data).
"""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

# LLM calls take seconds to minutes: FastStream's default buckets stop at 10 s.
LATENCY_BUCKETS = (
    0.005,
    0.01,
    0.025,
    0.05,
    0.1,
    0.25,
    0.5,
    1.0,
    2.0,
    5.0,
    10.0,
    20.0,
    30.0,
    60.0,
    120.0,
)
FAST_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0)

REGISTRY = CollectorRegistry(auto_describe=True)

AGENT_LATENCY = Histogram(
    "coachbus_agent_latency_seconds",
    "Time an agent spent on one turn, from message received to result published.",
    ["agent", "tier", "outcome"],
    buckets=LATENCY_BUCKETS,
    registry=REGISTRY,
)
LLM_LATENCY = Histogram(
    "coachbus_llm_request_seconds",
    "Wall time of one LLM request, retries included.",
    ["agent", "model", "tier", "outcome"],
    buckets=LATENCY_BUCKETS,
    registry=REGISTRY,
)
LLM_TTFT = Histogram(
    "coachbus_llm_time_to_first_token_seconds",
    "Time to the first streamed token of an LLM request.",
    ["agent", "model"],
    buckets=LATENCY_BUCKETS,
    registry=REGISTRY,
)
LLM_TOKENS = Counter(
    "coachbus_llm_tokens",
    "Tokens spent on LLM requests.",
    ["agent", "model", "kind"],
    registry=REGISTRY,
)
SYNTH_JOIN_WAIT = Histogram(
    "coachbus_synth_join_wait_seconds",
    "From the turn's creation to the moment Synth had what it needed (or gave up).",
    ["outcome"],
    buckets=LATENCY_BUCKETS,
    registry=REGISTRY,
)
TURN_LATENCY = Histogram(
    "coachbus_turn_latency_seconds",
    "End-to-end turn latency: user message accepted to final reply published.",
    ["outcome"],
    buckets=LATENCY_BUCKETS,
    registry=REGISTRY,
)
COACH_FIRST_REPLY = Histogram(
    "coachbus_coach_first_reply_seconds",
    "User message accepted to the Coach's immediate reply published.",
    ["tier"],
    buckets=LATENCY_BUCKETS,
    registry=REGISTRY,
)
SYNTH_FIRST_TEXT = Histogram(
    "coachbus_synth_first_text_seconds",
    "From the turn's creation to the first text of the synthesis the user can read: "
    "its first final_delta when streamed, else the final reply.",
    ["path", "tier"],
    buckets=LATENCY_BUCKETS,
    registry=REGISTRY,
)

REPAIR_ATTEMPTS = Histogram(
    "coachbus_repair_attempts",
    "Attempts one generate-evaluate-repair loop took.",
    ["decision"],
    buckets=(1, 2, 3, 4, 5, 6, 8, 10),
    registry=REGISTRY,
)
REPAIR_STOPS = Counter(
    "coachbus_repair_stops",
    "Why generate-evaluate-repair loops stopped.",
    ["decision", "reason"],
    registry=REGISTRY,
)
REPLY_GUARD = Counter(
    "coachbus_reply_guard",
    "Replies held back on a turn that blocked steps and read by the reply guard, by "
    "verdict: flagged (a model quoted a blocked step; the rules' reply went instead), "
    "unread (no model could read it; the rules' reply went), passed (a model read it and "
    "found none), trusted (the rules' reading cleared the bar: no model asked).",
    ["agent", "verdict"],
    registry=REGISTRY,
)
TIER_DECISIONS = Counter(
    "coachbus_tier_decisions",
    "Decisions taken, by the tier that carried them.",
    ["decision", "tier"],
    registry=REGISTRY,
)
DLQ_MESSAGES = Counter(
    "coachbus_dlq_messages",
    "Messages sent to the dead-letter topic.",
    ["service", "error_type"],
    registry=REGISTRY,
)
MESSAGES = Counter(
    "coachbus_messages",
    "Messages consumed, by outcome (ok, duplicate, dlq, error).",
    ["service", "topic", "outcome"],
    registry=REGISTRY,
)
INFLIGHT = Gauge(
    "coachbus_inflight_messages",
    "Messages being worked on right now.",
    ["service"],
    registry=REGISTRY,
)
CONSUMER_LAG = Gauge(
    "coachbus_consumer_lag_messages",
    "Messages not yet committed by this service's consumer group, summed over partitions.",
    ["service", "topic"],
    registry=REGISTRY,
)

# The human tier (the gateway). Every replica folds the same review log, so each
# reports the same queue: alert and chart on max() over replicas, never sum().
REVIEW_PENDING = Gauge(
    "coachbus_review_pending",
    "Open human-review items (not closed), by severity.",
    ["severity"],
    registry=REGISTRY,
)
REVIEW_OLDEST_AGE = Gauge(
    "coachbus_review_oldest_age_seconds",
    "Age of the oldest open human-review item nobody holds a claim on, by severity "
    "(0: none waiting).",
    ["severity"],
    registry=REGISTRY,
)
REVIEW_WAIT_LIMIT = Gauge(
    "coachbus_review_wait_limit_seconds",
    "How long a high or critical item may wait unclaimed before the alert "
    "(COACHBUS_REVIEW_ALERT_AFTER_S).",
    registry=REGISTRY,
)
# Minutes, not milliseconds: a human answers in seconds at best, hours at worst.
REVIEW_BUCKETS = (10.0, 30.0, 60.0, 120.0, 300.0, 600.0, 1800.0, 3600.0, 4 * 3600.0, 86_400.0)
REVIEW_FIRST_ACTION = Histogram(
    "coachbus_review_first_action_seconds",
    "From an item's escalation to the first human action accepted on it (a claim, "
    "an answer), by severity. Observed once, by the replica that took the action.",
    ["severity"],
    buckets=REVIEW_BUCKETS,
    registry=REGISTRY,
)
REVIEW_ACTIONS = Counter(
    "coachbus_review_actions",
    "Reviewers' actions as the fold judged them (counted by the replica that took the request).",
    ["action", "verdict"],
    registry=REGISTRY,
)
REVIEW_WEBHOOK = Counter(
    "coachbus_review_webhook_calls",
    "Review webhook calls by outcome: ok, retried (one failed attempt), failed (gave "
    "up after every attempt), dropped (the send queue was full).",
    ["outcome"],
    registry=REGISTRY,
)
