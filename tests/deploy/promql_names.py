"""Which metric names a PromQL expression uses, and which names exist.

Not a PromQL parser: enough of one to find the metric names in the expressions of
our dashboard and alert rules, so that a renamed or misspelt metric fails a test
instead of drawing an empty panel or an alert that can never fire.
"""

from __future__ import annotations

import re

from prometheus_client import CollectorRegistry
from prometheus_client.metrics_core import Metric

from coachbus import metrics

# PromQL's functions, aggregations and keywords: everything that looks like a name
# but is not a metric.
_PROMQL_WORDS = """
    abs absent absent_over_time acos acosh asin asinh atan atanh avg_over_time ceil
    changes clamp clamp_max clamp_min cos cosh count_over_time days_in_month
    day_of_month day_of_week day_of_year deg delta deriv exp floor histogram_avg
    histogram_count histogram_fraction histogram_quantile histogram_stddev
    histogram_stdvar histogram_sum holt_winters hour idelta increase irate
    label_join label_replace last_over_time ln log10 log2 mad_over_time
    max_over_time min_over_time minute month pi predict_linear present_over_time
    quantile_over_time rad rate resets round scalar sgn sin sinh sort sort_desc
    sort_by_label sort_by_label_desc sqrt stddev_over_time stdvar_over_time
    sum_over_time tan tanh time timestamp vector year
    sum min max avg group stddev stdvar count count_values bottomk topk quantile
    limitk limit_ratio
    and or unless by without on ignoring group_left group_right bool offset
    inf nan
"""
PROMQL_WORDS = frozenset(_PROMQL_WORDS.split())

# vLLM's metrics we use (names as served, before the _bucket/_total suffixes).
VLLM_METRICS = {
    "vllm:time_to_first_token_seconds": "histogram",
    "vllm:e2e_request_latency_seconds": "histogram",
    "vllm:num_requests_waiting": "gauge",
    "vllm:num_requests_running": "gauge",
    "vllm:kv_cache_usage_perc": "gauge",
    "vllm:prefix_cache_hits": "counter",
    "vllm:prefix_cache_queries": "counter",
}

_SUFFIXES = {
    "counter": ("_total", "_created"),
    "histogram": ("_bucket", "_sum", "_count", "_created"),
    "summary": ("", "_sum", "_count", "_created"),
    "gauge": ("",),
    "info": ("_info",),
    "unknown": ("",),
}


def _series_names(name: str, kind: str) -> set[str]:
    return {name + suffix for suffix in _SUFFIXES.get(kind, ("",))}


def _registry_names(registry: CollectorRegistry) -> set[str]:
    names: set[str] = set()
    family: Metric
    for family in registry.collect():
        names |= _series_names(family.name, family.type)
    return names


def faststream_metric_names() -> set[str]:
    """The series names FastStream's Prometheus middleware exposes."""
    from faststream.prometheus.container import MetricsContainer

    registry = CollectorRegistry()
    MetricsContainer(registry, metrics_prefix="faststream", custom_label_names=())
    return _registry_names(registry)


def known_metric_names() -> set[str]:
    names = _registry_names(metrics.REGISTRY) | faststream_metric_names()
    for name, kind in VLLM_METRICS.items():
        names |= _series_names(name, kind)
    return names


_STRING = re.compile(r'"(?:[^"\\]|\\.)*"|\'(?:[^\'\\]|\\.)*\'')
_GRAFANA_VAR = re.compile(r"\$\{[^}]*\}|\$\w+")
_MATCHERS = re.compile(r"\{[^}]*\}")
_RANGE = re.compile(r"\[[^\]]*\]")
_GROUPING = re.compile(r"\b(by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)")
_NAME = re.compile(r"(?<![\w:.])[A-Za-z_:][A-Za-z0-9_:]*")


def metric_names_in(expr: str) -> set[str]:
    """Metric names in a PromQL expression (Grafana variables allowed)."""
    text = _GRAFANA_VAR.sub("1", expr)
    text = _STRING.sub('""', text)
    text = _MATCHERS.sub("", text)
    text = _RANGE.sub("", text)
    text = _GROUPING.sub(" ", text)
    # Durations after `offset` and number literals like 1e3 are not names.
    text = re.sub(r"\boffset\s+\w+", " ", text)
    text = re.sub(r"\b\d[\w.]*", " ", text)
    return {name for name in _NAME.findall(text) if name not in PROMQL_WORDS}
