"""The evaluation tools: ``coachbus eval`` (decisions scored on labelled corpora).

A package beside ``shared/`` because it runs the services' own decision functions
in process (like the benchmarks): the shared library never imports a service, and
``coachbus eval`` loads this package by name.
"""
