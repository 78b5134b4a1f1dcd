"""A small producer helper connectors can import: ``EnvelopeProducer``."""

from services.producer.client import EnvelopeProducer, ProducedRecord

__all__ = ["EnvelopeProducer", "ProducedRecord"]
