"""Traces recorded on real hardware (see README.md here); shipped with the package as data."""
