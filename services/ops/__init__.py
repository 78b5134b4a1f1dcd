"""Operator tooling: dead letters (list/show/redrive), replay of a stage, rebuild of the projection."""
