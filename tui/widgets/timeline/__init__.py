"""The timeline: lanes over time, its arithmetic and rows."""
