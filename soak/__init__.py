"""``python -m soak``: N simulated users for M minutes against a whole stack.

Reports turn latency (p50/p99), lost turns and doubled finals (both must be 0,
counted on the replies topic itself) and each service's resident memory over time
(flat: the last third of the run may not sit clearly above the first third).
"""

from soak.run import SoakConfig, SoakReport, run_soak

__all__ = ["SoakConfig", "SoakReport", "run_soak"]
