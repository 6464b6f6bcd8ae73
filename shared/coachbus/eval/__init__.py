"""Evaluation on labelled data: every decision scored, every tier side by side.

Corpora are JSON Lines under ``tests/data/eval/<corpus>/<split>.jsonl``, written by
us. The ``dev`` split is what rules, prompts and thresholds are tuned on; the
``heldout`` split is only ever scored, and a report on it never lists items (so
nobody tunes on it by reading its misses).
"""
