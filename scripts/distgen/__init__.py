"""Generators behind scripts/build_dist.py."""
