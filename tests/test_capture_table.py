"""The capture table the recorder writes for the shim, built from a driver profile."""

import pytest

from rmtrace.capture import ctab
from rmtrace.errors import RmtraceError
from tests.capture_support import CTRL_GET_CLASSLIST, PointerField, ProfileDouble


def test_table_from_profile_round_trips():
    table = ctab.table_from_profile(ProfileDouble(), ring_size=1 << 16, lossy=True)
    back = ctab.decode(ctab.encode(table))
    assert back == table
    assert back.uvm[0x30000001] == (16, ())
    assert back.controls == {CTRL_GET_CLASSLIST: (ctab.TablePointer(8, 0, 4, 4, 0),)}
    assert back.lossy and back.ring_size == 1 << 16 and back.rights_size == ctab.DEFAULT_RIGHTS_SIZE


class _Profile(ProfileDouble):
    """Pointers the rules could only partly resolve, a UVM command without a size, a rights layout."""

    uvm = dict(ProfileDouble.uvm, **{"99": None})
    controls = {1: None, 2: None}

    class _Rights:
        size = 8

    layouts = {"RS_ACCESS_MASK": _Rights()}

    def __init__(self):
        self.uvm = {k: v for k, v in ProfileDouble.uvm.items()}
        self.uvm[99] = type(ProfileDouble.uvm[39])(99, "NO_SIZE", None, None)

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
    table = ctab.table_from_profile(ProfileDouble(), uvm_pointers={39: (PointerField(0, None, 0, 1, 4, "x"),)})
    assert ctab.decode(ctab.encode(table)).uvm[39] == (8, (ctab.TablePointer(0, 0, 0, 1, 4),))


@pytest.mark.parametrize("size", [0, 1000, 4095, 4097, 3 << 20, 2 << 30])
def test_bad_ring_sizes_are_refused(size):
    with pytest.raises(RmtraceError, match="power of two"):
        ctab.check_ring_size(size)


def test_decode_refuses_garbage():
    with pytest.raises(RmtraceError):
        ctab.decode(b"\0" * 10)
    data = bytearray(ctab.encode(ctab.table_from_profile(ProfileDouble())))
    with pytest.raises(RmtraceError):
        ctab.decode(bytes(data[:-4]))
