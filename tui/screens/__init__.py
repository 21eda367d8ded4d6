"""Screens and modals of the TUI, one module each."""
