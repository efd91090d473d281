"""Benchmarks against the anchors of DESIGN.md."""
