"""Implementer adapters for the relay engine, one module per implementer."""
