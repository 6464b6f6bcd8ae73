"""The shadow service."""
