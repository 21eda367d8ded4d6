"""Realistic synthetic RM/UVM traffic, built with the profile's own layouts.

What a CUDA process's start looks like on an H200 (580 branch): open the
control node, check the API version, allocate a root client, ask for the
attached GPUs and build version, open the GPU node, allocate device and
subdevice, query GPU/FB/GR/bus/CE info, allocate a VA space, a TSG, a
context share, a GPFIFO channel, compute and copy objects, ask for the work
submit token, initialise UVM and register the GPU, map memory, then free it
all.  A few calls fail or use commands no public header defines, as real
traffic does.  Used by the tests (until real captures are committed) and by
bench/decode.py.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Iterator

from rmtrace.decoders.context import context
from rmtrace.record import Buffer, MarkOp, Phase, Record, Role, Source, SysOp, When

UNDEFINED_CONTROLS = (0x20800145, 0x20810102, 0x2080A0F0)
"""Control commands no public header defines (one in a known category, one NV2081_BINAPI, one unknown category)."""


@dataclass
class Session:
    """Builds one process's records; every call is an ENTER and an EXIT record."""

    profile: Any
    pid: int = 1447
    t: int = 1_000_000
    call_id: int = 0
    records: list[Record] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.defs = context(self.profile).defs
        self.lookup = self.profile.lookup

    def _ioctl(self, source: int, op: int, fd: int, before: tuple[Buffer, ...], after: tuple[Buffer, ...],
               ret: int = 0, err: int = 0, micros: int = 20, finish: bool = True) -> None:
        self.call_id += 1
        self.records.append(Record(source, Phase.ENTER, op=op, time_ns=self.t, pid=self.pid, tid=self.pid,
                                   call_id=self.call_id, fd=fd, buffers=before))
        self.t += micros * 1000
        if finish:
            self.records.append(Record(source, Phase.EXIT, op=op, time_ns=self.t, pid=self.pid, tid=self.pid,
                                       call_id=self.call_id, fd=fd, ret=ret, err=err, buffers=after))
        self.t += 3000

    def sys(self, op: int, fd: int = -1, ret: int = 0, buffers: tuple[Buffer, ...] = ()) -> None:
        self.records.append(Record(Source.SYS, Phase.EVENT, op=op, time_ns=self.t, pid=self.pid, tid=self.pid,
                                   fd=fd, ret=ret, buffers=buffers))
        self.t += 2000

    def escape(self, name: str, fd: int, values: dict, after: dict | None = None, **kw: Any) -> None:
        esc = self.profile.escapes[self.lookup("escapes", name)]
        b = self.defs.build_values(esc.struct, values)
        a = self.defs.build_values(esc.struct, {**values, **(after or {})})
        self._ioctl(Source.RM, esc.nr, fd, (Buffer(Role.ARG, When.BEFORE, b),), (Buffer(Role.ARG, When.AFTER, a),), **kw)

    def alloc(self, h_client: int, h_parent: int, h_new: int, class_name: str, values: dict | None = None,
              status: int = 0, fd: int = 3) -> int:
        klass = self.lookup("classes", class_name)
        layout = self.profile.classes[klass].alloc_params
        params = self.defs.build_values(layout, values or {}) if layout else b""
        arg = {"hRoot": h_client, "hObjectParent": h_parent, "hObjectNew": h_new, "hClass": klass,
               "pAllocParms": 0x7FFD0000, "paramsSize": len(params)}
        new = h_new or 0xC1D00000 + self.call_id + 1
        b = self.defs.build_values("NVOS21_PARAMETERS", arg)
        a = self.defs.build_values("NVOS21_PARAMETERS", {**arg, "hObjectNew": new, "status": status})
        nr = self.lookup("escapes", "NV_ESC_RM_ALLOC")
        self._ioctl(Source.RM, nr, fd, (Buffer(Role.ARG, When.BEFORE, b), Buffer(Role.ALLOC_PARAMS, When.BEFORE, params)),
                    (Buffer(Role.ARG, When.AFTER, a), Buffer(Role.ALLOC_PARAMS, When.AFTER, params)), micros=240)
        return new

    def control(self, h_client: int, h_object: int, cmd: int | str, values: dict | None = None, status: int = 0,
                size: int = 16, nested: tuple[bytes, ...] = (), fd: int = 3) -> None:
        cmd = self.lookup("controls", cmd) if isinstance(cmd, str) else cmd
        control = self.profile.controls.get(cmd)
        params = (self.defs.build_values(control.params, values or {}) if control and control.params
                  else bytes(size))
        arg = {"hClient": h_client, "hObject": h_object, "cmd": cmd, "params": 0x7FFE0000, "paramsSize": len(params)}
        b = self.defs.build_values("NVOS54_PARAMETERS", arg)
        a = self.defs.build_values("NVOS54_PARAMETERS", {**arg, "status": status})
        before = (Buffer(Role.ARG, When.BEFORE, b), Buffer(Role.PARAMS, When.BEFORE, params))
        after = (Buffer(Role.ARG, When.AFTER, a), Buffer(Role.PARAMS, When.AFTER, params))
        after += tuple(Buffer(Role.NESTED, When.AFTER, data, slot=i) for i, data in enumerate(nested))
        self._ioctl(Source.RM, self.lookup("escapes", "NV_ESC_RM_CONTROL"), fd, before, after)

    def free(self, h_client: int, h_parent: int, h_object: int) -> None:
        self.escape("NV_ESC_RM_FREE", 3, {"hRoot": h_client, "hObjectParent": h_parent, "hObjectOld": h_object})

    def uvm(self, name: str, values: dict | None = None, status: int = 0, finish: bool = True) -> None:
        nr = self.lookup("uvm", name)
        layout = self.profile.uvm[nr].params
        b = self.defs.build_values(layout, values or {})
        a = self.defs.build_values(layout, {**(values or {}), "rmStatus": status})
        self._ioctl(Source.UVM, nr, 5, (Buffer(Role.ARG, When.BEFORE, b),), (Buffer(Role.ARG, When.AFTER, a),),
                    finish=finish)


def cuda_session(profile: Any, pid: int = 1447, t0: int = 1_000_000, wedge: bool = False) -> list[Record]:
    """One CUDA-like process from open to exit (``wedge``: stuck in UVM_REGISTER_GPU, as in the-problem.md)."""
    s = Session(profile, pid=pid, t=t0)
    path = Buffer(Role.PATH, When.ONCE, b"/dev/nvidiactl")
    s.sys(SysOp.OPEN, fd=3, ret=3, buffers=(path,))
    s.escape("NV_ESC_CHECK_VERSION_STR", 3, {"cmd": 0x32, "versionString": b"580.142".ljust(64, b"\0")})
    s.escape("NV_ESC_SYS_PARAMS", 3, {"memblock_size": 1 << 27})
    client = s.alloc(0, 0, 0, "NV01_ROOT_CLIENT", {"processID": pid, "processName": b"victory_mail".ljust(100, b"\0")})
    s.control(client, client, "NV0000_CTRL_CMD_GPU_GET_ATTACHED_IDS", {"gpuIds": [0x100] + [0xFFFFFFFF] * 31})
    s.control(client, client, "NV0000_CTRL_CMD_GPU_GET_ID_INFO_V2", {"gpuId": 0x100})
    s.control(client, client, "NV0000_CTRL_CMD_SYSTEM_GET_BUILD_VERSION_V2",
              {"driverVersionBuffer": b"580.142".ljust(256, b"\0")})
    s.control(client, client, "NV0000_CTRL_CMD_CLIENT_GET_ADDR_SPACE_TYPE")
    s.sys(SysOp.OPEN, fd=4, ret=4, buffers=(Buffer(Role.PATH, When.ONCE, b"/dev/nvidia0"),))
    s.escape("NV_ESC_REGISTER_FD", 4, {"ctl_fd": 3})
    device = s.alloc(client, client, 0xCAF00001, "NV01_DEVICE_0", {"deviceId": 0, "hClientShare": client})
    subdevice = s.alloc(client, device, 0xCAF00002, "NV20_SUBDEVICE_0")
    s.control(client, device, "NV0080_CTRL_CMD_GPU_GET_CLASSLIST_V2", {"numClasses": 3, "classList": [0xC86F, 0xCBC0, 0xC8B5]})
    s.control(client, subdevice, "NV2080_CTRL_CMD_GPU_GET_INFO_V2",
              {"gpuInfoListSize": 2, "gpuInfoList": [{"index": 1, "data": 0x100}, {"index": 2, "data": 0x20}] + [{"index": 0, "data": 0}] * 68})
    s.control(client, subdevice, "NV2080_CTRL_CMD_GPU_GET_GID_INFO", {"flags": 2})
    s.control(client, subdevice, "NV2080_CTRL_CMD_FB_GET_INFO_V2")
    s.control(client, subdevice, "NV2080_CTRL_CMD_GR_GET_INFO", {"grInfoListSize": 2, "grInfoList": 0x7FFE1000},
              nested=(bytes(16),))
    s.control(client, subdevice, "NV2080_CTRL_CMD_BUS_GET_PCI_INFO", {"pciDeviceId": 0x233010DE})
    s.control(client, subdevice, "NV2080_CTRL_CMD_CE_GET_CAPS_V2")
    s.control(client, subdevice, "NV2080_CTRL_CMD_GPU_GET_ENGINES_V2")
    for cmd in UNDEFINED_CONTROLS:
        s.control(client, subdevice, cmd, size=24)
    s.control(client, subdevice, "NV2080_CTRL_CMD_PERF_BOOST", status=0x56)  # NV_ERR_NOT_SUPPORTED
    vaspace = s.alloc(client, device, 0xCAF00010, "FERMI_VASPACE_A", {"flags": 0x8})
    tsg = s.alloc(client, device, 0xCAF00020, "KEPLER_CHANNEL_GROUP_A", {"hVASpace": vaspace, "engineType": 1})
    s.alloc(client, tsg, 0xCAF00030, "FERMI_CONTEXT_SHARE_A", {"hVASpace": vaspace})
    channel = s.alloc(client, tsg, 0xCAF000D4, "HOPPER_CHANNEL_GPFIFO_A",
                      {"gpFifoOffset": 0x7F0000000000, "gpFifoEntries": 1024, "engineType": 1, "ProcessID": pid})
    s.alloc(client, channel, 0xCAF000E0, "HOPPER_COMPUTE_A")
    s.alloc(client, channel, 0xCAF000E1, "HOPPER_DMA_COPY_A", {"version": 1, "engineType": 0x10})
    s.control(client, channel, "NVC36F_CTRL_CMD_GPFIFO_GET_WORK_SUBMIT_TOKEN", {"workSubmitToken": 0x17})
    s.control(client, tsg, "NVA06C_CTRL_CMD_GPFIFO_SCHEDULE", {"bEnable": 1})
    s.sys(SysOp.OPEN, fd=5, ret=5, buffers=(Buffer(Role.PATH, When.ONCE, b"/dev/nvidia-uvm"),))
    s.uvm("UVM_INITIALIZE")
    s.uvm("UVM_PAGEABLE_MEM_ACCESS")
    uuid = {"uuid": bytes(range(0xA0, 0xB0))}
    if wedge:
        s.uvm("UVM_REGISTER_GPU", {"gpu_uuid": uuid, "rmCtrlFd": 3, "hClient": client}, finish=False)
        s.records.append(Record(Source.MARK, Phase.EVENT, op=MarkOp.IN_FLIGHT, time_ns=s.t + 10**9, pid=pid,
                                tid=pid, call_id=s.call_id))
        return s.records
    s.uvm("UVM_REGISTER_GPU", {"gpu_uuid": uuid, "rmCtrlFd": 3, "hClient": client})
    s.uvm("UVM_REGISTER_GPU_VASPACE", {"gpuUuid": uuid, "rmCtrlFd": 3, "hClient": client, "hVaSpace": vaspace})
    s.uvm("UVM_REGISTER_CHANNEL", {"gpuUuid": uuid, "rmCtrlFd": 3, "hClient": client, "hChannel": channel})
    s.uvm("UVM_CREATE_RANGE_GROUP")
    memory = s.alloc(client, device, 0xCAF00100, "NV01_MEMORY_LOCAL_USER", {"size": 1 << 21, "type": 0})
    s.escape("NV_ESC_RM_MAP_MEMORY", 3, {"params": {"hClient": client, "hDevice": device, "hMemory": memory,
                                                    "length": 1 << 21}, "fd": 4})
    for parent, handle in ((device, memory), (channel, 0xCAF000E1), (channel, 0xCAF000E0), (tsg, channel),
                           (device, tsg), (device, vaspace), (device, subdevice), (client, device), (0, client)):
        s.free(client, parent, handle)
    s.uvm("UVM_UNREGISTER_GPU", {"gpu_uuid": uuid})
    s.sys(SysOp.CLOSE, fd=5)
    s.sys(SysOp.CLOSE, fd=4)
    s.sys(SysOp.CLOSE, fd=3)
    s.sys(SysOp.EXIT, ret=0)
    return s.records


def sessions(profile: Any, count: int, t0: int = 1_000_000) -> Iterator[Record]:
    """``count`` sequential clients (pids 2000, 2001, ...), each starting after the last ended."""
    t = t0
    for i in range(count):
        recs = cuda_session(profile, pid=2000 + i, t0=t)
        yield from recs
        t = recs[-1].time_ns + 1_000_000
