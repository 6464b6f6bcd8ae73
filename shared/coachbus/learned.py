"""A linear text model learned from a dev corpus: the deterministic tier's second reader.

Hand-written rules read the sentences they were written against: on the steps corpus
they find 0.97 of the risky steps in dev and 0.75 in heldout text nobody tuned them on.
A logistic regression over character n-grams, trained on the same dev sentences, reads
the pieces of words ("absetz", "pills", "tablett") rather than whole phrasings, so a
wording the rules never saw still shares most of its n-grams with one they did. The
two readers err on different items, and a decision that takes what either finds
(at a probability bar chosen by cross-validation on dev, see :func:`choose_bar`) keeps
the rules' precision and gains most of the recall the rules lose off dev.

It is deterministic code (pure Python, no numerical libraries at run time): the
weights are data, written by ``coachbus eval <corpus> --train`` into
``coachbus/content/learned/<name>.json`` from the dev split only, with the dev file's
digest, so a test can tell when the corpus moved and the weights did not.

Features follow a well-tried recipe for short, noisy text: character 3- to 5-grams
inside word boundaries of the normalised text (umlauts folded, lower case), plus one
token per standing condition; sublinear tf-idf; L2 normalised. Each label is its own
binary model (a message can head toward two steps), its intercept the label's base
rate (see :func:`train`).
"""

from __future__ import annotations

import hashlib
import json
import math
import random
import re
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from functools import cache
from importlib import resources
from typing import Any, Final

# n-gram lengths: 3 catches stems ("pil", "abs"), 5 catches most of a short word.
NGRAMS: Final = (3, 4, 5)
# An n-gram seen in one dev sentence only is that sentence's, not the language's.
MIN_DF: Final = 2
# Inverse regularisation strength (as in the usual formulation: C times the data
# loss against half the squared weights). Chosen with the bar by cross-validation.
C: Final = 10.0
EPOCHS: Final = 60
# The length (in tf-idf units) below which a message's vector is not scaled up: about
# the norm of a six-word sentence (an n-gram weighs 3 to 7).
NORM_FLOOR: Final = 30.0
# Weights smaller than this change no probability in the third decimal: left out of
# the file to keep it small.
PRUNE: Final = 1e-3

_WORD = re.compile(r"\w+")


def grams(text: str, extra: Iterable[str] = ()) -> Counter[str]:
    """The raw counts a message contributes: n-grams of each word padded by a space
    on both sides (so "pill" at a word's start differs from one inside a word),
    and ``#token`` for each extra feature (a standing condition)."""
    counts: Counter[str] = Counter()
    for word in _WORD.findall(text):
        padded = f" {word} "
        for n in NGRAMS:
            if len(padded) < n:
                continue
            for i in range(len(padded) - n + 1):
                counts[padded[i : i + n]] += 1
    for token in extra:
        counts[f"#{token}"] += 1
    return counts


def _vector(counts: Counter[str], idf: dict[str, float]) -> dict[str, float]:
    raw = {g: (1.0 + math.log(c)) * idf[g] for g, c in counts.items() if g in idf}
    # Unit length for a sentence, but a message of a word or two ("ok", "ja") is
    # not scaled up to one: its few n-grams are little evidence of anything.
    norm = max(math.sqrt(sum(v * v for v in raw.values())), NORM_FLOOR)
    return {g: v / norm for g, v in raw.items()}


def _sigmoid(z: float) -> float:
    # Split by sign so neither branch overflows.
    if z >= 0:
        return 1.0 / (1.0 + math.exp(-z))
    e = math.exp(z)
    return e / (1.0 + e)


@dataclass(frozen=True, slots=True)
class LinearModel:
    """Per-label logistic regressions over one shared feature space."""

    labels: tuple[str, ...]
    idf: dict[str, float]
    weights: dict[str, dict[str, float]]
    bias: dict[str, float]
    bar: float
    trained_on: dict[str, Any]

    def probabilities(self, text: str, extra: Iterable[str] = ()) -> dict[str, float]:
        vec = _vector(grams(text, extra), self.idf)
        return {
            label: _sigmoid(
                self.bias[label] + sum(self.weights[label].get(g, 0.0) * v for g, v in vec.items())
            )
            for label in self.labels
        }

    def lift(self, label: str, probability: float) -> float:
        """How far the message's n-grams moved ``label`` from its base rate, in
        log-odds (0: no evidence either way)."""
        p = min(max(probability, 1e-9), 1 - 1e-9)
        return math.log(p / (1 - p)) - self.bias[label]

    def evidence(self, text: str, label: str, extra: Iterable[str] = (), top: int = 3) -> list[str]:
        """The n-grams that pushed ``label`` up most: what a reader of the decision
        sheet sees as the reason for a learned hit."""
        vec = _vector(grams(text, extra), self.idf)
        w = self.weights[label]
        pushed = sorted(((w.get(g, 0.0) * v, g) for g, v in vec.items()), reverse=True)
        # " day" and "day " are two n-grams but one piece of text to a reader.
        pieces = dict.fromkeys(g.strip() for score, g in pushed if score > 0)
        return list(pieces)[:top]

    def to_json(self) -> str:
        vocab = sorted(self.idf)
        doc = {
            "trained_on": self.trained_on,
            "labels": list(self.labels),
            "bar": self.bar,
            "bias": {k: round(v, 4) for k, v in self.bias.items()},
            # One row per n-gram: its idf, then its weight for each label in order.
            "features": {
                g: [round(self.idf[g], 4)]
                + [round(self.weights[label].get(g, 0.0), 4) for label in self.labels]
                for g in vocab
            },
        }
        return json.dumps(doc, ensure_ascii=False, separators=(",", ":")) + "\n"

    @classmethod
    def from_json(cls, text: str) -> LinearModel:
        doc = json.loads(text)
        labels = tuple(doc["labels"])
        idf: dict[str, float] = {}
        weights: dict[str, dict[str, float]] = {label: {} for label in labels}
        for g, row in doc["features"].items():
            idf[g] = row[0]
            for label, w in zip(labels, row[1:], strict=True):
                if w:
                    weights[label][g] = w
        return cls(labels, idf, weights, dict(doc["bias"]), float(doc["bar"]), doc["trained_on"])


def digest(text: str) -> str:
    """The short digest of a training file's text, recorded beside the weights."""
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:16]


def train(
    texts: Sequence[tuple[str, Sequence[str]]],
    targets: Sequence[set[str]],
    labels: Sequence[str],
    *,
    bar: float = 0.5,
    trained_on: dict[str, Any] | None = None,
    c: float = C,
    epochs: int = EPOCHS,
    seed: int = 0,
) -> LinearModel:
    """Fit one binary logistic regression per label.

    ``texts`` are (normalised text, extra tokens). Stochastic gradient with AdaGrad
    step sizes, a fixed seed and a fixed number of passes: the same data gives the
    same weights on every machine, which is what lets a test check the file.
    """
    counted = [grams(t, extra) for t, extra in texts]
    df: Counter[str] = Counter()
    for counts in counted:
        df.update(counts.keys())
    n = len(counted)
    idf = {g: math.log((1 + n) / (1 + d)) + 1.0 for g, d in df.items() if d >= MIN_DF}
    vectors = [_vector(counts, idf) for counts in counted]
    weights: dict[str, dict[str, float]] = {}
    bias: dict[str, float] = {}
    order = list(range(n))
    rng = random.Random(seed)
    for label in labels:
        y = [1.0 if label in t else 0.0 for t in targets]
        positives = sum(y)
        # The intercept is the label's base rate, not fitted: a fitted one is free of
        # the penalty the weights pay, so it drifts high and the weights of common
        # n-grams ("the", " ich") pull every real sentence back down; a message of
        # two words then lacks them and reads as every step at once. Fixed at the
        # prior, a message without evidence for a step reads as its base rate.
        b = math.log((positives + 1.0) / (n - positives + 1.0))
        w: dict[str, float] = {}
        g2: dict[str, float] = {}
        lr = 0.5
        for _ in range(epochs):
            rng.shuffle(order)
            for i in order:
                x = vectors[i]
                z = b + sum(w.get(g, 0.0) * v for g, v in x.items())
                err = (_sigmoid(z) - y[i]) * c
                for g, v in x.items():
                    # The L2 term is spread over the n samples of a pass.
                    grad = err * v + w.get(g, 0.0) / n
                    g2[g] = g2.get(g, 0.0) + grad * grad
                    w[g] = w.get(g, 0.0) - lr * grad / math.sqrt(g2[g])
        weights[label] = {g: v for g, v in w.items() if abs(v) >= PRUNE}
        bias[label] = b
    kept = {g for per in weights.values() for g in per}
    return LinearModel(
        tuple(labels),
        {g: v for g, v in idf.items() if g in kept},
        weights,
        bias,
        bar,
        trained_on or {},
    )


def folds(n: int, k: int, seed: int = 0) -> list[list[int]]:
    """``k`` disjoint index sets covering ``range(n)``, shuffled with a fixed seed."""
    order = list(range(n))
    random.Random(seed).shuffle(order)
    return [order[i::k] for i in range(k)]


# The bars tried: 0.20, 0.25, ... 0.95.
BARS: Final = tuple(round(0.05 * i, 2) for i in range(4, 20))


def choose_bar(
    probabilities: Sequence[dict[str, float]],
    targets: Sequence[set[str]],
    *,
    min_precision: float,
    bars: Sequence[float] = BARS,
) -> float:
    """The lowest probability bar whose out-of-fold predictions reach ``min_precision``.

    The learned reader adds hits to the rules' (the rules' hits are precise: about 0.9 on new text),
    so what it adds must itself be precise: the lowest bar at that precision keeps
    the most recall. With no bar reaching it, the highest is returned.
    """
    for bar in sorted(bars):
        tp, fp, _ = tally(probabilities, targets, bar)
        if tp and tp / (tp + fp) >= min_precision:
            return bar
    return max(bars)


def tally(
    probabilities: Sequence[dict[str, float]], targets: Sequence[set[str]], bar: float
) -> tuple[int, int, int]:
    """True positives, false positives and false negatives of the reads at ``bar``."""
    tp = fp = fn = 0
    for probs, expected in zip(probabilities, targets, strict=True):
        found = {label for label, p in probs.items() if p >= bar}
        tp += len(found & expected)
        fp += len(found - expected)
        fn += len(expected - found)
    return tp, fp, fn


@cache
def shipped(name: str) -> LinearModel | None:
    """The committed model ``name`` (None when none was trained yet: the rules alone)."""
    path = resources.files("coachbus.content").joinpath(f"learned/{name}.json")
    try:
        return LinearModel.from_json(path.read_text("utf-8"))
    except FileNotFoundError:
        return None


__all__ = ["LinearModel", "choose_bar", "digest", "folds", "grams", "shipped", "tally", "train"]
