"""Synth's sentences (render.toml) and per-domain steps (topic_steps.toml), read by
services.synth.render."""
