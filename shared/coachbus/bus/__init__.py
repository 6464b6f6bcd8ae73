"""The bus runtime every service runs on: key-ordered dispatch, dead-lettering,
compacted-topic state, topic administration and the service app factory."""
