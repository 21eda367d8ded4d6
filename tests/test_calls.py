"""Generic call pairing: enter+exit folded, in flight, unfinished/resumed past the window, parts."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from rmtrace.calls import CallState, Pairing, call_key, pair_calls
from rmtrace.record import Phase, Record, Source


def rec(phase, call_id=0, pid=1, t=0, source=Source.RM):
    return Record(source, phase, op=0x2A, pid=pid, tid=pid, call_id=call_id, time_ns=t)


def test_enter_and_exit_fold_in_order_of_enter():
    records = [rec(Phase.ENTER, 1, t=10), rec(Phase.ENTER, 2, t=20), rec(Phase.EXIT, 2, t=30),
               rec(Phase.EVENT, t=35, source=Source.MARK), rec(Phase.EXIT, 1, t=40)]
    calls = list(pair_calls(records))
    assert [c.state for c in calls] == [CallState.COMPLETE, CallState.COMPLETE, CallState.SINGLE]
    assert [c.first.call_id for c in calls[:2]] == [1, 2]
    assert calls[0].duration_ns == 30 and calls[1].duration_ns == 10
    assert calls[2].first.source == Source.MARK


def test_same_call_id_in_two_processes_does_not_mix():
    records = [rec(Phase.ENTER, 7, pid=1, t=1), rec(Phase.ENTER, 7, pid=2, t=2),
               rec(Phase.EXIT, 7, pid=2, t=3), rec(Phase.EXIT, 7, pid=1, t=9)]
    calls = list(pair_calls(records))
    assert [(c.first.pid, c.duration_ns) for c in calls] == [(1, 8), (2, 1)]


def test_a_call_without_exit_is_in_flight_and_does_not_hold_back_the_rest_past_the_window():
    records = [rec(Phase.ENTER, 1, t=0)] + [r for i in range(2, 12) for r in (rec(Phase.ENTER, i, t=i),
                                                                              rec(Phase.EXIT, i, t=i))]
    calls = list(pair_calls(records))
    assert calls[0].state is CallState.IN_FLIGHT and calls[0].duration_ns is None
    assert all(c.state is CallState.COMPLETE for c in calls[1:]) and len(calls) == 11
    emitted = []
    stream = pair_calls(iter(records + [rec(Phase.EXIT, 1, t=99)]), window=4)
    for call in stream:
        emitted.append(call)
    assert emitted[0].state is CallState.UNFINISHED
    assert emitted[-1].state is CallState.RESUMED and emitted[-1].first.phase == Phase.EXIT
    assert sum(len(c.records) for c in emitted) == len(records) + 1  # nothing lost


def test_an_exit_without_enter_is_resumed():
    calls = list(pair_calls([rec(Phase.EXIT, 5, t=1)]))
    assert calls[0].state is CallState.RESUMED


def test_parts_join_an_open_call():
    def keyer(r):
        return {Phase.SEND: (Pairing.OPEN, r.call_id), Phase.RECV: (Pairing.CLOSE, r.call_id),
                Phase.EVENT: (Pairing.PART, r.call_id)}[r.phase]
    records = [rec(Phase.SEND, 1, t=0), rec(Phase.EVENT, 1, t=1), rec(Phase.EVENT, 1, t=2), rec(Phase.RECV, 1, t=3)]
    calls = list(pair_calls(records, keyer))
    assert len(calls) == 1 and len(calls[0].records) == 4 and calls[0].state is CallState.COMPLETE


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(st.integers(1, 6), st.sampled_from([Phase.ENTER, Phase.EXIT, Phase.EVENT])), max_size=60),
       st.integers(1, 8))
def test_pairing_never_loses_or_duplicates_a_record(events, window):
    records = [rec(phase, call_id, t=i) for i, (call_id, phase) in enumerate(events)]
    calls = list(pair_calls(records, call_key, window))
    seen = sorted(r.time_ns for c in calls for r in c.records)
    assert seen == list(range(len(records)))
    firsts = [c.first.time_ns for c in calls]
    assert firsts == sorted(firsts)  # yielded in order of their first record
