"""Evaluation on labelled data: ``coachbus eval``, every decision scored, every tier
side by side (docs/eval.md).

Corpora are JSON Lines under ``tests/data/eval/<corpus>/<split>.jsonl``, written by
us. The ``dev`` split is what rules, prompts and thresholds are tuned on; the
crisis corpus's ``calibration`` split is only used to measure the confidence each
outcome reports (on text nothing was fitted to); the ``heldout`` split is only ever
scored. Reports on either never list items (so nobody tunes on them by reading
their misses).

A package beside ``shared/`` because it runs the services' own decision functions
in process (:mod:`evaluation.chain`): the shared library never imports a service,
and ``coachbus eval`` loads this package by name.
"""
