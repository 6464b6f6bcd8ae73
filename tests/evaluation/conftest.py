"""The LLM layer's in-process simulator, for the eval's model tiers: the same fixtures
the LLM layer's own tests use (tests/shared/llm/conftest.py)."""

from tests.shared.llm.conftest import _no_llm_env, sim

__all__ = ["_no_llm_env", "sim"]
