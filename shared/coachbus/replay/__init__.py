"""``coachbus replay``: recorded turns run again against a candidate model or policy.

A team changes a prompt, a policy or a model and wants to know what that did to the
turns real people sent. Replay reads turns recorded on the bus (or a file saved from
them), runs them through the whole pipeline in a **sandbox** — its own topic
prefix, the candidate policy and LLM, no gateway — and writes, per turn, what the
candidate decided differently from what production decided then:

* it never writes to the live topics, never sends a reply to a user (there is no
  gateway in the sandbox, and its replies topic has its own prefix) and never reads
  or writes the live state topics: each user's state is rebuilt in the sandbox from
  their recorded history, in order, one turn after the other;
* it honours erasure: turns of a user older than that user's erase watermark are
  not replayed (they are gone from the live view too);
* the output folder gets ``diff.json`` (schema: docs/replay.schema.json) and
  ``report.html`` (final replies side by side, differences marked), and a
  ``checkpoint.jsonl`` of the users whose history was replayed whole: an
  interrupted run resumes after them (a user cut off mid-history is replayed from
  their first turn, so their state is rebuilt in order);
* **guard**: a candidate that misses a crisis the recorded turn caught, or whose
  final reply names a step its turn blocked, makes the command exit 1 and say which
  turns — so a replay can gate a deploy in CI.

The package, in the order a run goes through it: :mod:`~coachbus.replay.record`
reads what was recorded (topics or a saved file) into turns;
:mod:`~coachbus.replay.sandbox` runs them through the candidate pipeline;
:mod:`~coachbus.replay.diff` compares each turn with its recording and writes the
report; :mod:`~coachbus.replay.command` is ``coachbus replay`` itself (flags,
checkpoint, exit code).
"""
