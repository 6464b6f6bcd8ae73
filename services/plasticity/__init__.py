"""The plasticity service."""
