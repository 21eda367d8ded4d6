"""The record path imports only what writing a trace needs (bench/record_start.py measures what that saves);
the names the modules it passes through have always offered stay importable, made on first use.

Each check runs in a fresh interpreter: what an earlier test imported would hide a load.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

WRITE = """
import json, os, sys, tempfile
import rmtrace.capture.recorder  # what `rmtrace record` imports before it runs the command
from rmtrace.record import Phase, Record, Source
from rmtrace.trace import TraceWriter
with tempfile.TemporaryDirectory() as tmp, TraceWriter(os.path.join(tmp, "t.trace"), {"probe": 1}) as w:
    w.write(Record(Source.MARK, Phase.EVENT, time_ns=1, pid=1, tid=1))
print(json.dumps(sorted(sys.modules)))
"""

READER_ONLY = ("rmtrace.recovery", "construct", "rmtrace.decoders", "rmtrace.session")
"""What a recording (the recorder's start, a trace written and closed) must not load: the reader's.  (A cold
user cache is the exception for construct: the first run derives the records' layouts from their definitions
and caches them, rmtrace.flat.FlatStruct.lazy.)"""

TRACE_PUBLIC = ["ALIGN", "CHUNK_HEADER_SIZE", "ChunkDecoder", "ChunkEncoder", "ChunkFinder", "ChunkInfo", "ChunkSpan",
                "CorruptTraceError", "Cursor", "DEFAULT_CHUNK_BYTES", "FILE_HEADER", "FILE_MAGIC", "FOOTER",
                "FOOTER_MAGIC", "FORMAT_VERSION", "FlatStruct", "Found", "H", "HEADER", "Held", "INDEX_ENTRY",
                "INDEX_HEADER", "INDEX_MAGIC", "IndexRow", "MAX_META", "NotATraceError", "Record", "RecordFilter",
                "Recovery", "RmtraceError", "TIME", "TraceError", "TraceReader", "TraceVersionError", "TraceWriter",
                "decode_chunk_header", "decode_record", "encode_file_header", "encode_record", "is_finished",
                "open_trace", "restamp", "FileHeader", "IndexHeader", "IndexEntry", "Footer"]
"""rmtrace.trace's public names before its imports were made lazy (main f083950's, less the standard
library's and typing's that it imported for itself), and its construct mirrors."""

TRACE_STAR = ["Cursor", "FORMAT_VERSION", "FileHeader", "Footer", "IndexEntry", "IndexHeader", "RecordFilter",
              "Recovery", "RmtraceError", "TraceReader", "TraceWriter", "open_trace"]
"""What ``from rmtrace.trace import *`` gave before."""

NAMES = """
import importlib, json, sys
module, names = sys.argv[1], json.loads(sys.argv[2])
m = importlib.import_module(module)
star = {}
exec(f"from {module} import *", star)
print(json.dumps({"star": sorted(k for k in star if k != "__builtins__"),
                  "missing": [n for n in names if getattr(m, n, None) is None],
                  "same": {n: getattr(m, n) is getattr(importlib.import_module(home), n) for n, home in
                           json.loads(sys.argv[3]).items()}}))
"""


def fresh(code: str, *argv: str, env: dict[str, str] | None = None) -> str:
    proc = subprocess.run([sys.executable, "-c", code, *argv], capture_output=True, text=True, timeout=120, env=env)
    assert proc.returncode == 0, proc.stderr
    return proc.stdout


def test_recording_loads_none_of_the_reader(tmp_path):
    # a cache of its own: one that another checkout's different sources share is rewritten under the test
    env = dict(os.environ, RMTRACE_CACHE_DIR=str(tmp_path))
    fresh(WRITE, env=env)  # the user's first run fills the cache
    modules = set(json.loads(fresh(WRITE, env=env)))
    assert "rmtrace.trace" in modules
    assert {m for m in modules if any(m == r or m.startswith(r + ".") for r in READER_ONLY)} == set()


TRACE_LAZY = dict.fromkeys(("ChunkFinder", "Found", "Held", "IndexRow", "Recovery"), "rmtrace.recovery")
"""rmtrace.trace's names made on first use -> the module they come from."""


@pytest.mark.parametrize(("module", "public", "star", "lazy"), [("rmtrace.trace", TRACE_PUBLIC, TRACE_STAR, TRACE_LAZY)])
def test_public_names_unchanged(module, public, star, lazy):
    got = json.loads(fresh(NAMES, module, json.dumps(public), json.dumps(lazy)))
    assert got["star"] == sorted(star)
    assert got["missing"] == []
    assert got["same"] == dict.fromkeys(lazy, True)  # the very objects of the module that defines them


NO_PATHLIB = """
import json, sys
sys.modules.pop("pathlib", None)  # an editable install's import hook loads it at start-up; an installed rmtrace has none
import rmtrace.capture.recorder
from rmtrace.kmod_shim import interposer_path
interposer_path()
print(json.dumps("pathlib" in sys.modules))
"""


def test_recording_does_not_import_pathlib():
    # a few ms of every installed recorder's start, which needed it only for the shim's path (rmtrace.kmod_shim)
    assert json.loads(fresh(NO_PATHLIB)) is False
