"""The client against the in-process simulator: streaming, limits, faults, compatibility."""

from __future__ import annotations

import asyncio
import time
from types import SimpleNamespace

import httpx
import openai
import pytest
from pydantic import BaseModel, Field

from coachbus.contracts.payloads import PersonaPayload, ShadowPayload, StabilityPayload
from coachbus.llm import ChatRequest, LLMClient, LLMHTTPError, LLMTimeoutError, OutputError
from coachbus.llm import sim as sim_module
from coachbus.llm.sim import SimConfig, Simulator, config_from_args, main
from tests.shared.llm.conftest import SMALL, SimFactory, fast_settings

pytestmark = pytest.mark.unit


class Plan(BaseModel):
    steps: list[str] = Field(min_length=1, max_length=4)
    effort: int = Field(ge=1, le=5)
    confident: bool


def req(**kw: object) -> ChatRequest:
    base: dict[str, object] = {
        "agent": "coach",
        "messages": [{"role": "user", "content": "I keep putting off my run."}],
    }
    base.update(kw)
    return ChatRequest(**base)  # type: ignore[arg-type]


async def stats(url: str) -> dict[str, object]:
    async with httpx.AsyncClient() as http:
        data: dict[str, object] = (await http.get(f"{url}/stats")).json()
        return data


async def test_stream_reaches_caller_token_by_token(sim: SimFactory) -> None:
    async with sim(ttft_ms=30, tokens_per_s=100) as url, LLMClient(fast_settings(url)) as client:
        stream = client.stream(req(max_tokens=60))
        arrivals: list[float] = []
        pieces: list[str] = []
        started = time.perf_counter()
        async for delta in stream:
            arrivals.append(time.perf_counter() - started)
            pieces.append(delta)
        assert stream.result is not None
    assert len(pieces) >= 20
    # 10 ms per token: deltas arrive spread over the generation, not in one burst.
    assert arrivals[-1] - arrivals[0] >= 0.5 * (len(pieces) - 1) * 0.01
    assert arrivals[0] < arrivals[-1] / 2
    assert stream.result.text == "".join(pieces)
    assert not stream.result.usage_estimated
    assert stream.result.usage.completion_tokens == len(pieces)
    assert stream.result.ttft_s is not None
    assert stream.result.ttft_s >= 0.025


async def test_instant_sim_sends_every_token_as_its_own_event_in_one_write(
    sim: SimFactory,
) -> None:
    body = {
        "model": SMALL,
        "stream": True,
        "max_tokens": 40,
        "messages": [{"role": "user", "content": "I keep putting off my run."}],
    }
    async with (
        sim(tokens_per_s=0) as url,
        httpx.AsyncClient() as http,
        http.stream("POST", f"{url}/chat/completions", json=body) as response,
    ):
        reads = [part async for part in response.aiter_raw()]
    events = b"".join(reads).split(b"\n\n")
    tokens = [e for e in events if b'"content"' in e and b'"role"' not in e]
    assert len(tokens) >= 10 and events[-2] == b"data: [DONE]"
    # The role chunk comes at once, everything else together: not a write per token.
    assert len(reads) < len(tokens) / 2


async def test_stream_with_early_exit_releases_the_slot(sim: SimFactory) -> None:
    async with (
        sim(tokens_per_s=20) as url,
        LLMClient(fast_settings(url, max_concurrency=1)) as client,
    ):
        async with client.stream(req()) as stream:
            async for _ in stream:
                break
        # The only slot was released on leaving the block: the next call goes through
        # while the abandoned generation (seconds at 20 tokens/s) would still run.
        res = await asyncio.wait_for(anext(aiter(client.stream(req(max_tokens=1)))), 1.0)
    assert res


async def test_concurrency_limit_per_endpoint(sim: SimFactory) -> None:
    async with (
        sim(ttft_ms=40, tokens_per_s=400) as url,
        LLMClient(fast_settings(url, max_concurrency=2)) as client,
    ):
        results = await asyncio.gather(*(client.chat(req(max_tokens=20)) for _ in range(6)))
        seen = await stats(url)
    assert all(r.text for r in results)
    assert seen["requests"] == 6
    assert seen["max_active"] == 2


@pytest.mark.parametrize("model", [PersonaPayload, ShadowPayload, StabilityPayload, Plan])
async def test_structured_output_for_real_contracts(sim_url: str, model: type[BaseModel]) -> None:
    async with LLMClient(fast_settings(sim_url)) as client:
        res = await client.chat(req(agent="persona", response_model=model, max_tokens=2048))
    assert isinstance(res.parsed, model)
    assert res.finish_reason == "stop"


async def test_sim_text_is_deterministic_per_prompt_and_varied_across_prompts(sim_url: str) -> None:
    async with LLMClient(fast_settings(sim_url)) as client:
        a1 = await client.chat(req(messages=[{"role": "user", "content": "one"}]))
        a2 = await client.chat(req(messages=[{"role": "user", "content": "one"}]))
        b = await client.chat(req(messages=[{"role": "user", "content": "two"}]))
    assert a1.text == a2.text
    assert a1.text != b.text


async def test_http_faults_are_retried_then_surface(sim: SimFactory) -> None:
    async with (
        sim(error_rate=1.0, error_statuses=(503,)) as url,
        LLMClient(fast_settings(url, retry_attempts=3)) as client,
    ):
        with pytest.raises(LLMHTTPError) as info:
            await client.chat(req())
        seen = await stats(url)
    assert info.value.status == 503
    assert seen["requests"] == 3


async def test_hang_fault_hits_the_agent_timeout(sim: SimFactory) -> None:
    async with (
        sim(timeout_rate=1.0, hang_s=30) as url,
        LLMClient(fast_settings(url, timeouts_s={"coach": 0.3})) as client,
    ):
        started = time.perf_counter()
        with pytest.raises(LLMTimeoutError):
            await client.chat(req())
        with pytest.raises(LLMTimeoutError):
            async for _ in client.stream(req()):
                pass
        # Cut by the 0.3 s agent timeouts, far before the 30 s hang would end.
        assert time.perf_counter() - started < 10


@pytest.mark.parametrize(
    ("fault", "kind"),
    [
        ("invalid_json_rate", "invalid_json"),
        ("truncate_rate", "truncated"),
        ("whitespace_rate", "whitespace"),
    ],
)
async def test_output_faults_are_classified(sim: SimFactory, fault: str, kind: str) -> None:
    async with (
        sim(**{fault: 1.0}, tokens_per_s=2000) as url,
        LLMClient(fast_settings(url)) as client,
    ):
        with pytest.raises(OutputError) as info:
            await client.chat(req(response_model=Plan, max_tokens=2000))
    assert info.value.kind == kind
    if kind == "whitespace":
        # Aborted at the run limit (160 characters), not after all 2000 pieces.
        assert len(info.value.result.text) < 400


async def test_llamacpp_quirk_mode_of_the_sim(sim: SimFactory) -> None:
    async with sim(llamacpp_quirks=True) as url, LLMClient(fast_settings(url)) as client:
        res = await client.chat(req(response_model=Plan))
        again = await client.chat(req(response_model=Plan))
        seen = await stats(url)
    assert isinstance(res.parsed, Plan)
    assert isinstance(again.parsed, Plan)
    # One refusal: the second call asked for json_object straight away.
    assert seen["by_status"] == {"500": 1, "200": 2}


async def test_thinking_goes_to_reasoning_not_to_text(sim_url: str) -> None:
    async with LLMClient(fast_settings(sim_url)) as client:
        res = await client.chat(req(agent="shadow", response_model=Plan, thinking=True))
    assert res.reasoning
    assert isinstance(res.parsed, Plan)


async def test_batching_slows_concurrent_requests(sim: SimFactory) -> None:
    async with (
        sim(ttft_ms=20, tokens_per_s=200, batch_slowdown=0.5) as url,
        LLMClient(fast_settings(url)) as client,
    ):
        alone = (await client.chat(req(max_tokens=30))).latency_s
        together = await asyncio.gather(*(client.chat(req(max_tokens=30)) for _ in range(6)))
    assert min(r.latency_s for r in together) > 1.5 * alone


class _Clock:
    """The simulator's clock, moved by hand: no test here depends on real time."""

    def __init__(self) -> None:
        self.now = 100.0

    def perf_counter(self) -> float:
        return self.now


def _clock_for(monkeypatch: pytest.MonkeyPatch) -> _Clock:
    clock = _Clock()
    monkeypatch.setattr(
        sim_module, "time", SimpleNamespace(perf_counter=clock.perf_counter, time=time.time)
    )
    return clock


async def _first_sleep(simulator: Simulator, plan_arrived: float) -> None:
    plan = simulator._plan(
        {"messages": [{"role": "user", "content": "hi"}]}, SMALL, {}, None, plan_arrived
    )
    async for _ in simulator._produce(plan, 0):
        break


async def test_time_to_first_token_counts_from_arrival_or_admission(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A request's first token comes ``ttft`` after it arrived, whatever time the
    simulator spent on it in between; a request that queued for admission gets the
    whole ``ttft`` from the moment it was admitted (prefill starts then)."""
    clock = _clock_for(monkeypatch)
    simulator = Simulator(SimConfig(ttft_ms=200, tokens_per_s=0, max_num_seqs=1))
    sleeps: list[float] = []

    async def record(seconds: float) -> None:
        sleeps.append(seconds)

    monkeypatch.setattr(simulator, "_sleep", record)
    # Arrived at 100.0; 50 ms went to the simulator itself before the model "ran".
    clock.now = 100.05
    await _first_sleep(simulator, 100.0)
    assert sleeps == [pytest.approx(0.15)]

    # A request behind a busy slot: admitted at 101.0, a second after it arrived.
    sleeps.clear()
    await simulator._admission.acquire(0)
    clock.now = 100.0
    queued = asyncio.create_task(_first_sleep(simulator, 100.0))
    for _ in range(100):
        if simulator.stats.waiting:
            break
        await asyncio.sleep(0)
    assert simulator.stats.waiting == 1
    clock.now = 101.0
    simulator._admission.release()
    await queued
    assert sleeps == [pytest.approx(0.2)]


async def test_priority_admission_serves_lower_priority_value_first(sim: SimFactory) -> None:
    async with (
        sim(ttft_ms=800, tokens_per_s=0, max_num_seqs=1) as url,
        LLMClient(fast_settings(url)) as client,
        httpx.AsyncClient(base_url=url) as http,
    ):

        async def until(key: str, value: object) -> None:
            # Poll states that persist while the blocker runs, rather than sleep:
            # the order must not depend on how loaded the machine is.
            for _ in range(1000):
                if (await http.get("stats")).json()[key] == value:
                    return
                await asyncio.sleep(0.005)
            raise AssertionError(f"{key} never reached {value}")

        blocker = asyncio.create_task(client.chat(req(priority=5)))
        await until("admitted_priorities", [5])
        late = asyncio.create_task(client.chat(req(priority=10)))
        await until("waiting", 1)
        urgent = asyncio.create_task(client.chat(req(priority=0)))
        await until("waiting", 2)
        await asyncio.gather(blocker, late, urgent)
        seen = (await http.get("stats")).json()
    assert seen["admitted_priorities"] == [5, 0, 10]


async def test_models_endpoint_and_unknown_model(sim_url: str) -> None:
    async with httpx.AsyncClient() as http:
        models = (await http.get(f"{sim_url}/models")).json()
    assert SMALL in [m["id"] for m in models["data"]]
    async with LLMClient(fast_settings(sim_url, small_model="nope")) as client:
        with pytest.raises(LLMHTTPError) as info:
            await client.chat(req())
    assert info.value.status == 404


async def test_official_openai_client_speaks_to_the_sim(sim_url: str) -> None:
    oai = openai.AsyncOpenAI(base_url=sim_url, api_key="unused")
    plain = await oai.chat.completions.create(
        model=SMALL, messages=[{"role": "user", "content": "hi"}]
    )
    assert plain.choices[0].message.content
    assert plain.usage is not None
    assert plain.usage.completion_tokens > 0
    chunks = []
    stream = await oai.chat.completions.create(
        model=SMALL,
        messages=[{"role": "user", "content": "hi"}],
        stream=True,
        stream_options={"include_usage": True},
        response_format={
            "type": "json_schema",
            "json_schema": {"name": "Plan", "schema": Plan.model_json_schema(), "strict": True},
        },
    )
    usage = None
    async for chunk in stream:
        if chunk.choices and chunk.choices[0].delta.content:
            chunks.append(chunk.choices[0].delta.content)
        usage = chunk.usage or usage
    await oai.close()
    Plan.model_validate_json("".join(chunks))
    assert usage is not None
    assert usage.completion_tokens == len(chunks)


def test_flags_map_to_config() -> None:
    cfg = config_from_args(
        ["--port", "9000", "--ttft-ms", "250", "--tokens-per-s", "35", "--batch-slowdown", "0.1",
         "--error-rate", "0.1", "--timeout-rate", "0.05", "--invalid-json-rate", "0.05",
         "--truncate-rate", "0.02", "--whitespace-rate", "0.01", "--seed", "3", "--model", "a",
         "--model", "b", "--llamacpp-quirks", "--max-num-seqs", "8"]
    )  # fmt: skip
    assert cfg == SimConfig(
        port=9000, ttft_ms=250, tokens_per_s=35, batch_slowdown=0.1, error_rate=0.1,
        timeout_rate=0.05, invalid_json_rate=0.05, truncate_rate=0.02, whitespace_rate=0.01,
        seed=3, models=("a", "b"), llamacpp_quirks=True, max_num_seqs=8,
    )  # fmt: skip
    assert main(["--error-rate", "0.8", "--timeout-rate", "0.5"]) == 2


async def test_a_body_that_is_not_a_json_object_is_a_400(sim_url: str) -> None:
    async with httpx.AsyncClient(base_url=sim_url) as http:
        for body in (b"{not json", b"[1, 2]", b"\xff\xfe"):
            resp = await http.post("chat/completions", content=body)
            assert resp.status_code == 400, body
            assert "JSON" in resp.json()["error"]["message"]
