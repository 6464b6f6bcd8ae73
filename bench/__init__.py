"""coachbus benchmarks: throughput and latency against the ideal critical path.

``python -m bench`` (``make bench``) runs every measurement on the embedded stack,
prints one table (each figure beside its target and its baseline, all measured in
the same run) and writes ``bench/results/<name>.json`` and the two plots.
``python -m bench --quick`` runs tiny versions of each, for the smoke test.
See ``bench/README.md`` for what each figure means.
"""
