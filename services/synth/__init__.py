"""The synth service."""
