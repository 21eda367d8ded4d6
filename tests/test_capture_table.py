"""The capture table the recorder writes for the shim, built from a driver profile."""

import pytest
from rmtrace.decoders.profiles.model import PointerField

from rmtrace.capture import ctab
from rmtrace.capture.shm import CtabHeader
from rmtrace.errors import RmtraceError
from tests.capture_support import CTRL_GET_CLASSLIST, recording_profile

UVM_INITIALIZE, UVM_PAGEABLE_MEM_ACCESS = 0x30000001, 39


def small_profile():
    """The test profile with the tables of what rmprog sends."""
    return recording_profile(uvm=(UVM_INITIALIZE, 37, UVM_PAGEABLE_MEM_ACCESS, 75),
                        controls=(CTRL_GET_CLASSLIST, 0x20800101, 0x20800102), classes=(0x41, 0x80))


def test_table_from_profile_round_trips():
    table = ctab.table_from_profile(small_profile(), ring_size=1 << 16, lossy=True)
    back = ctab.decode(ctab.encode(table))
    assert back == table
    assert back.uvm[UVM_INITIALIZE] == (16, ())
    assert back.classes == {0x41: 4, 0x80: 56}  # a root client's NvHandle; NV0080_ALLOC_PARAMETERS
    # GET_CLASSLIST {numClasses; classList}, GPU_GET_INFO {gpuInfoListSize; gpuInfoList of 8-byte entries}
    assert back.controls == {CTRL_GET_CLASSLIST: (ctab.TablePointer(8, 0, 4, 4, 0),),
                             0x20800101: (ctab.TablePointer(8, 0, 4, 8, 0),)}
    assert back.lossy and back.ring_size == 1 << 16 and back.rights_size == ctab.DEFAULT_RIGHTS_SIZE


class _Profile:
    """A unit-test double of DriverProfile's slice the table reads: pointers the rules could only
    partly resolve, a UVM command without a size, a rights layout."""

    def __init__(self):
        real = small_profile()
        self.uvm = dict(real.uvm)
        self.uvm[99] = type(real.uvm[UVM_PAGEABLE_MEM_ACCESS])(99, "NO_SIZE", None, None)
        self.controls = {1: None, 2: None}
        self.classes = real.classes
        self.layouts = {"RS_ACCESS_MASK": real.layouts["NV0080_ALLOC_PARAMETERS"].__class__("RS_ACCESS_MASK", 8, ())}

    def embedded_pointers(self, cmd):
        return {1: (PointerField(16, None, 0, 4, None, "noCount"), PointerField(24, 8, 4, 8, None, "list")),
                2: (PointerField(8, None, 0, 16, 3, "fixed"),)}.get(cmd, ())


def test_pointer_slots_stay_stable_and_sizeless_uvm_is_left_out():
    table = ctab.table_from_profile(_Profile())
    assert 99 not in table.uvm
    # the unusable first pointer keeps its slot as an empty entry, so slot 1 is still "list"
    assert table.controls[1] == (ctab.TablePointer(0, 0, 0, 0, 0), ctab.TablePointer(24, 8, 4, 8, 0))
    assert table.controls[2] == (ctab.TablePointer(8, 0, 0, 16, 3),)
    assert table.rights_size == 8


def test_uvm_pointers_are_carried():
    table = ctab.table_from_profile(small_profile(), uvm_pointers={39: (PointerField(0, None, 0, 1, 4, "x"),)})
    assert ctab.decode(ctab.encode(table)).uvm[39] == (8, (ctab.TablePointer(0, 0, 0, 1, 4),))


@pytest.mark.parametrize("size", [0, 1000, 4095, 4097, 3 << 20, 2 << 30])
def test_bad_ring_sizes_are_refused(size):
    with pytest.raises(RmtraceError, match="power of two"):
        ctab.check_ring_size(size)


def test_decode_refuses_garbage():
    with pytest.raises(RmtraceError):
        ctab.decode(b"\0" * 10)
    data = bytearray(ctab.encode(ctab.table_from_profile(small_profile())))
    with pytest.raises(RmtraceError):
        ctab.decode(bytes(data[:-4]))
    header = CtabHeader.parse(data)
    for field, value in (("n_ptr", header.n_ptr + 1000), ("ctrl_off", len(data))):  # rows past the end
        bad = CtabHeader.build({**header, field: value}) + bytes(data[CtabHeader.sizeof():])
        with pytest.raises(RmtraceError, match="run past"):
            ctab.decode(bad)


def test_the_recorder_takes_its_table_from_the_cache_the_second_time(tmp_path, monkeypatch):
    from rmtrace.capture import recorder
    monkeypatch.setenv("RMTRACE_CACHE_DIR", str(tmp_path))
    first = recorder.capture_table("580.159.04", 1 << 16, True)
    assert first[1] == "580.142" and "nearest" in first[2] and first[0].ring_size == 1 << 16 and first[0].lossy

    def no_profile(_version):
        raise AssertionError("the profile was loaded again")
    monkeypatch.setattr(recorder, "select_capture_profile", no_profile)
    again = recorder.capture_table("580.159.04", 1 << 20, False)
    assert again[1:] == first[1:] and again[0].ring_size == 1 << 20 and not again[0].lossy
    assert again[0].controls == first[0].controls and again[0].uvm == first[0].uvm
    (entry,) = tmp_path.glob("capture-table-*.json")
    entry.write_text("{broken")  # a damaged cache is a miss, not an error
    monkeypatch.undo()
    monkeypatch.setenv("RMTRACE_CACHE_DIR", str(tmp_path))
    assert recorder.capture_table("580.159.04", 1 << 16, True)[1] == "580.142"


def test_a_cached_table_is_taken_only_for_its_own_key(tmp_path, monkeypatch):
    """The cache file is named by a CRC of the key; the key itself, kept inside, decides."""
    monkeypatch.setenv("RMTRACE_CACHE_DIR", str(tmp_path))
    table = ctab.table_from_profile(small_profile())
    ctab.store("key one", table, "580.142", None)
    assert ctab.cached("key one") == (table, "580.142", None)
    (entry,) = tmp_path.glob("capture-table-*.json")
    entry.rename(tmp_path / ctab._cache_file("key two").rsplit("/", 1)[1])  # another key's name, this key inside
    assert ctab.cached("key two") is None
