"""Entry point of ``python -m soak`` (``make soak``)."""

from __future__ import annotations

import sys

from soak.run import main

if __name__ == "__main__":
    sys.exit(main())
