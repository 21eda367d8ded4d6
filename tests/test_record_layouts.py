"""The layouts derived from the construct mirrors, kept in the user's cache (rmtrace.flat, ``FlatStruct.lazy``).

A process that only reads and writes records takes each layout's fields from the cache instead of
importing construct.  What it takes must be exactly what the mirror derives, and a mirror whose file
changed must be derived again.
"""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from rmtrace import chunk, flat, record, trace
from rmtrace.capture import shm

LAZY = [*record._MIRRORS.values(), *trace._MIRRORS.values(), chunk.CHUNK_HEADER, *shm.LAYOUTS.values()]


def _same(a: flat.FlatStruct, b: flat.FlatStruct) -> None:
    assert (a.codec.format, a.names, dict(a.defaults)) == (b.codec.format, b.names, dict(b.defaults))
    assert {n: s.offset for n, s in a.scalars.items()} == {n: s.offset for n, s in b.scalars.items()}


@pytest.mark.parametrize("lazy", LAZY, ids=[x.name for x in LAZY])
def test_a_lazy_layout_is_what_its_mirror_derives(lazy):
    _same(lazy, flat.FlatStruct(lazy.definition, lazy.name))


def test_the_cache_is_used_while_the_file_is_unchanged_and_derived_again_after(tmp_path, monkeypatch):
    monkeypatch.setenv("RMTRACE_CACHE_DIR", str(tmp_path))
    source = tmp_path / "mirror_mod.py"
    source.write_text("from construct import Const, Int32ul, Bytes, Struct\n"
                      "def define():\n    return Struct('magic' / Const(7, Int32ul), 'n' / Int32ul, 'reserved' / Bytes(8))\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    import mirror_mod
    layouts = flat._Layouts()
    first = layouts.fields(mirror_mod.define)
    assert first == [("magic", "L", 7), ("n", "L", None), ("reserved", "8s", bytes(8))]
    entries = json.loads((tmp_path / flat.LAYOUTS_FILE).read_text())
    assert list(entries) == ["mirror_mod:define"]

    def derived(_definition):
        raise AssertionError("derived again")
    monkeypatch.setattr(flat, "_fields", derived)
    assert flat._Layouts().fields(mirror_mod.define) == first  # a new process: from the cache

    source.write_text(source.read_text() + "# an edit\n")  # another CRC: derived again
    with pytest.raises(AssertionError, match="derived again"):
        flat._Layouts().fields(mirror_mod.define)


def test_a_damaged_cache_is_a_miss(tmp_path, monkeypatch):
    monkeypatch.setenv("RMTRACE_CACHE_DIR", str(tmp_path))
    (tmp_path / flat.LAYOUTS_FILE).write_text("{broken")
    assert flat._Layouts().fields(record._record_header) == list(flat._fields(record._record_header()))
    assert "rmtrace.record:_record_header" in json.loads((tmp_path / flat.LAYOUTS_FILE).read_text())


def test_recording_imports_no_construct_once_the_layouts_are_cached(tmp_path):
    code = ("import sys, rmtrace.capture.recorder, rmtrace.cli.record; "
            "print(sorted(m for m in sys.modules if m.split('.')[0] == 'construct'))")
    env = {"RMTRACE_CACHE_DIR": str(tmp_path), "PATH": "/usr/bin:/bin"}
    first = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True)
    assert first.stdout.strip() != "[]"  # the first run derives the layouts, with construct
    again = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True)
    assert again.stdout.strip() == "[]", again.stdout
