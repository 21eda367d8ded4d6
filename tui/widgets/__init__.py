"""The TUI's widgets, one folder per area of the screen."""
