"""The persona service."""
