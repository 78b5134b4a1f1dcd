"""Kafka wiring shared by every stage: topic specs, broker factory, delivery (retry, dead letters), lag.

Importing this package makes every aiokafka consumer of the process parse fetched records with
``services.kafka.tolerant`` (a header key that is not UTF-8 reaches the stage, to be dead-lettered, instead of
failing the fetch)."""

from services.kafka import tolerant as _tolerant

_tolerant.install()
