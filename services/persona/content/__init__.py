"""Persona's own word lists (``record.toml``), read once at import by services.persona."""
