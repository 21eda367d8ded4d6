"""Constructed multi-client traces that reproduce the failure class of the-problem.md.

Built record by record with the decoders' own definitions (``Crafter`` for RM
and UVM calls, ``message_record`` for host sema-service messages), shaped like
a CUDA client: root client, device, subdevice, VA space, channel group, a copy
channel on CE rank 2, UVM registration of the GPU and the channel.

``sequential(wedge=True)`` is three clients in one boot: the first is green;
its teardown fires rank 2's one-shot latch and nothing re-arms it, so the
second client's registration exchange never completes (its completion hint on
the stale channel comes back rc=-22 and the counters freeze) while it holds
the guest UVM global lock, and the third waits at UVM_REGISTER_GPU.
``sequential(wedge=False)`` is the same boot with the fixed host: three greens.
"""

from __future__ import annotations

from pathlib import Path

from rmtrace.decoders.craft import Crafter
from rmtrace.decoders.profiles import load_profile
from rmtrace.decoders.sema import SemaOp, message_record

from rmtrace.record import MarkOp, Phase, Record, SysOp
from rmtrace.trace import TraceWriter

PROFILE = "580.142"
META = {"driver_version": "580.142", "backend": "synthetic", "host": "vm", "kernel": "6.1.0",
        "gpus": [{"name": "NVIDIA H200 (vGPU)"}], "command": ["victory_mail"]}
GPU_UUID = bytes(range(16))
RANK = 2
COPY2 = 0x0B  # NV2080_ENGINE_TYPE_COPY2


class Boot:
    """A guest boot: clients one after the other, with the host service's view."""

    def __init__(self, t0: int = 1_000_000_000) -> None:
        self.profile = load_profile(PROFILE)
        self.records: list[Record] = []
        self.t = t0
        self.counters = {"pub_calls": 2700, "gr_rel": 200, "faked": 0, "drain_held": 0}
        self.session = 0
        self.latch_gen = 0

    def host(self, op: SemaOp, pid: int, **body) -> None:
        self.t += 5_000
        body.setdefault("reserved", 0)
        self.records.append(message_record(op, body, session=self.session, time_ns=self.t, pid=pid, tid=pid))

    def counters_snapshot(self) -> None:
        values = [self.counters["pub_calls"], self.counters["gr_rel"], self.counters["faked"],
                  self.counters["drain_held"]]
        self.host(SemaOp.COUNTERS, 0, count=len(values), value=values)

    def complete(self, pid: int, chan: int, value: int) -> None:
        """The host completes work on ``chan``: the hint is answered, the rank's latch fires, a release."""
        self.host(SemaOp.COMPLETION_HINT, pid, channel=chan, rank=RANK, value=value, rc=0)
        self.host(SemaOp.LATCH_FIRE, 0, rank=RANK, channel=chan, generation=self.latch_gen, armed=0)
        self.counters["gr_rel"] += 1
        self.host(SemaOp.RELEASE, pid, channel=chan, rank=RANK, sema_va=0x7F0000400000, value=value,
                  counter=self.counters["gr_rel"], rc=0)

    def crafter(self, pid: int) -> Crafter:
        return Crafter(self.profile, pid=pid, t_ns=self.t)

    def add(self, c: Crafter, recs: list[Record]) -> list[Record]:
        self.records.extend(recs)
        self.t = max(self.t, c.t_ns)
        return recs

    def client(self, pid: int, index: int, *, host_ok: bool, in_flight_at_register: bool = False) -> None:
        """One CUDA process; ``host_ok`` False: the host's completion path is stale for it."""
        c = self.crafter(pid)
        h_client = 0xC1D00000 + index
        dev, sub, vas, tsg, chan = (0x5C000001, 0x5C000002, 0x5C000003, 0x5C000004, 0xCAF000D4)
        self.add(c, c.sys(SysOp.OPEN, fd=3, path="/dev/nvidiactl"))
        self.add(c, c.rm_alloc(0, 0, h_client, "NV01_ROOT_CLIENT", {"hClient": h_client}))
        self.add(c, c.rm_alloc(h_client, h_client, dev, "NV01_DEVICE_0", {"deviceId": 0}))
        self.add(c, c.rm_alloc(h_client, dev, sub, "NV20_SUBDEVICE_0"))
        self.add(c, c.rm_control(h_client, sub, "NV2080_CTRL_CMD_GPU_GET_INFO_V2"))
        self.add(c, c.rm_alloc(h_client, dev, vas, "FERMI_VASPACE_A"))
        self.add(c, c.rm_alloc(h_client, dev, tsg, "KEPLER_CHANNEL_GROUP_A", {"engineType": COPY2}))
        self.add(c, c.rm_alloc(h_client, tsg, chan, "HOPPER_CHANNEL_GPFIFO_A",
                               {"engineType": COPY2, "gpFifoOffset": 0x7F0000200000 + index * 0x10000,
                                "gpFifoEntries": 1024}))
        self.t = c.t_ns
        self.host(SemaOp.REGISTER_CHANNEL, pid, client=h_client, channel=chan, ring_va=0x7F0000200000 + index * 0x10000,
                  userd_va=0x7F0000300000, rank=RANK, rc=0)
        self.add(c, c.rm_control(h_client, chan, "NVC36F_CTRL_CMD_GPFIFO_GET_WORK_SUBMIT_TOKEN",
                                 after={"workSubmitToken": 0x20 + index}))
        self.add(c, c.rm_control(h_client, chan, "NVA06F_CTRL_CMD_BIND", {"engineType": COPY2}))
        self.add(c, c.rm_control(h_client, tsg, "NVA06C_CTRL_CMD_GPFIFO_SCHEDULE", {"bEnable": 1}))
        self.t = c.t_ns
        c.uvm_fd = 4
        self.add(c, c.sys(SysOp.OPEN, fd=4, path="/dev/nvidia-uvm"))
        self.add(c, c.uvm("UVM_INITIALIZE", {"flags": 0}))
        # UVM_REGISTER_GPU: the guest takes its UVM global lock and runs the registration
        # exchange with the host: publish the ring, hint the work, wait for the release.
        enter = c.uvm("UVM_REGISTER_GPU", {"gpu_uuid": {"uuid": GPU_UUID}, "rmCtrlFd": 3, "hClient": h_client},
                      in_flight=True)
        self.add(c, enter)
        self.t = c.t_ns
        if in_flight_at_register:  # waits for the global lock: the host never hears of it
            return
        self.counters["pub_calls"] += 1
        self.host(SemaOp.PUBLISH_RING, pid, channel=chan, rank=RANK, va=0x7F0000200000, size=8192,
                  pub_calls=self.counters["pub_calls"], rc=0)
        if not host_ok:
            self.host(SemaOp.COMPLETION_HINT, pid, channel=chan, rank=RANK, value=1, rc=-22)
            self.host(SemaOp.COMPLETION_HINT, pid, channel=chan, rank=RANK, value=1, rc=-22)
            self.counters_snapshot()
            return  # the exchange never completes: UVM_REGISTER_GPU stays in flight
        self.complete(pid, chan, 1)
        c.t_ns = self.t
        self.add(c, [c.finish(enter[0], c.uvm("UVM_REGISTER_GPU", {"gpu_uuid": {"uuid": GPU_UUID}, "rmCtrlFd": 3,
                                                                   "hClient": h_client}))])
        self.host(SemaOp.LATCH_ARM, 0, rank=RANK, channel=chan, generation=self.latch_gen + 1, armed=1)
        self.latch_gen += 1
        c.t_ns = self.t
        self.add(c, c.uvm("UVM_REGISTER_CHANNEL", {"gpuUuid": {"uuid": GPU_UUID}, "rmCtrlFd": 3, "hClient": h_client,
                                                   "hChannel": chan}))
        self.add(c, c.rm_control(h_client, sub, "NV2080_CTRL_CMD_GPU_GET_INFO_V2"))
        # teardown: unregister (the release of the last GPU user runs an exchange with the host)
        self.add(c, c.uvm("UVM_UNREGISTER_CHANNEL", {"gpuUuid": {"uuid": GPU_UUID}, "hClient": h_client, "hChannel": chan}))
        self.add(c, c.uvm("UVM_UNREGISTER_GPU", {"gpu_uuid": {"uuid": GPU_UUID}}))
        self.t = c.t_ns
        self.complete(pid, chan, 2)
        c.t_ns = self.t
        self.add(c, c.rm_free(h_client, h_client, h_client))
        self.add(c, c.sys(SysOp.EXIT, ret=0))
        self.t = c.t_ns
        self.host(SemaOp.UNREGISTER_CHANNEL, pid, client=h_client, channel=chan, ring_va=0, userd_va=0,
                  rank=RANK, rc=0)
        self.counters_snapshot()

    def fixed_reset(self, pid: int) -> None:
        """What the fixed host does when a new client appears: re-arm, clear, count."""
        self.session += 1
        self.host(SemaOp.SESSION_RESET, 0, old_session=self.session - 1, new_session=self.session, client=0,
                  reason=2, channels_dropped=1, latches_rearmed=1)
        self.host(SemaOp.LATCH_ARM, 0, rank=RANK, channel=0, generation=self.latch_gen + 1, armed=1)
        self.latch_gen += 1

    def write(self, path: Path) -> Path:
        self.records.sort(key=lambda r: r.time_ns)
        with TraceWriter(path, META) as w:
            for rec in self.records:
                w.write(rec)
            w.write(Record(6, Phase.EVENT, op=MarkOp.STOP, time_ns=self.t + 2_000_000_000, pid=0))
        return path


def sequential(path: Path, wedge: bool) -> Path:
    boot = Boot()
    boot.host(SemaOp.LATCH_ARM, 0, rank=RANK, channel=0, generation=0, armed=1)
    boot.client(1001, 1, host_ok=True)
    boot.t += 50_000_000
    if not wedge:
        boot.fixed_reset(1002)
    boot.client(1002, 2, host_ok=not wedge)
    boot.t += 50_000_000
    if not wedge:
        boot.fixed_reset(1003)
        boot.client(1003, 3, host_ok=True)
    else:
        boot.client(1003, 3, host_ok=False, in_flight_at_register=True)
    return boot.write(path)
