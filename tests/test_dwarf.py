"""rmtrace.dwarf, the one DWARF reader: layouts, bitfields in both encodings, enums, names, errors."""

from __future__ import annotations

import pickle
import subprocess

import pytest

from rmtrace.dwarf import ObjectFacts, compile_probe, compile_probe_constants, compile_probe_enums, read_enums, read_layouts
from rmtrace.errors import RmtraceError
from rmtrace.layout import Field
from tests.toolchain import needs_gcc

pytestmark = needs_gcc

BITFIELDS_C = """
struct plain { unsigned int a : 3; unsigned int b : 5; unsigned int : 0; unsigned short c : 9; unsigned char d; };
struct __attribute__((packed)) tight { unsigned char x; unsigned int fits : 12; unsigned int straddle : 20; };
struct plain p; struct tight t;
"""

SHAPES_C = """
typedef unsigned char NvU8;
typedef NvU8 NvBool;
typedef struct inner { unsigned short lo, hi; } inner_t;
typedef union word { unsigned int u; NvU8 b[4]; } word_t;
struct outer {
    NvBool on;
    inner_t pair[2][3];
    word_t w;
    struct { int x; } anon;
    const char *name;
    enum colour { RED = 1, GREEN = 4 } colour;
    NvU8 tail[];
};
typedef enum { SMALL = -1, LARGE = 0x7fffffff } size_e;
struct outer o; size_e s;
"""


def _object(tmp_path, source: str, *flags: str):
    src = tmp_path / "probe.c"
    src.write_text(source)
    obj = tmp_path / "probe.o"
    subprocess.run(["gcc", "-g", *flags, "-c", str(src), "-o", str(obj)], check=True)
    return obj


@pytest.mark.parametrize("dwarf", ["-gdwarf-4", "-gdwarf-5"])
def test_bitfields_read_the_same_from_dwarf_4_and_5(tmp_path, dwarf):
    layouts = ObjectFacts(_object(tmp_path, BITFIELDS_C, dwarf)).layouts(["plain", "tight"])
    plain = {f.name: (f.offset, f.size, f.bit_offset, f.bit_size) for f in layouts["plain"].fields}
    assert plain == {"a": (0, 4, 0, 3), "b": (0, 4, 3, 5), "c": (4, 2, 0, 9), "d": (6, 1, None, None)}
    tight = {f.name: (f.offset, f.size, f.bit_offset, f.bit_size) for f in layouts["tight"].fields}
    # packed: bits 8..19 fit the first 4-byte unit; bits 20..39 cross into the next, so
    # they are read from the three bytes they span
    assert tight["fits"] == (0, 4, 8, 12)
    assert tight["straddle"] == (2, 3, 4, 20)
    assert layouts["tight"].fields[0] == Field("x", 0, 1, "unsigned char", "uint")


def test_nested_arrays_unions_anonymous_members_and_kinds(tmp_path):
    facts = ObjectFacts(_object(tmp_path, SHAPES_C))
    layouts = facts.layouts(["outer"])
    outer = layouts["outer"]
    assert [(f.name, f.offset, f.size, f.kind) for f in outer.fields] == [
        ("on", 0, 1, "bool"), ("pair", 2, 24, "array"), ("w", 28, 4, "union"), ("anon", 32, 4, "struct"),
        ("name", 40, 8, "ptr"), ("colour", 48, 4, "enum"), ("tail", 52, 0, "array")]
    pair = outer.field("pair")
    assert (pair.dims, pair.count, pair.elem, pair.elem_kind, pair.type) == ((2, 3), 6, "inner_t", "struct",
                                                                           "inner_t[2][3]")
    assert layouts["inner_t"].size == 4 and layouts["word_t"].kind == "union"  # nested layouts come along
    assert outer.field("anon").type == "outer.anon" and layouts["outer.anon"].field("x").kind == "int"
    assert outer.field("name").type == "char*" and outer.field("tail").count == 0
    assert facts.layout_name("inner") == "inner_t"  # a typedef names its struct
    assert pickle.loads(pickle.dumps(facts)).layouts(["outer"]) == layouts  # crosses process pools


def test_read_layouts_keys_by_the_name_asked_and_read_enums(tmp_path):
    obj = _object(tmp_path, SHAPES_C)
    layouts = read_layouts(obj, ["inner", "word_t", "nothing"])
    assert set(layouts) == {"inner", "word_t"} and layouts["inner"].size == 4
    assert {"outer", "inner", "inner_t", "word", "word_t"} <= set(read_layouts(obj))
    assert read_enums(obj, ["colour", "size_e"]) == {"colour": {"RED": 1, "GREEN": 4},
                                                     "size_e": {"SMALL": -1, "LARGE": 0x7FFFFFFF}}
    assert set(read_enums(obj)) == {"colour"}  # the typedef'd enum is anonymous: asked for by name only


def test_probes_and_their_errors(tmp_path):
    assert compile_probe(SHAPES_C, ["outer"])["outer"].size == 56
    assert compile_probe_enums(SHAPES_C, ["colour"]) == {"colour": {"RED": 1, "GREEN": 4}}
    with pytest.raises(RmtraceError, match="no DWARF layout for: missing"):
        compile_probe(SHAPES_C, ["outer", "missing"])
    with pytest.raises(RmtraceError, match="no DWARF enum for: missing"):
        compile_probe_enums(SHAPES_C, ["missing"])
    with pytest.raises(RmtraceError, match="compiling the probe failed"):
        compile_probe("struct broken { no_such_type x; } b;", ["broken"])
    src = tmp_path / "plain.c"
    src.write_text("int x;\n")
    subprocess.run(["gcc", "-c", str(src), "-o", str(tmp_path / "plain.o")], check=True)
    with pytest.raises(RmtraceError, match="no DWARF debug info"):
        ObjectFacts(tmp_path / "plain.o")


def test_constants_are_the_compilers_values(tmp_path):
    (tmp_path / "k.h").write_text("#define BASE 0x10u\n#define SHIFTED (BASE << 4)\n#define NEG (-3)\n#define TEXT 7 /* 9 */\n")
    assert compile_probe_constants("k.h", ["BASE", "SHIFTED", "NEG", "TEXT"], [tmp_path]) == {
        "BASE": 16, "SHIFTED": 256, "NEG": -3, "TEXT": 7}
    with pytest.raises(RmtraceError, match="compiling the probe failed"):
        compile_probe_constants("k.h", ["UNDEFINED"], [tmp_path])


def test_compare_checks_kinds_and_array_elements():
    from construct import Array, Bytes, Float32l, Int16ul, Int32sl, Int32ul, Struct

    from rmtrace.abi_check import compare
    layout = compile_probe("struct k { int a; float f; unsigned short w[3]; unsigned char pad[2]; } k;", ["k"])["k"]
    good = Struct("a" / Int32sl, "f" / Float32l, "w" / Array(3, Int16ul), "pad" / Bytes(2))
    assert compare(layout, good) == []
    bad = Struct("a" / Int32ul, "f" / Int32ul, "w" / Bytes(6), "pad" / Bytes(2))
    assert compare(layout, bad) == ["k.a: C int is int, mirror is uint", "k.f: C float is float, mirror is uint",
                                    "k.w: C short unsigned int[3] is not bytes, mirror is Bytes"]
