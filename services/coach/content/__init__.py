"""Coach's sentences (phrases.toml), read by services.coach.phrases."""
