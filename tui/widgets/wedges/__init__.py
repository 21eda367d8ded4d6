"""Wedges and a diff's divergence, in plain words."""
