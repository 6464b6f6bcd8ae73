"""Content shipped as data (crisis rules, help lines per locale, abbreviations), read
with importlib.resources; operators may point settings at their own copies."""
