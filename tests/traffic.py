"""Realistic synthetic RM/UVM traffic, built with the profile's own layouts.

What a CUDA process's start looks like on an H200 (580 branch): open the
control node, check the API version, allocate a root client, ask for the
attached GPUs and build version, open the GPU node, allocate device and
subdevice, query GPU/FB/GR/bus/CE info, allocate a VA space, a TSG, a
context share, a GPFIFO channel, compute and copy objects, ask for the work
submit token, initialise UVM and register the GPU, map memory, then free it
all.  A few calls fail or use commands no public header defines, as real
traffic does.  Built with ``rmtrace.decoders.craft.Crafter``.  Used by the
tests (until real captures are committed) and by bench/decode.py.
"""

from __future__ import annotations

from collections.abc import Iterator

from rmtrace.decoders.craft import Crafter
from rmtrace.decoders.profiles.model import DriverProfile

from rmtrace.record import MarkOp, Phase, Record, Source, SysOp

UNDEFINED_CONTROLS = (0x20800145, 0x20810102, 0x2080A0F0)
"""Control commands no public header defines (one in a known category, one NV2081_BINAPI, one unknown category)."""


def cuda_session(profile: DriverProfile, pid: int = 1447, t0: int = 1_000_000, wedge: bool = False) -> list[Record]:
    """One CUDA-like process from open to exit (``wedge``: stuck in UVM_REGISTER_GPU, as in the-problem.md)."""
    c = Crafter(profile, pid=pid, t_ns=t0, ctl_fd=3, uvm_fd=5)
    recs = c.sys(SysOp.OPEN, fd=3, ret=3, path="/dev/nvidiactl")
    recs += c.escape("NV_ESC_CHECK_VERSION_STR", {"cmd": 0x32, "versionString": b"580.142".ljust(64, b"\0")})
    recs += c.escape("NV_ESC_SYS_PARAMS", {"memblock_size": 1 << 27})
    client = 0xC1D00000 + pid
    recs += c.rm_alloc(0, 0, 0, "NV01_ROOT_CLIENT", {"processID": pid, "processName": b"victory_mail".ljust(100, b"\0")},
                       new_handle=client, duration_ns=240_000)
    recs += c.rm_control(client, client, "NV0000_CTRL_CMD_GPU_GET_ATTACHED_IDS", {"gpuIds": [0x100] + [0xFFFFFFFF] * 31})
    recs += c.rm_control(client, client, "NV0000_CTRL_CMD_GPU_GET_ID_INFO_V2", {"gpuId": 0x100})
    recs += c.rm_control(client, client, "NV0000_CTRL_CMD_SYSTEM_GET_BUILD_VERSION_V2",
                         after={"driverVersionBuffer": b"580.142".ljust(256, b"\0")})
    recs += c.rm_control(client, client, "NV0000_CTRL_CMD_CLIENT_GET_ADDR_SPACE_TYPE")
    recs += c.sys(SysOp.OPEN, fd=4, ret=4, path="/dev/nvidia0")
    recs += c.escape("NV_ESC_REGISTER_FD", {"ctl_fd": 3}, fd=4)
    device, subdevice = 0xCAF00001, 0xCAF00002
    recs += c.rm_alloc(client, client, device, "NV01_DEVICE_0", {"deviceId": 0, "hClientShare": client},
                       duration_ns=240_000)
    recs += c.rm_alloc(client, device, subdevice, "NV20_SUBDEVICE_0", duration_ns=240_000)
    recs += c.rm_control(client, device, "NV0080_CTRL_CMD_GPU_GET_CLASSLIST_V2",
                         after={"numClasses": 3, "classList": [0xC86F, 0xCBC0, 0xC8B5]})
    recs += c.rm_control(client, subdevice, "NV2080_CTRL_CMD_GPU_GET_INFO_V2",
                         {"gpuInfoListSize": 2, "gpuInfoList": [{"index": 1}, {"index": 2}]},
                         after={"gpuInfoList": [{"index": 1, "data": 0x100}, {"index": 2, "data": 0x20}]})
    recs += c.rm_control(client, subdevice, "NV2080_CTRL_CMD_GPU_GET_GID_INFO", {"flags": 2})
    recs += c.rm_control(client, subdevice, "NV2080_CTRL_CMD_FB_GET_INFO_V2")
    recs += c.rm_control(client, subdevice, "NV2080_CTRL_CMD_GR_GET_INFO", {"grInfoListSize": 2, "grInfoList": 0x7FFE1000},
                         nested=(bytes(16),))
    recs += c.rm_control(client, subdevice, "NV2080_CTRL_CMD_BUS_GET_PCI_INFO", after={"pciDeviceId": 0x233010DE})
    recs += c.rm_control(client, subdevice, "NV2080_CTRL_CMD_CE_GET_CAPS_V2")
    recs += c.rm_control(client, subdevice, "NV2080_CTRL_CMD_GPU_GET_ENGINES_V2")
    for cmd in UNDEFINED_CONTROLS:
        recs += c.rm_control(client, subdevice, cmd, raw_size=24)
    recs += c.rm_control(client, subdevice, "NV2080_CTRL_CMD_PERF_BOOST", status=0x56)  # NV_ERR_NOT_SUPPORTED
    vaspace, tsg, channel = 0xCAF00010, 0xCAF00020, 0xCAF000D4
    recs += c.rm_alloc(client, device, vaspace, "FERMI_VASPACE_A", {"flags": 0x8}, duration_ns=240_000)
    recs += c.rm_alloc(client, device, tsg, "KEPLER_CHANNEL_GROUP_A", {"hVASpace": vaspace, "engineType": 1},
                       duration_ns=240_000)
    recs += c.rm_alloc(client, tsg, 0xCAF00030, "FERMI_CONTEXT_SHARE_A", {"hVASpace": vaspace}, duration_ns=240_000)
    recs += c.rm_alloc(client, tsg, channel, "HOPPER_CHANNEL_GPFIFO_A",
                       {"gpFifoOffset": 0x7F0000000000, "gpFifoEntries": 1024, "engineType": 1, "ProcessID": pid},
                       duration_ns=240_000)
    recs += c.rm_alloc(client, channel, 0xCAF000E0, "HOPPER_COMPUTE_A", duration_ns=240_000)
    recs += c.rm_alloc(client, channel, 0xCAF000E1, "HOPPER_DMA_COPY_A", {"version": 1, "engineType": 0x10},
                       duration_ns=240_000)
    recs += c.rm_control(client, channel, "NVC36F_CTRL_CMD_GPFIFO_GET_WORK_SUBMIT_TOKEN",
                         after={"workSubmitToken": 0x17})
    recs += c.rm_control(client, tsg, "NVA06C_CTRL_CMD_GPFIFO_SCHEDULE", {"bEnable": 1})
    recs += c.sys(SysOp.OPEN, fd=5, ret=5, path="/dev/nvidia-uvm")
    recs += c.uvm("UVM_INITIALIZE")
    recs += c.uvm("UVM_PAGEABLE_MEM_ACCESS")
    uuid = {"uuid": bytes(range(0xA0, 0xB0))}
    register = {"gpu_uuid": uuid, "rmCtrlFd": 3, "hClient": client}
    if wedge:
        recs += c.uvm("UVM_REGISTER_GPU", register, in_flight=True)
        recs.append(Record(Source.MARK, Phase.EVENT, op=MarkOp.IN_FLIGHT, time_ns=c.t_ns + 10**9, pid=pid, tid=pid,
                           call_id=recs[-1].call_id))
        return recs
    recs += c.uvm("UVM_REGISTER_GPU", register)
    recs += c.uvm("UVM_REGISTER_GPU_VASPACE", {"gpuUuid": uuid, "rmCtrlFd": 3, "hClient": client, "hVaSpace": vaspace})
    recs += c.uvm("UVM_REGISTER_CHANNEL", {"gpuUuid": uuid, "rmCtrlFd": 3, "hClient": client, "hChannel": channel})
    recs += c.uvm("UVM_CREATE_RANGE_GROUP")
    memory = 0xCAF00100
    recs += c.rm_alloc(client, device, memory, "NV01_MEMORY_LOCAL_USER", {"size": 1 << 21}, duration_ns=240_000)
    recs += c.escape("NV_ESC_RM_MAP_MEMORY", {"params": {"hClient": client, "hDevice": device, "hMemory": memory,
                                                         "length": 1 << 21}, "fd": 4})
    for parent, handle in ((device, memory), (channel, 0xCAF000E1), (channel, 0xCAF000E0), (tsg, channel),
                           (device, tsg), (device, vaspace), (device, subdevice), (client, device), (0, client)):
        recs += c.rm_free(client, parent, handle)
    recs += c.uvm("UVM_UNREGISTER_GPU", {"gpu_uuid": uuid})
    for fd in (5, 4, 3):
        recs += c.sys(SysOp.CLOSE, fd=fd)
    recs += c.sys(SysOp.EXIT, ret=0)
    return recs


def sessions(profile: DriverProfile, count: int, t0: int = 1_000_000) -> Iterator[Record]:
    """``count`` sequential clients (pids 2000, 2001, ...), each starting after the last ended."""
    t = t0
    for i in range(count):
        recs = cuda_session(profile, pid=2000 + i, t0=t)
        yield from recs
        t = recs[-1].time_ns + 1_000_000
