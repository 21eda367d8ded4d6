"""CUDA-shaped RM/UVM traffic for replayer tests, built with the decoders' own definitions.

One ``cuda_client`` is what a CUDA driver-API program does to the driver,
call for call in the order libcuda makes them: the root client and the GPU
queries, the device and subdevice, UVM initialisation and GPU registration,
a VA space, a channel group with a compute channel and a copy channel (each
with its engine object, work-submit token and UVM channel registration),
then the teardown and the process exit.  Every argument and params struct is
built from the 580.142 profile's layouts with the construct definitions the
decoders parse with, so the bytes are what a real capture holds (handles and
addresses are invented).  Used until the committed real captures land.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from rmtrace.decoders import decoders_for
from rmtrace.decoders.context import context

from rmtrace.record import Buffer, Phase, Record, Role, Source, SysOp, When
from rmtrace.trace import TraceWriter

DRIVER = "580.142"
GPU_UUID = bytes.fromhex("5e1f0a2b3c4d5e6f708192a3b4c5d6e7")
COMPUTE_RING = 0x200410000
COPY_RING = 0x200430000
RING_ENTRIES = 1024

_DECODERS = decoders_for({"driver_version": DRIVER})
PROFILE = _DECODERS.profile
DEFS = context(PROFILE).defs


def build(layout: str, **values: Any) -> bytes:
    """A struct of ``layout`` with these members set and everything else zero."""
    value = DEFS.struct(layout, flex=False).parse(bytes(DEFS.layout(layout).size))
    for key, v in values.items():
        if isinstance(v, dict):
            value[key].update(v)
        else:
            value[key] = v
    return DEFS.struct(layout, flex=False).build(value)


def nr(table: str, name: str) -> int:
    number = PROFILE.lookup(table, name)
    assert number is not None, name
    return number


@dataclass
class Process:
    """Writes one process's calls as ENTER/EXIT record pairs."""

    pid: int
    t: int
    records: list[Record] = field(default_factory=list)
    call_id: int = 0

    def _call(self, source: int, op: int, fd: int, before: list[Buffer], after: list[Buffer],
              dur: int = 20_000, ret: int = 0) -> None:
        self.call_id += 1
        self.t += 5_000
        self.records.append(Record(source, Phase.ENTER, op=op, time_ns=self.t, pid=self.pid, tid=self.pid,
                                   call_id=self.call_id, fd=fd, buffers=tuple(before)))
        self.t += dur
        self.records.append(Record(source, Phase.EXIT, op=op, time_ns=self.t, pid=self.pid, tid=self.pid,
                                   call_id=self.call_id, fd=fd, ret=ret, buffers=tuple(after)))

    def sys(self, op: int, fd: int = -1, path: str | None = None, ret: int = 0, argv: tuple[str, ...] = ()) -> None:
        self.t += 3_000
        bufs = (Buffer(Role.PATH, When.ONCE, path.encode() + b"\0"),) if path else ()
        if argv:
            bufs += (Buffer(Role.TEXT, When.ONCE, b"\0".join(a.encode() for a in argv) + b"\0"),)
        self.records.append(Record(Source.SYS, Phase.EVENT, op=op, time_ns=self.t, pid=self.pid, tid=self.pid,
                                   fd=fd, ret=ret, buffers=bufs))

    def alloc(self, fd: int, h_client: int, h_parent: int, h_object: int, cls: str, status: int = 0,
              assigned: int | None = None, **params: Any) -> None:
        info = PROFILE.classes[nr("classes", cls)]
        ap = build(info.alloc_params, **params) if info.alloc_params else b""
        args = dict(hRoot=h_client, hObjectParent=h_parent, hObjectNew=h_object, hClass=info.id,
                    pAllocParms=0x7FFD0000 + self.call_id * 0x1000 if ap else 0, paramsSize=len(ap))
        before = [Buffer(Role.ARG, When.BEFORE, build("NVOS21_PARAMETERS", **args))]
        if ap:
            before.append(Buffer(Role.ALLOC_PARAMS, When.BEFORE, ap, addr=args["pAllocParms"]))
        if assigned is not None:
            args.update(hRoot=assigned, hObjectNew=assigned)
        after = [Buffer(Role.ARG, When.AFTER, build("NVOS21_PARAMETERS", status=status, **args))]
        self._call(Source.RM, nr("escapes", "NV_ESC_RM_ALLOC"), fd, before, after)

    def free(self, fd: int, h_client: int, h_parent: int, h_object: int, status: int = 0) -> None:
        args = dict(hRoot=h_client, hObjectParent=h_parent, hObjectOld=h_object)
        self._call(Source.RM, nr("escapes", "NV_ESC_RM_FREE"), fd,
                   [Buffer(Role.ARG, When.BEFORE, build("NVOS00_PARAMETERS", **args))],
                   [Buffer(Role.ARG, When.AFTER, build("NVOS00_PARAMETERS", status=status, **args))])

    def control(self, fd: int, h_client: int, h_object: int, name: str, out: dict | None = None,
                status: int = 0, **params: Any) -> None:
        ctrl = PROFILE.controls[nr("controls", name)]
        p_in = build(ctrl.params, **params)
        p_out = build(ctrl.params, **{**params, **(out or {})})
        args = dict(hClient=h_client, hObject=h_object, cmd=ctrl.cmd, params=0x7FFE0000, paramsSize=len(p_in))
        self._call(Source.RM, nr("escapes", "NV_ESC_RM_CONTROL"), fd,
                   [Buffer(Role.ARG, When.BEFORE, build("NVOS54_PARAMETERS", **args)),
                    Buffer(Role.PARAMS, When.BEFORE, p_in, addr=0x7FFE0000)],
                   [Buffer(Role.ARG, When.AFTER, build("NVOS54_PARAMETERS", status=status, **args)),
                    Buffer(Role.PARAMS, When.AFTER, p_out, addr=0x7FFE0000)])

    def uvm(self, fd: int, name: str, status: int = 0, dur: int = 20_000, **params: Any) -> None:
        cmd = PROFILE.uvm[nr("uvm", name)]
        self._call(Source.UVM, cmd.nr, fd, [Buffer(Role.ARG, When.BEFORE, build(cmd.params, **params))],
                   [Buffer(Role.ARG, When.AFTER, build(cmd.params, rmStatus=status, **params))], dur=dur)


def cuda_client(pid: int, t0: int = 1_000_000_000, h_client: int = 0xC1D00001, *, explicit_teardown: bool = True,
                compute_ring: int = COMPUTE_RING, copy_ring: int = COPY_RING, token_base: int = 0x10,
                program: str = "/opt/victory_mail") -> Process:
    """One CUDA driver-API process from exec to exit (see the module docstring)."""
    p = Process(pid, t0)
    p.sys(SysOp.EXEC, path=program, argv=(program,))
    hc, dev, sub, vas, tsg, ctx = h_client, 0x5C000001, 0x5C000002, 0x5C000003, 0x5C000004, 0x5C000005
    compute_ch, compute_obj, copy_ch, copy_obj = 0x5C000006, 0x5C000007, 0x5C000008, 0x5C000009
    uuid = {"uuid": GPU_UUID}
    p.sys(SysOp.OPEN, fd=3, path="/dev/nvidiactl", ret=3)
    p.alloc(3, 0, 0, 0, "NV01_ROOT_CLIENT", assigned=hc, processID=pid)
    p.control(3, hc, hc, "NV0000_CTRL_CMD_GPU_GET_ATTACHED_IDS")
    p.control(3, hc, hc, "NV0000_CTRL_CMD_GPU_GET_ID_INFO_V2", gpuId=0x100)
    p.sys(SysOp.OPEN, fd=4, path="/dev/nvidia0", ret=4)
    p.alloc(3, hc, hc, dev, "NV01_DEVICE_0")
    p.alloc(3, hc, dev, sub, "NV20_SUBDEVICE_0")
    p.control(3, hc, sub, "NV2080_CTRL_CMD_GPU_GET_INFO_V2", gpuInfoListSize=3)
    p.control(3, hc, dev, "NV0080_CTRL_CMD_GPU_GET_CLASSLIST", numClasses=0)
    p.sys(SysOp.OPEN, fd=5, path="/dev/nvidia-uvm", ret=5)
    p.uvm(5, "UVM_INITIALIZE")
    p.uvm(5, "UVM_PAGEABLE_MEM_ACCESS")
    p.uvm(5, "UVM_REGISTER_GPU", dur=2_000_000, gpu_uuid=uuid, rmCtrlFd=3, hClient=hc, hSmcPartRef=sub)
    p.alloc(3, hc, dev, vas, "FERMI_VASPACE_A")
    p.uvm(5, "UVM_REGISTER_GPU_VASPACE", gpuUuid=uuid, rmCtrlFd=3, hClient=hc, hVaSpace=vas)
    p.alloc(3, hc, dev, tsg, "KEPLER_CHANNEL_GROUP_A")
    p.alloc(3, hc, tsg, ctx, "FERMI_CONTEXT_SHARE_A", hVASpace=vas)
    tokens = {}
    for n, (ch, obj, ring, cls) in enumerate(((compute_ch, compute_obj, compute_ring, "HOPPER_COMPUTE_A"),
                                              (copy_ch, copy_obj, copy_ring, "HOPPER_DMA_COPY_A"))):
        p.alloc(3, hc, tsg, ch, "HOPPER_CHANNEL_GPFIFO_A", gpFifoOffset=ring, gpFifoEntries=RING_ENTRIES,
                hContextShare=ctx, hVASpace=vas)
        p.alloc(3, hc, ch, obj, cls)
        tokens[ch] = token_base + n
        p.control(3, hc, ch, "NVC36F_CTRL_CMD_GPFIFO_GET_WORK_SUBMIT_TOKEN", out={"workSubmitToken": tokens[ch]})
    p.control(3, hc, tsg, "NVA06C_CTRL_CMD_GPFIFO_SCHEDULE", bEnable=1)
    for ch, ring in ((compute_ch, compute_ring), (copy_ch, copy_ring)):
        p.uvm(5, "UVM_REGISTER_CHANNEL", gpuUuid=uuid, rmCtrlFd=3, hClient=hc, hChannel=ch, base=ring,
              length=RING_ENTRIES * 8)
    for _ in range(4):
        p.control(3, hc, sub, "NV2080_CTRL_CMD_GPU_GET_INFO_V2", gpuInfoListSize=1)
    if explicit_teardown:
        for ch in (compute_ch, copy_ch):
            p.uvm(5, "UVM_UNREGISTER_CHANNEL", gpuUuid=uuid, hClient=hc, hChannel=ch)
        p.free(3, hc, dev, tsg)
        p.uvm(5, "UVM_UNREGISTER_GPU_VASPACE", gpuUuid=uuid)
        p.free(3, hc, dev, vas)
        p.uvm(5, "UVM_UNREGISTER_GPU", dur=1_000_000, gpu_uuid=uuid)
        p.free(3, hc, hc, hc)
    for fd in (5, 4, 3):
        p.sys(SysOp.CLOSE, fd=fd)
    p.sys(SysOp.EXIT, ret=0)
    return p


def write_trace(path: str, processes: list[Process], **meta: Any) -> str:
    """The processes' records merged by time into a trace."""
    records = sorted((r for p in processes for r in p.records), key=lambda r: r.time_ns)
    with TraceWriter(path, {"driver_version": DRIVER, "backend": "synthetic", **meta}) as writer:
        for rec in records:
            writer.write(rec)
    return path


def sequential_clients(n: int, gap: int = 50_000_000) -> Iterator[Process]:
    """``n`` copies of the CUDA client, one after another (the seed's sequential runs)."""
    t = 1_000_000_000
    for i in range(n):
        proc = cuda_client(1000 + i, t, 0xC1D00001 + i)
        yield proc
        t = proc.t + gap
