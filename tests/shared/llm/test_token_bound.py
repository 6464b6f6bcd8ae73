"""The byte bound that lets budget checks skip the tokenizer, and the proof that it
changes no prompt and no answer budget."""

from __future__ import annotations

import random
import unicodedata

import pytest

from coachbus.llm import LLMSettings, PromptBuilder, PromptContext, Section, count_messages
from coachbus.llm.tokens import (
    EstimateCounter,
    HFTokenizerCounter,
    count_messages_within,
    default_counter,
    find_gguf,
    upper_bound,
)

pytestmark = pytest.mark.unit

needs_bpe = pytest.mark.skipif(
    not isinstance(default_counter(), HFTokenizerCounter), reason="no byte-level BPE installed"
)


class Counting:
    """A counter that forwards to another and records every text it tokenizes."""

    def __init__(self, inner: HFTokenizerCounter, *, byte_level: bool) -> None:
        self.inner = inner
        self.name = inner.name
        self.byte_level = byte_level
        self.texts: list[str] = []

    def count(self, text: str) -> int:
        self.texts.append(text)
        return self.inner.count(text)


class CachedBound(Counting):
    """The same, with the inner counter's bound: cached counts, else bytes."""

    def at_most(self, text: str) -> int:
        return self.inner.at_most(text)


def _fresh() -> HFTokenizerCounter:
    # A counter of its own, so no cached count hides a tokenization.
    real = default_counter()
    assert isinstance(real, HFTokenizerCounter)
    return HFTokenizerCounter(
        real._tokenizer, real.name, byte_level=real.byte_level, line_additive=real.line_additive
    )


def _texts(seed: int, n: int) -> list[str]:
    rng = random.Random(seed)
    alphabet = (
        "abcdefghijklmnopqrstuvwxyz ABCXYZ 0123456789 .,;:!?-_'\"{}[]<>|/\\\n\t "
        "äöüßÄÖÜ éèêçñ ©€£ 日本語 한국어 😀🙂👍🏽 \u200b\u00a0"
    )
    words = [
        *("run", "sleep", "Plan", "morgen", "ich", "nicht", "never", "again"),
        *('{"a":', "1}", "<|im_end|>", "42"),
    ]
    out = []
    for _ in range(n):
        if rng.random() < 0.5:
            out.append("".join(rng.choices(alphabet, k=rng.randint(1, 400))))
        else:
            out.append(" ".join(rng.choices(words, k=rng.randint(1, 120))))
    return out


@needs_bpe
def test_a_byte_level_bpe_never_has_more_tokens_than_bytes() -> None:
    counter = _fresh()
    for text in _texts(7, 400):
        bound = upper_bound(counter, text)
        assert bound == len(text.encode())
        assert counter.count(text) <= bound
        # Once counted, the bound is the count itself.
        assert upper_bound(counter, text) == counter.count(text)


def test_a_counter_without_a_proven_bound_is_asked() -> None:
    estimate = EstimateCounter()
    # A lone umlaut is 2 bytes and 2.5 estimated tokens: bytes bound no estimate.
    assert estimate.count("ü") > len("ü".encode())
    assert upper_bound(estimate, "ü") == estimate.count("ü")


@needs_bpe
def test_count_within_gives_the_bound_only_when_it_settles_the_limit() -> None:
    counter = _fresh()
    messages = [{"role": "system", "content": "Be kind."}, {"role": "user", "content": "hi " * 50}]
    bound = count_messages_within(messages, 10_000, counter)
    assert counter._cache == {}  # nothing was tokenized
    exact = count_messages(messages, _fresh())
    assert bound >= exact and bound != exact  # the bytes, not the tokens
    assert count_messages_within(messages, bound - 1, counter) == exact
    # What the router does with it: the answer's budget is the same either way,
    # whether the counter has counted these texts before or not.
    for remaining in range(exact, bound + 600, 7):
        for policy_max in (16, 320, 512):
            within = count_messages_within(messages, remaining - policy_max, _fresh())
            assert min(policy_max, remaining - within) == min(policy_max, remaining - exact)
            within = count_messages_within(messages, remaining - policy_max, counter)
            assert min(policy_max, remaining - within) == min(policy_max, remaining - exact)


def _context(rng: random.Random) -> PromptContext:
    return PromptContext(
        briefing="You are part of coachbus. Be honest and kind.",
        profile=" ".join(f"trait{i} détail" for i in range(rng.randint(0, 300))),
        blackboard=[
            Section(f"section-{i}", f"note {i}: " + "évidence " * rng.randint(1, 60), i)
            for i in range(rng.randint(0, 8))
        ],
        history=[f"turn {i}: I ran and slept " * 3 for i in range(rng.randint(0, 60))],
        message=rng.choice(["hi", "I skipped my run again.", "x " * 200, "Ich schaffe es nicht."]),
    )


@needs_bpe
@pytest.mark.parametrize("budget", [120, 400, 900, 1500, 2600, 6000])
def test_bounds_change_no_prompt(budget: int) -> None:
    """Every prompt, drop and count is what counting every candidate gives."""
    s = LLMSettings(shared_prefix_budget=budget, default_prompt_budget=budget + 150)
    real = default_counter()
    assert isinstance(real, HFTokenizerCounter)
    rng = random.Random(budget)
    for _ in range(12):
        ctx = _context(rng)
        data = [("draft", "a draft " * rng.randint(0, 80))] if rng.random() < 0.5 else []
        results: list[object] = []
        for counter in (
            Counting(real, byte_level=True),
            CachedBound(real, byte_level=True),
            Counting(real, byte_level=False),
        ):
            builder = PromptBuilder(s, counter=counter)
            try:
                p = builder.build(ctx, "persona", "Answer as JSON.", data=data)
            except ValueError as exc:
                results.append(("error", str(exc)))
                continue
            results.append((p, p.tokens, p.prefix_tokens))
        assert results[0] == results[1] == results[2]


@needs_bpe
def test_a_prompt_whose_bytes_fit_is_never_tokenized() -> None:
    counter = Counting(_fresh(), byte_level=True)
    builder = PromptBuilder(LLMSettings(), counter=counter)
    # A typical turn: its bytes are under half the budget (the bench's largest
    # prompt, Synth's, is about 5.5 KB against 6000 tokens).
    ctx = PromptContext(
        briefing="You are part of coachbus. Be honest and kind.",
        profile="Runs in the morning, struggles with evenings. " * 10,
        blackboard=[Section("goals", "run three times a week " * 8)],
        history=["I skipped my run.", "I planned it for Monday."],
        message="I skipped it again.",
    )
    prompt = builder.build(ctx, "synth", "Write the reply.", data=[("draft", "a draft")])
    assert counter.texts == []
    # Asked for, the counts are exact.
    assert prompt.tokens == count_messages(prompt.messages, counter.inner)
    assert counter.texts


def test_the_real_tokenizer_is_found_where_it_is_installed() -> None:
    # The bound's tests skip without it; say so when they would have run.
    if find_gguf() is not None:
        counter = default_counter()
        assert isinstance(counter, HFTokenizerCounter)
        assert counter.byte_level and counter.line_additive


def _adversarial(seed: int, n: int) -> list[str]:
    # Line breaks next to spaces, tabs, digits, contractions, punctuation and
    # multi-byte characters: where a pre-tokenizer could merge across a break.
    rng = random.Random(seed)
    alphabet = "abcXYZ 019.,;:!?-'\"<>/{}[]|\n\n\n\t  äöüß日本😀\u200b's 're ll"
    return ["".join(rng.choices(alphabet, k=rng.randint(1, 200))) for _ in range(n)]


@needs_bpe
def test_counting_line_by_line_is_the_whole_texts_count() -> None:
    counter = _fresh()
    assert counter.line_additive
    tokenizer = counter._tokenizer
    fenced = (
        '<data about="user profile">\nRuns early.\n</data>\n\n'
        '<data about="new message">\nhi\n</data>'
    )
    # Every separator, control and format character next to a break: where Python's
    # idea of white space (which decides the split) and the tokenizer's could differ.
    # (All 1.1 million code points were checked once this way, in 40 s.)
    edges = [
        ch
        for ch in map(chr, range(0x3100))
        if unicodedata.category(ch)[0] in "ZC" and not 0xD800 <= ord(ch) <= 0xDFFF
    ]
    texts = [
        *_adversarial(11, 3000),
        fenced,
        *(f"x{ch}\n{ch}y" for ch in edges),
        *(f"{ch}\n{ch}" for ch in edges),
    ]
    for text in texts:
        whole = len(tokenizer.encode(text, add_special_tokens=False).ids)
        assert counter.count(text) == whole, repr(text)
        assert upper_bound(_fresh(), text) >= whole
        assert upper_bound(counter, text) == whole  # every line is cached now


@needs_bpe
def test_a_new_turn_tokenizes_only_its_new_lines() -> None:
    counter = _fresh()
    seen: list[str] = []
    encode = counter._tokenizer.encode

    class Spy:
        def encode(self, text: str, add_special_tokens: bool = True) -> object:
            seen.append(text)
            return encode(text, add_special_tokens=add_special_tokens)

    counter._tokenizer = Spy()
    history = [f"- turn {i}: I skipped my run again." for i in range(6)]
    counter.count("\n".join(['<data about="history">', *history, "</data>"]))
    seen.clear()
    counter.count("\n".join(['<data about="history">', *history, "- turn 6: I ran.", "</data>"]))
    assert seen == ["- turn 6: I ran."]
