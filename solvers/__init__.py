"""Solvers (issue: DDP/FDDP, NLP)."""
