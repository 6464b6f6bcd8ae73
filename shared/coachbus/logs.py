"""Logging setup. Message text and secrets never go to INFO logs: only ids and sizes."""

from __future__ import annotations

import logging
import sys


def setup_logging(service: str, level: str = "INFO") -> None:
    root = logging.getLogger()
    if getattr(root, "_coachbus", False):
        return
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(
        logging.Formatter(f"%(asctime)s {service} %(levelname)s %(name)s: %(message)s")
    )
    root.handlers[:] = [handler]
    root.setLevel(level)
    # aiokafka is chatty about group membership at INFO; keep warnings.
    logging.getLogger("aiokafka").setLevel(logging.WARNING)
    root._coachbus = True  # type: ignore[attr-defined]
