"""The reference host-service model: RM lifecycle answers, the sema host's latches, publications and
drain holds under each policy, and the records it emits."""

from __future__ import annotations

import pytest
from rmtrace.decoders import decoders_for
from rmtrace.decoders.profiles import available_profiles
from rmtrace.decoders.sema import DrainReason, ResetReason, SemaOp
from rmtrace.replayer.model import objects
from rmtrace.replayer.model.core import ILLEGAL_ACTION, VirtualClock
from rmtrace.replayer.model.host import SemaHost, rank_of
from rmtrace.replayer.model.objects import Category, RmObjects
from rmtrace.replayer.model.policy import MS, PRESETS, policy
from rmtrace.replayer.model.records import SemaRecords

from rmtrace.record import Source, iter_records


def test_rm_lifecycle_answers_as_resserv_does():
    rm = RmObjects()
    assert rm.alloc_client(1, 0xC1D00001, 3)[0] == objects.NV_OK
    assert rm.alloc_client(1, 0xC1D00001, 3)[0] == objects.DUPLICATE
    assert rm.alloc_client(2, 0xC1D00001, 3)[0] == objects.NV_OK  # another process: its own namespace
    assert rm.alloc(1, 0xC1D00001, 0xC1D00001, 0x5C000001, Category.DEVICE)[0] == objects.NV_OK
    assert rm.alloc(1, 0xC1D00001, 0xC1D00001, 0x5C000001, Category.DEVICE)[0] == objects.DUPLICATE
    assert rm.alloc(1, 0xC1D00001, 0x5C0000FF, 0x5C000002, Category.SUBDEVICE)[0] == objects.NOT_FOUND
    assert rm.alloc(1, 0xC1D00001, 0xC1D00001, 0xC1D00001, Category.OTHER)[0] == objects.BAD_HANDLE
    assert rm.alloc(1, 0xC1D000FF, 0xC1D000FF, 0x5C000003, Category.OTHER)[0] == objects.BAD_HANDLE
    assert rm.alloc(1, 0xC1D00001, 0x5C000001, 0x5C000002, Category.SUBDEVICE)[0] == objects.NV_OK
    assert rm.control(1, 0xC1D000FF, 0x5C000001)[0] == objects.BAD_CLIENT
    assert rm.control(1, 0xC1D00001, 0x5C0000FF)[0] == objects.NOT_FOUND
    status, freed = rm.free(1, 0xC1D00001, 0x5C000001)
    assert status == objects.NV_OK and [o.handle for o in freed] == [0x5C000002, 0x5C000001]
    assert rm.free(1, 0xC1D00001, 0x5C000001) == (objects.NV_OK, [])  # RS_COMPATABILITY_MODE
    assert rm.free(1, 0xC1D00001, 0xC1D00001)[0] == objects.NV_OK
    assert rm.free(1, 0xC1D00001, 0xC1D00001)[0] == objects.BAD_HANDLE


@pytest.mark.parametrize("version", available_profiles())
def test_every_status_the_model_answers_is_in_every_profile(version):
    profile = decoders_for({"driver_version": version}).profile
    for name in (objects.NV_OK, objects.DUPLICATE, objects.BAD_HANDLE, objects.NOT_FOUND, objects.BAD_CLIENT,
                 ILLEGAL_ACTION):
        assert profile.lookup("status", name) is not None, (version, name)


class Log:
    """An ``Emit`` that keeps what the host reports, by op name."""

    def __init__(self):
        self.ops = []

    def __call__(self, op: SemaOp, body, pid, tid):
        self.ops.append((op.name, body))

    def names(self):
        return [op for op, _ in self.ops]


def host(name):
    clock = VirtualClock()
    log = Log()
    timers = []
    h = SemaHost(policy(name), clock, log, lambda t, fn: timers.append((t, fn)))
    return h, clock, log, timers


def channel(h, handle, ring=0x200410000, scope=1):
    return h.register((scope, 0xC1D00001, handle), 0xC1D00001, handle, ring, ring + 0x2000, f"pid {scope}", scope)


def tear_down_first_client(h):
    """The first client's channel: registered, published, given work once, then unregistered."""
    old = channel(h, 0xCAF000D4, scope=1)
    h.publish(old, "RING", old.ring_va, 0x2000)
    h.hint(old, 1)
    h.unregister(old)


def test_a_completion_fires_the_armed_latch_and_spends_it():
    h, _clock, log, _timers = host("legacy")
    ch = channel(h, 0x5C000006)
    assert h.publish(ch, "RING", ch.ring_va, 0x2000) == 0
    done = h.hint(ch, 1)
    assert done.done and h.counters["gr_rel"] == 1 and h.counters["pub_calls"] == 1
    assert log.names()[-2:] == ["LATCH_FIRE", "RELEASE"]
    again = h.hint(ch, 2)  # no new publication: the one-shot latch stays spent
    assert not again.done
    assert any("latch of rank" in why and "spent" in why for why in h.blockers(again))
    h.publish(ch, "RING", ch.ring_va, 0x2000)  # the owner re-publishes: armed again, the waiting work completes
    assert again.done and h.counters["gr_rel"] == 2


def test_a_hint_on_a_gone_channel_is_refused_with_einval():
    h, _clock, log, _timers = host("fixed")
    ch = channel(h, 0x5C000006)
    h.unregister(ch)
    assert h.hint(ch, 7) is None
    assert log.ops[-1] == ("COMPLETION_HINT", {"channel": 0x5C000006, "rank": 0xFFFFFFFF, "value": 7, "rc": -22,
                                               "reserved": 0})
    assert h.counters["hint_errors"] == 1 and h.counters["drain_held"] == 1


def test_legacy_keeps_a_stale_publication_and_the_drain_hold_forever():
    h, clock, _log, timers = host("legacy")
    tear_down_first_client(h)
    h.new_session(ResetReason.NEW_CLIENT)
    new = channel(h, 0xCAF000D4, scope=2)
    assert h.publish(new, "RING", new.ring_va, 0x2000) == -17
    work = h.hint(new, 1)
    assert not work.done and timers == []
    why = " ".join(h.blockers(work))
    assert "stale" in why and "spent" in why and "drain-held" in why
    assert h.counters["faked"] == 0 and h.counters["sessions"] == 0


def test_fixed_resets_the_session_and_degrades_a_bounded_drain_to_a_faked_completion():
    h, clock, log, timers = host("fixed")
    tear_down_first_client(h)
    assert timers and timers[0][0] == PRESETS["fixed"].drain_bound_ns
    h.new_session(ResetReason.NEW_CLIENT, 0xC1D00002, 2)
    assert log.ops[log.names().index("SESSION_RESET")][1]["channels_dropped"] == 1
    assert h.counters["faked"] == 1 and h.counters["drain_held"] == 0
    assert "FAKED_COMPLETION" in log.names() and "DRAIN_RELEASE" in log.names()
    new = channel(h, 0xCAF000D4, scope=2)
    assert h.publish(new, "RING", new.ring_va, 0x2000) == 0
    assert h.hint(new, 1).done


def test_fixed_bounds_a_hold_that_blocks_a_live_client_in_time():
    h, clock, log, timers = host("fixed")
    gone = channel(h, 0x5C000006, ring=0x200410000, scope=1)
    h.publish(gone, "RING", gone.ring_va, 0x2000)
    h.unregister(gone)
    live = channel(h, 0x5C000016, ring=0x200410000 + (4 << 16), scope=2)  # same rank, registered after the hold
    assert rank_of(live.ring_va, 4) == gone.rank
    h.publish(live, "RING", live.ring_va, 0x2000)
    work = h.hint(live, 1)
    assert not work.done and any("drain-held" in why for why in h.blockers(work))
    due, fire = timers[0]
    clock.advance(due)
    fire()
    assert work.done and h.counters["faked"] == 1
    release = log.ops[log.names().index("DRAIN_RELEASE")][1]
    assert release["reason"] is DrainReason.TIMEOUT and release["held_ns"] == 20 * MS


def test_rearm_only_re_arms_but_keeps_the_stale_publication_and_the_hold():
    h, _clock, _log, _timers = host("rearm-only")
    tear_down_first_client(h)
    h.new_session(ResetReason.NEW_CLIENT)
    new = channel(h, 0xCAF000D4, scope=2)
    h.publish(new, "RING", new.ring_va, 0x2000)
    work = h.hint(new, 1)
    why = " ".join(h.blockers(work))
    assert not work.done and "spent" not in why and "stale" in why and "drain-held" in why


def test_the_models_records_are_sema_messages_the_decoders_read():
    out = []
    clock = VirtualClock(5)
    emit = SemaRecords(out.append, clock, lambda: 3)
    h = SemaHost(policy("fixed"), clock, emit, lambda t, fn: None)
    ch = channel(h, 0x5C000006)
    h.publish(ch, "RING", ch.ring_va, 0x2000)
    h.hint(ch, 1)
    h.unregister(ch)
    h.new_session(ResetReason.GSP_INIT)
    h.emit_counters()
    decoders = decoders_for({"driver_version": "580.142"})
    records = [r for data in out for r in iter_records(data)]
    assert all(r.source == Source.SEMA and r.time_ns == 5 for r in records)
    decoded = [decoders.decode(r) for r in records]
    assert all(d.known and not d.notes for d in decoded), [d.notes for d in decoded]
    names = [d.name for d in decoded]
    assert names[:4] == ["SEMA_REGISTER_CHANNEL", "SEMA_LATCH_ARM", "SEMA_PUBLISH_RING", "SEMA_COMPLETION_HINT"]
    reset = decoded[names.index("SEMA_SESSION_RESET")]
    assert reset.args["reason"] == 1 and reset.args["session"] == 3
    assert decoded[-1].args["faked"] == 1 and decoded[-1].args["pub_calls"] == 1


def test_the_compiled_adapter_builds_exactly_what_the_decoders_build():
    from rmtrace.decoders.sema import SEMA_KINDS, build_message
    from rmtrace.replayer.model.records import message_bytes
    for op, kind in SEMA_KINDS.items():
        body = {name: i + 1 for i, name in enumerate(sc.name for sc in kind.body.subcons) if name}
        if kind.struct == "rmt_sema_counters":
            body = {"reserved": 0, "value": [5, 6, 7]}
        assert message_bytes(op, body, 2, 9) == build_message(op, body, vgpu=2, session=9), kind.struct
