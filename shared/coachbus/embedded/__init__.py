"""The embedded default: a real Kafka-compatible broker and a process supervisor."""
