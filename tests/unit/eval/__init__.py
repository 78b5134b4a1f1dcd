"""Tests of the offline evaluation package (``services.eval``)."""
