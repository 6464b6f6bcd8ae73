"""The coach service."""
