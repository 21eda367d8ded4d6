"""rmtrace tui: a Textual application for hunting wedges in traces.

``RmtraceApp.open(paths, library_services())`` opens one trace (or two, for a
diff); widgets see runs through ``RunView`` and never open files themselves.
"""
