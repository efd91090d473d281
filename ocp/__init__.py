"""Optimal control problems (issue: OCP layer)."""
