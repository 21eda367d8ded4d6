"""The events table and its columns."""
