"""Users' own decoders: a struct from a .o compiled here becomes a decoder, saved and used by later runs."""

from __future__ import annotations

import json
import os
import shutil
import struct
import subprocess
import sys

import pytest
from rmtrace.decoders import DecoderSet, Level
from rmtrace.decoders.profiles import load_profile

from rmtrace.record import Buffer, Phase, Record, Role, Source, When
from rmtrace.trace import TraceWriter

pytestmark = pytest.mark.skipif(shutil.which("gcc") is None, reason="needs gcc to build a debug object")

SOURCE = r"""
#include <stdint.h>
typedef uint32_t NvHandle;
struct my_inner { uint16_t lo; uint16_t hi; };
typedef struct my_msg {
    NvHandle hClient;          /* a handle: shown in hex, found by --handle */
    uint32_t flags : 3;
    uint32_t mode : 5;
    uint64_t addr;
    char name[12];
    struct my_inner pair[2];
    int32_t status;
} my_msg_t;
struct my_small { uint32_t a; uint32_t b; };
my_msg_t probe_msg;
struct my_small probe_small;
"""


def rmtrace(*args, env, check=True):
    proc = subprocess.run([sys.executable, "-m", "rmtrace.cli.main", *map(str, args)], capture_output=True,
                          text=True, env=env)
    if check and proc.returncode:
        raise AssertionError(f"exit {proc.returncode}: {proc.stderr}")
    return proc


@pytest.fixture
def setup(tmp_path):
    src = tmp_path / "my_service.c"
    src.write_text(SOURCE)
    obj = tmp_path / "my_service.o"
    subprocess.run(["gcc", "-g", "-c", "-o", obj, src], check=True)
    env = dict(os.environ, RMTRACE_DECODER_DIR=str(tmp_path / "decoders"))
    return obj, env, tmp_path


def message(h_client=0xC1D00001, flags=5, mode=9, status=0):
    return (struct.pack("<II Q", h_client, flags | mode << 3, 0x7F00DEADBEEF) + b"ring-0".ljust(12, b"\0")
            + struct.pack("<HHHH", 1, 2, 3, 4) + struct.pack("<i", status))


def test_from_dwarf_saves_a_decoder_that_later_runs_use(setup):
    obj, env, tmp = setup
    out = rmtrace("decoders", "from-dwarf", obj, "--struct", "my_msg_t", "--struct", "my_small",
                  "--source", "sema", "--op", "0x40", "--name", "MY_MSG", env=env).stdout
    assert "SEMA op 0x40 is now decoded as MY_MSG: my_msg_t (40 bytes), my_small (8 bytes)" in out
    saved = json.loads((tmp / "decoders" / "sema-0x40.json").read_text())
    assert saved["structs"] == ["my_msg_t", "my_small"] and saved["layouts"]["my_msg_t"]["size"] == 40
    assert "SEMA op 0x40  MY_MSG: my_msg_t, my_small" in rmtrace("decoders", "list", env=env).stdout

    trace = tmp / "mine.trace"
    with TraceWriter(trace, {"driver_version": "580.142"}) as w:
        w.write(Record(Source.SEMA, Phase.SEND, op=0x40, time_ns=10, pid=7, tid=7,
                       buffers=(Buffer(Role.PAYLOAD, When.ONCE, message()),)))
        w.write(Record(Source.SEMA, Phase.RECV, op=0x40, time_ns=20, pid=7, tid=7,
                       buffers=(Buffer(Role.PAYLOAD, When.ONCE, struct.pack("<II", 1, 2)),)))
        w.write(Record(Source.SEMA, Phase.SEND, op=0x40, time_ns=30, pid=7, tid=7,
                       buffers=(Buffer(Role.PAYLOAD, When.ONCE, message(h_client=5, status=-22)),)))
    lines = rmtrace("show", trace, env=env).stdout.splitlines()
    assert lines[0].endswith('→ MY_MSG(hClient=0xc1d00001, flags=5, mode=9, addr=0x7f00deadbeef, name="ring-0", '
                             'pair=[{…}, {…}]) = 0')
    assert lines[1].endswith("← MY_MSG(a=1, b=2)")  # the buffer's size picked my_small
    assert lines[2].endswith("= -22")
    verbose = rmtrace("show", "-V", "--handle", "0xc1d00001", trace, env=env).stdout
    assert "pair[1] {lo=3, hi=4}" in verbose and verbose.count("MY_MSG(") == 1
    calls = [json.loads(line) for line in rmtrace("show", "--json", trace, env=env).stdout.splitlines()]
    assert calls[0]["buffers"][0]["fields"]["name"] == "ring-0" and calls[0]["known"] is True


def test_decoder_set_lays_user_decoders_over_the_builtin_tables(setup, monkeypatch):
    obj, env, tmp = setup
    monkeypatch.setenv("RMTRACE_DECODER_DIR", env["RMTRACE_DECODER_DIR"])
    from rmtrace.decoders.sema import SemaOp
    from rmtrace.decoders.user import from_dwarf, save
    save(from_dwarf(obj, ["my_small"], Source.SEMA, SemaOp.ACQUIRE, "MY_ACQUIRE"))
    decoders = DecoderSet(load_profile("580.142"))
    d = decoders.decode(Record(Source.SEMA, Phase.SEND, op=SemaOp.ACQUIRE,
                               buffers=(Buffer(Role.PAYLOAD, When.ONCE, struct.pack("<II", 3, 4)),)), Level.FULL)
    assert (d.name, d.args) == ("MY_ACQUIRE", {"a": 3, "b": 4})
    assert any("sema-0x7.json" in origin for origin in decoders.user_sources)
    assert DecoderSet(load_profile("580.142"), user=False).decode(
        Record(Source.SEMA, Phase.SEND, op=SemaOp.ACQUIRE)).name == "SEMA_ACQUIRE"


def test_from_dwarf_errors_are_clear(setup):
    obj, env, tmp = setup
    proc = rmtrace("decoders", "from-dwarf", obj, "--struct", "nope", "--source", "sema", "--op", "1", env=env,
                   check=False)
    assert proc.returncode == 2 and "no struct or union called nope" in proc.stderr and "Traceback" not in proc.stderr
    junk = tmp / "junk.ko"
    junk.write_bytes(b"not an elf")
    proc = rmtrace("decoders", "from-dwarf", junk, "--struct", "x", "--source", "sema", "--op", "1", env=env, check=False)
    assert proc.returncode == 2 and "not an object file" in proc.stderr
    proc = rmtrace("decoders", "from-dwarf", obj, "--struct", "my_small", "--source", "nowhere", "--op", "1", env=env,
                   check=False)
    assert proc.returncode == 2 and "unknown source" in proc.stderr
    (tmp / "decoders").mkdir(exist_ok=True)
    (tmp / "decoders" / "broken.json").write_text("{")
    listing = rmtrace("decoders", "list", env=env).stdout
    assert "broken.json: not loaded" in listing


def test_entry_point_plugins_add_tables_and_broken_ones_are_reported(monkeypatch):
    from importlib import metadata

    from rmtrace.decoders import user
    points = [metadata.EntryPoint("hello", "tests.plugin_example:tables", user.ENTRY_POINT_GROUP),
              metadata.EntryPoint("bad", "tests.plugin_example:broken", user.ENTRY_POINT_GROUP)]
    monkeypatch.setattr(user.metadata, "entry_points", lambda group: points if group == user.ENTRY_POINT_GROUP else [])
    profile = load_profile("580.142")
    decoders = DecoderSet(profile)
    d = decoders.decode(Record(Source.SEMA, Phase.SEND, op=0x80, buffers=(Buffer(Role.PAYLOAD, When.ONCE, b"hey"),)))
    assert (d.name, d.args) == ("MY_HELLO", {"bytes": 3})
    assert any(o.startswith("plugin hello") for o in decoders.user_sources)
    assert user.plugin_errors(profile) == ["plugin bad (tests.plugin_example:broken): RuntimeError: this plugin is "
                                           "broken on purpose"]
