"""Hardware profiles of the LLM simulator (data only; see coachbus.llm.simprofile)."""
