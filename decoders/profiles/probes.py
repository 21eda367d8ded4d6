"""Probe C files: compile headers with gcc to learn their macros, their layouts and their numbers.

A ``Unit`` is one translation unit: a list of headers to include, the include
directories, and optional *shadow* headers that stand in for a header the unit
must not pull in (RM-internal headers that drag in NVOC and the whole kernel
build).  For a unit we

1. list its macros with ``gcc -E -dD -CC`` (definitions in order, with the
   file each comes from and its trailing comment: FINN writes which params
   message a control command is built from into that comment);
2. compile it with ``gcc -g -fno-eliminate-unused-debug-types`` plus one
   ``const long long`` global per value wanted (a macro or any C constant
   expression), so that layouts come from DWARF and values from ``.rodata``.
   An expression gcc rejects is dropped and the unit compiled again: only the
   values that are integer constants survive.
"""

from __future__ import annotations

import os
import re
import subprocess
from dataclasses import dataclass, field
from pathlib import Path

from rmtrace.errors import RmtraceError

GCC = os.environ.get("RMTRACE_GCC", "gcc")
CFLAGS = ("-g", "-O0", "-fno-eliminate-unused-debug-types", "-w", "-fmax-errors=0")
VALUE_PREFIX = "rmtrace_v_"
# gcc stops reporting after this many rounds of dropped expressions; real trees need 2.
MAX_ROUNDS = 8

_LINEMARK = re.compile(r'^# \d+ "([^"]*)"')
_DEFINE = re.compile(r"^#define (\w+)(\()?(.*)$")
_COMMENT = re.compile(r"/\*.*?\*/|//.*$")
_COMMENT_TEXT = re.compile(r"/\*(.*?)\*/|//(.*)$")
_LOCATION = re.compile(r"^([^:\s]+):(\d+):\d+: ", re.M)


@dataclass(frozen=True)
class Unit:
    name: str
    headers: tuple[str, ...]
    include_dirs: tuple[str, ...]
    prelude: str = ""                       # C text before the headers (e.g. a #define a header expects)
    shadows: tuple[tuple[str, str], ...] = ()  # (header path as included, C text standing in for it)

    def source(self) -> str:
        lines = [self.prelude] if self.prelude else []
        lines += [f'#include "{h}"' for h in self.headers]
        return "\n".join(lines) + "\n"


@dataclass(frozen=True)
class Macro:
    name: str
    body: str       # the replacement text, comments removed
    comment: str    # the comments on the #define line
    file: str       # the header that defined it first
    files: tuple[str, ...] = ()  # every header that defines it, in order


@dataclass
class CompiledUnit:
    unit: Unit
    object_path: Path
    values: dict[str, str] = field(default_factory=dict)  # key -> C expression that compiled


def _flags(unit: Unit, workdir: Path) -> list[str]:
    shadow_dir = workdir / f"{unit.name}-shadow"
    for path, text in unit.shadows:
        target = shadow_dir / path
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(text)
    dirs = ([str(shadow_dir)] if unit.shadows else []) + list(unit.include_dirs)
    return [f"-I{d}" for d in dirs]


def _run(cmd: list[str]) -> subprocess.CompletedProcess:
    try:
        return subprocess.run(cmd, capture_output=True, text=True, errors="replace")
    except FileNotFoundError:
        raise RmtraceError(f"cannot run {cmd[0]!r}: the profile generator needs gcc (set RMTRACE_GCC)") from None


def list_macros(unit: Unit, workdir: Path) -> list[Macro]:
    """Every object-like macro the unit defines, in order of first definition.

    A redefinition supplies the body (the value the compiler will see) and adds its file.
    """
    src = workdir / f"{unit.name}-macros.c"
    src.write_text(unit.source())
    proc = _run([GCC, "-E", "-dD", "-CC", *_flags(unit, workdir), str(src)])
    if proc.returncode != 0:
        raise RmtraceError(f"probe {unit.name}: the headers do not preprocess:\n{_first_errors(proc.stderr)}")
    macros: dict[str, Macro] = {}
    current = ""
    for line in proc.stdout.splitlines():
        mark = _LINEMARK.match(line)
        if mark:
            current = mark.group(1)
            continue
        m = _DEFINE.match(line)
        if not m or m.group(2):  # function-like macros carry no value
            continue
        text = m.group(3)
        comment = " ".join(a or b for a, b in _COMMENT_TEXT.findall(text))
        body = _COMMENT.sub("", text).strip()
        old = macros.get(m.group(1))
        if old is None:
            macros[m.group(1)] = Macro(m.group(1), body, comment, current, (current,))
        else:
            macros[m.group(1)] = Macro(old.name, body, " ".join(filter(None, (old.comment, comment))), old.file,
                                       old.files + (current,))
    return list(macros.values())


def compile_unit(unit: Unit, values: dict[str, str], workdir: Path) -> CompiledUnit:
    """Compile the unit with one global per wanted value; drop the expressions gcc rejects."""
    flags = _flags(unit, workdir)
    src = workdir / f"{unit.name}.c"
    obj = workdir / f"{unit.name}.o"
    header = unit.source()
    first_line = header.count("\n") + 1
    pending = dict(values)
    for _ in range(MAX_ROUNDS):
        keys = list(pending)
        body = "".join(f"const long long {VALUE_PREFIX}{i} = (long long)({pending[k]});\n" for i, k in enumerate(keys))
        src.write_text(header + body)
        proc = _run([GCC, *CFLAGS, "-c", str(src), "-o", str(obj), *flags])
        if proc.returncode == 0:
            return CompiledUnit(unit, obj, {k: pending[k] for k in keys})
        # An error inside a macro is reported at the macro's header line, followed by an
        # "in expansion of macro" note at our line: any of our lines that gcc mentions is bad.
        bad = {int(line) - first_line for path, line in _LOCATION.findall(proc.stderr)
               if Path(path).name == src.name and int(line) >= first_line}
        if not bad:
            raise RmtraceError(f"probe {unit.name}: the headers do not compile:\n{_first_errors(proc.stderr)}")
        for index in bad:
            if 0 <= index < len(keys):
                pending.pop(keys[index], None)
    raise RmtraceError(f"probe {unit.name}: still failing after {MAX_ROUNDS} rounds of dropping values")


def value_symbol(index: int) -> str:
    return f"{VALUE_PREFIX}{index}"


def _first_errors(stderr: str, limit: int = 12) -> str:
    lines = [l for l in stderr.splitlines() if "error" in l]
    return "\n".join(lines[:limit]) or stderr[-2000:]
