"""Shadow's cue phrases (cues.toml), read by services.shadow.cues."""
