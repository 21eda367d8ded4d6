"""The columnar call table: a trace's calls as typed columns, cached beside the trace (a regular package, so that a
non-editable install ships it too)."""
