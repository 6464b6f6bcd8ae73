"""Synth's sentences (render.toml) and per-domain steps (domain_steps.toml), read by
services.synth.render."""
