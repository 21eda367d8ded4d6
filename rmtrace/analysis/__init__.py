"""Answers from a session model: wedges, first divergence, statistics (layer 3)."""
