"""Load what the safety screens read before a service takes its first message.

The first screen in a process compiles the rulebook's and the catalogue's patterns
and reads the learned readers (about a second on two cores, several on a loaded
machine); inside a turn that time comes out of the turn's deadline, and a cold
Stability, Coach or Synth then misses the first turn of every restart.
"""

from __future__ import annotations

import asyncio

from coachbus.learned import shipped
from coachbus.safety.conversation import conversation_book
from coachbus.safety.screen import screen_crisis
from coachbus.safety.steps import step_screen, suggested_in_reply

# Any ordinary sentence long enough to reach the learned readers.
_SAMPLE = "I want to plan my week so that I sleep better and keep my training going."


def warm() -> None:
    """Compile the patterns and read the learned readers now (blocking)."""
    for name in ("crisis", "steps", "openers"):
        shipped(name)
    conversation_book()
    screen_crisis(_SAMPLE)
    step_screen(_SAMPLE)
    suggested_in_reply(_SAMPLE, ["sleep_deprivation"])


async def warm_in_thread() -> None:
    """:func:`warm`, off the event loop (a service's startup hook)."""
    await asyncio.to_thread(warm)
