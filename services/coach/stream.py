"""Streaming the Coach's LLM reply to the user while it is written.

The machinery is shared with Synth and lives in :mod:`coachbus.reply_stream` (a
service never imports another); the Coach uses its batching :class:`DeltaPublisher`
(``coach_delta`` pieces about every 80 ms or at a sentence end, a held-back tail
for blocked-step markers) and a :class:`StreamingLLM` without ``complete``: a
check failing mid-stream fails the attempt and the router repairs or falls back;
the whole ``coach`` reply always follows. Re-exported here for the Coach's code
and tests.
"""

from __future__ import annotations

from coachbus.reply_stream import BATCH_S, SENTENCE_GAP_S, DeltaPublisher, StreamingLLM

__all__ = ["BATCH_S", "SENTENCE_GAP_S", "DeltaPublisher", "StreamingLLM"]
