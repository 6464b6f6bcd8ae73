"""The stability service."""
