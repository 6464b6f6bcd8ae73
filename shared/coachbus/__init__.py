"""coachbus: the shared library every coachbus service imports.

Contracts (event schemas, topics), settings, the bus runtime (key-ordered
consumption, dead-lettering, compacted-topic state) and the LLM layer live here,
so that no service ever needs to import another one.
"""

__version__ = "0.1.0"
