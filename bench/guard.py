"""What holding a reply back costs: Synth's prose on a turn that blocked steps, streamed
against held back for the reply guard's model (issue #28).

On a turn that blocked steps, with a model configured for ``reply_guard``, Synth and
the Coach no longer stream the model's reply: it is written whole, then a model reads
it (``coachbus.safety.judge``), then it is shown. This measures what the person waits
for, side by side in one run on the LLM simulator's hardware profile (``coachbus
llm-sim --profile``), with Synth's own prompt for a real blocked-step turn:

* **streamed** (before): the model's first sentence reaches the person as it ends
  in the stream; the full reply is the stream's end;
* **held** (now): the same stream read to its end, then the guard's call
  (``reply_guard``, its JSON schema and ``max_tokens`` from the shipped policy); the
  model's first sentence and the full reply both reach the person with the guard's
  answer.

Synth's first text is the same on both paths: its opening (the rendering's own
sentence) is shown before the model's first token, held or not. What moves is when
the model's own words arrive. The Coach has no opening: held, its first text is the
held figure.

``python -m bench.guard [--profile NAME] [--turns N] [--time-scale S]``. Turns run one
after another (one user: no batching in the figures). The figures are the simulator's
modelled latencies plus this machine's client overhead; nothing is asserted.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import re
import statistics
import time
from typing import Any

from bench.harness import SimProcess
from coachbus.contracts import UserMessage
from coachbus.llm import ChatRequest, LLMClient, LLMSettings, Policy, PromptBuilder
from coachbus.memory import context_for
from coachbus.safety import judge

# A turn Stability blocks steps on (quitting the job, the savings).
TEXT = "I will quit my job tomorrow and put all my savings into my startup, all in!"
_SENTENCE_END = re.compile(r"[.!?…](?:\s|$)")


def _prompts() -> tuple[list[Any], list[Any], list[str], int, int]:
    """Synth's prose prompt and the guard's prompt for the turn, its blocked steps and
    both decisions' max_tokens from the shipped policy."""
    from evaluation.chain import Chain
    from services.synth import logic as synth_logic
    from services.synth import prompts as synth_prompts

    msg = UserMessage.create(
        user_id="bench-guard",
        session_id="bench-guard-s",
        text=TEXT,
        deadline_ms=900_000,
        max_tokens=0,
        wall_clock_ms=900_000,
    )
    step = Chain().turn(msg)
    sheet = step.final.sheet
    never = synth_logic.never_steps(sheet)
    builder = PromptBuilder()
    ctx = context_for(None, msg)
    prose = synth_prompts.messages(builder, ctx, sheet, [], "")
    policy = Policy.load_shipped()
    guard = judge.messages(builder, ctx, "synth", step.final.text, never)
    return (
        prose,
        guard,
        never,
        policy.for_kind("synthesis_prose").max_tokens,
        policy.for_kind(judge.KIND).max_tokens,
    )


async def _turn(
    client: LLMClient, prose: list[Any], guard: list[Any], prose_max: int, guard_max: int
) -> dict[str, float]:
    started = time.perf_counter()
    first: float | None = None
    text = ""
    request = ChatRequest(
        agent="synth", messages=prose, max_tokens=prose_max, thinking=False, timeout_s=900
    )
    async with client.stream(request) as stream:
        async for delta in stream:
            text += delta
            if first is None and _SENTENCE_END.search(text):
                first = time.perf_counter() - started
    full = time.perf_counter() - started
    await client.chat(
        ChatRequest(
            agent="synth",
            messages=guard,
            response_model=judge.ReplyGuardCall,
            max_tokens=guard_max,
            timeout_s=900,
        )
    )
    held = time.perf_counter() - started
    return {"streamed_first": first if first is not None else full, "streamed_full": full,
            "held": held}  # fmt: skip


async def measure(profile: str, turns: int, time_scale: float) -> dict[str, Any]:
    prose, guard, never, prose_max, guard_max = _prompts()
    sim = SimProcess()
    await sim.start(profile=profile, time_scale=time_scale)
    try:
        client = LLMClient(LLMSettings(base_url=sim.base_url, retry_attempts=1))
        try:
            rows = [await _turn(client, prose, guard, prose_max, guard_max) for _ in range(turns)]
        finally:
            await client.aclose()
    finally:
        await sim.stop()

    def p50(key: str) -> float:
        return statistics.median(r[key] for r in rows) * 1000 / time_scale

    return {
        "profile": profile,
        "turns": turns,
        "time_scale": time_scale,
        "blocked_steps": never,
        "streamed_first_sentence_ms_p50": round(p50("streamed_first")),
        "streamed_full_ms_p50": round(p50("streamed_full")),
        "held_ms_p50": round(p50("held")),
        "first_sentence_held_vs_streamed": round(p50("held") / p50("streamed_first"), 2),
        "full_reply_held_vs_streamed": round(p50("held") / p50("streamed_full"), 2),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.guard", description=__doc__)
    parser.add_argument("--profile", default="qwen3-30b-2x4090")
    parser.add_argument("--turns", type=int, default=5)
    parser.add_argument(
        "--time-scale",
        type=float,
        default=1.0,
        help="the simulator's clock (0.1 = ten times as fast); figures are reported unscaled",
    )
    args = parser.parse_args(argv)
    result = asyncio.run(measure(args.profile, args.turns, args.time_scale))
    print(json.dumps(result, indent=2))
    print(
        f"the model's first sentence on a turn that blocked steps: held "
        f"{result['held_ms_p50']} ms vs streamed {result['streamed_first_sentence_ms_p50']} ms "
        f"(x{result['first_sentence_held_vs_streamed']}); the full reply: held "
        f"{result['held_ms_p50']} ms vs streamed {result['streamed_full_ms_p50']} ms "
        f"(x{result['full_reply_held_vs_streamed']})"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
