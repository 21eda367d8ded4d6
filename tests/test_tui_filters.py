"""The events filter: what a person types becomes sets, bad input a clear error, rows match or not."""

import pytest
from rmtrace.tui.filters import EventFilter
from rmtrace.tui.view import EventRow

from rmtrace.errors import RmtraceError
from rmtrace.record import Source


def row(**kw):
    base = dict(seq=1, t_rel=0, pid=200, tid=201, client="c2", source="UVM", phase="enter",
                operation="→ UVM_REGISTER_GPU", obj="", status="in flight", latency_ns=None, error=False,
                in_flight=True, handles=frozenset({0xCAF000D4}))
    base.update(kw)
    return EventRow(**base)


def test_parse_and_describe_round_trip():
    flt = EventFilter.parse({"pid": "200, 0x12c", "client": "c2", "channel": "c1/ch0,0xcaf000d4",
                             "source": "uvm,SEMA", "operation": "REGISTER", "status": "Error", "text": "gpu"})
    assert flt.pids == {200, 300} and flt.clients == {"c2"} and flt.sources == {Source.UVM, Source.SEMA}
    assert flt.channels == {"c1/ch0", "0xcaf000d4"} and flt.status == "error"
    assert EventFilter.parse(flt.as_fields()) == flt
    assert "pid 200,300" in flt.describe() and "text 'gpu'" in flt.describe()
    assert EventFilter().empty and EventFilter().describe() == "none"


@pytest.mark.parametrize("field, value, message", [
    ("pid", "12x", "pid: not a list of numbers"),
    ("source", "rm,disk", "source: unknown 'disk'"),
    ("channel", "ch0", "neither a channel id"),
])
def test_bad_input_is_a_clear_error(field, value, message):
    with pytest.raises(RmtraceError, match=message):
        EventFilter.parse({field: value})


def test_an_object_selection_survives_reparsing():
    picked = EventFilter(handles=frozenset({1}), object_label="NV01_DEVICE_0 0x1")
    again = EventFilter.parse({"pid": "7"}, keep=picked)
    assert again.handles == {1} and again.object_label == "NV01_DEVICE_0 0x1" and again.pids == {7}


def test_row_matching():
    r = row()
    assert EventFilter(clients=frozenset({"c2"})).row_matches(r)
    assert not EventFilter(clients=frozenset({"c1"})).row_matches(r)
    assert EventFilter(operation="register_gpu").row_matches(r)
    assert not EventFilter(operation="RM_ALLOC").row_matches(r)
    assert EventFilter(status="in_flight").row_matches(r)
    assert not EventFilter(status="ok").row_matches(r)
    assert EventFilter(status="error").row_matches(row(error=True, in_flight=False, status="rc -22"))
    assert EventFilter(status="-22").row_matches(row(error=True, in_flight=False, status="rc -22"))
    assert EventFilter(text="0xcaf000d4").row_matches(r)
    assert EventFilter(handles=frozenset({0xCAF000D4})).row_matches(r)
    assert not EventFilter(handles=frozenset({5})).row_matches(r)
    assert EventFilter().row_matches(r, channel_handles=frozenset({0xCAF000D4}))
    assert not EventFilter().row_matches(r, channel_handles=frozenset({1}))
    assert EventFilter(pids=frozenset({200})).header_matches(200, Source.UVM)
    assert not EventFilter(sources=frozenset({Source.RM})).header_matches(200, Source.UVM)
