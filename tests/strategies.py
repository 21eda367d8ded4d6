"""Hypothesis strategies for records of every source and phase."""

from __future__ import annotations

from hypothesis import strategies as st

from rmtrace.record import Buffer, Phase, Record, Role, Source, When

u32 = st.integers(0, 2**32 - 1)
u64 = st.integers(0, 2**64 - 1)

buffers = st.builds(
    Buffer,
    role=st.sampled_from(list(Role)).map(int),
    when=st.sampled_from(list(When)).map(int),
    data=st.one_of(st.just(b""), st.binary(max_size=64), st.binary(min_size=600, max_size=5000)),
    flags=st.integers(0, 3),
    addr=u64,
    slot=st.integers(0, 7),
)

records = st.builds(
    Record,
    source=st.sampled_from(list(Source)).map(int),
    phase=st.sampled_from(list(Phase)).map(int),
    op=u32,
    time_ns=st.integers(0, 2**62),
    pid=u32,
    tid=u32,
    call_id=u64,
    fd=st.integers(-(2**31), 2**31 - 1),
    ret=st.integers(-(2**63), 2**63 - 1),
    err=st.integers(-(2**31), 2**31 - 1),
    flags=st.integers(0, 15),
    buffers=st.lists(buffers, max_size=6).map(tuple),
)
