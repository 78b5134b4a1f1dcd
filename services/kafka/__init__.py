"""Kafka wiring shared by every stage: topic specs, broker factory, delivery (retry, dead letters), lag."""
