"""What importing the session model brings: not the fold, nor the semantic layer's events and interpreter.

``rmtrace stats`` imports ``rmtrace.session.model`` for its types and reads a trace's objects from the cache,
folding nothing; the fold's modules (and the ~50 event classes they read) come with what folds.  Checked in a
fresh interpreter; the time it saves is bench/cli_startup.py's to measure.
"""

from __future__ import annotations

import json
import subprocess
import sys

PROBE = """
import json, sys
import rmtrace.session.model
print(json.dumps(sorted(sys.modules)))
"""

FOLD = {"rmtrace.session.fold", "rmtrace.session.objects", "rmtrace.semantics.events", "rmtrace.semantics.interpret"}


def test_the_model_module_leaves_the_fold_to_what_folds():
    proc = subprocess.run([sys.executable, "-c", PROBE], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert FOLD & set(json.loads(proc.stdout)) == set()
