"""Content shipped as data (help lines per locale), read with importlib.resources."""
