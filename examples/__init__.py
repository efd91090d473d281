"""Runnable example scripts."""
