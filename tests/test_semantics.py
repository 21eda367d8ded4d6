"""rmtrace.semantics: calls of a CUDA-shaped client and of the host service, turned into typed events."""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest
from rmtrace.decoders import DecoderSet, decoders_for
from rmtrace.decoders.context import context
from rmtrace.decoders.craft import Crafter
from rmtrace.decoders.profiles import load_profile
from rmtrace.decoders.profiles.model import ClassInfo, Control

from rmtrace import captures
from rmtrace import semantics as sem
from rmtrace.calls import Call, CallState
from rmtrace.record import Buffer, Phase, Record, Role, Source, When
from rmtrace.trace import TraceReader
from tests.cuda_traffic import COMPUTE_RING, GPU_UUID, cuda_client, write_trace
from tests.scenarios import sequential


def meanings(path):
    reader = TraceReader(path)
    decoders = decoders_for(reader)
    interpreter = sem.Interpreter(decoders)
    return [interpreter.interpret(call) for call in decoders.calls(reader.records())]


@pytest.fixture(scope="module")
def cuda(tmp_path_factory):
    return meanings(write_trace(str(tmp_path_factory.mktemp("sem") / "cuda.trace"), [cuda_client(1447)]))


@pytest.fixture(scope="module")
def wedged(tmp_path_factory):
    return meanings(sequential(tmp_path_factory.mktemp("sem") / "wedged.trace", wedge=True))


def named(ms, full_name):
    return [m for m in ms if m.decoded.full_name == full_name]


def kinds(m):
    return [type(e).__name__ for e in m.events]


def test_objects_channels_and_what_each_call_defines_and_uses(cuda):
    opened = named(cuda, "SYS_OPEN")[0]
    assert opened.events == (sem.FdOpened(3, "/dev/nvidiactl", sem.Device.CONTROL),)
    assert opened.defines == (sem.Ref(sem.RefKind.FD, 3),)
    (root,) = named(cuda, "RM_ALLOC(NV01_ROOT_CLIENT)")
    assert root.events == (sem.ObjectAllocated(sem.Category.ROOT, 0xC1D00001, 0xC1D00001, None, 0x41),)
    assert root.defines == (sem.Ref(sem.RefKind.HANDLE, 0xC1D00001, 0xC1D00001),)
    (device,) = named(cuda, "RM_ALLOC(NV01_DEVICE_0)")
    assert device.events == (sem.ObjectAllocated(sem.Category.DEVICE, 0xC1D00001, 0x5C000001, 0xC1D00001, 0x80),)
    assert device.uses == (sem.Ref(sem.RefKind.HANDLE, 0xC1D00001, 0xC1D00001), sem.Ref(sem.RefKind.FD, 3))
    compute, _copy = named(cuda, "RM_ALLOC(HOPPER_CHANNEL_GPFIFO_A)")
    assert compute.events[0].category is sem.Category.CHANNEL
    assert compute.events[1] == sem.ChannelAllocated(0xC1D00001, 0x5C000006, 0x5C000004, 0, COMPUTE_RING, 1024, 0)
    assert kinds(named(cuda, "RM_ALLOC(KEPLER_CHANNEL_GROUP_A)")[0]) == ["ObjectAllocated", "ChannelGroupAllocated"]
    token = named(cuda, "RM_CONTROL(NVC36F_CTRL_CMD_GPFIFO_GET_WORK_SUBMIT_TOKEN)")[0]
    assert token.events == (sem.ControlIssued(0xC1D00001, 0x5C000006, 0xC36F0108),
                            sem.WorkTokenIssued(0xC1D00001, 0x5C000006, 0x10))
    schedule = named(cuda, "RM_CONTROL(NVA06C_CTRL_CMD_GPFIFO_SCHEDULE)")[0]
    assert schedule.events[1] == sem.ChannelScheduled(0xC1D00001, 0x5C000004, True)
    assert named(cuda, "RM_FREE")[-1].events == (sem.ObjectFreed(0xC1D00001, 0xC1D00001),)
    assert named(cuda, "SYS_EXIT")[0].events == (sem.ProcessExited(0),)
    assert all(m.holds(e) for m in cuda for e in m.events)  # every call of this client succeeded


def test_uvm_registration_holds_the_global_lock(cuda):
    (register,) = named(cuda, "UVM_REGISTER_GPU")
    assert register.events == (sem.LockTaken(sem.LockKind.UVM_GLOBAL), sem.VaSpaceUsed(5),
                               sem.UvmRegistered(5, GPU_UUID, 0xC1D00001), sem.LockReleased(sem.LockKind.UVM_GLOBAL))
    assert sem.Ref(sem.RefKind.VA_SPACE, 5) in register.uses
    (init,) = named(cuda, "UVM_INITIALIZE")
    assert init.events == (sem.UvmInitialized(5),) and init.defines == (sem.Ref(sem.RefKind.VA_SPACE, 5),)
    rule = sem.LOCKS[sem.LockKind.UVM_GLOBAL]
    assert sem.UvmRole.REGISTER_GPU in rule.takers and "global_lock" in rule.why


def test_a_call_in_flight_holds_what_it_took_and_nothing_it_would_have_made(wedged):
    registers = named(wedged, "UVM_REGISTER_GPU")
    blocked = [m for m in registers if m.call.state is CallState.IN_FLIGHT]
    assert len(blocked) == 2
    for m in blocked:
        assert not m.returned and not m.succeeded
        assert list(m.effective()) == [sem.LockTaken(sem.LockKind.UVM_GLOBAL), sem.VaSpaceUsed(4)]
        assert isinstance(m.first(sem.UvmRegistered), sem.UvmRegistered)  # what it asked for is still said


def test_a_failed_allocation_makes_no_object():
    profile = load_profile("580.142")
    c = Crafter(profile, pid=7)
    records = c.rm_alloc(0xC1D00001, 0xC1D00001, 0x5C000001, "NV01_DEVICE_0", status=0x1F)
    m = sem.Interpreter(DecoderSet(profile, user=False)).interpret(Call(tuple(records), CallState.COMPLETE))
    assert m.returned and not m.succeeded
    assert isinstance(m.events[0], sem.ObjectAllocated) and list(m.effective()) == []


def test_host_messages_are_facts_whatever_their_rc(wedged):
    hints = [e for m in wedged for e in m.effective() if isinstance(e, sem.SemaHint)]
    assert {h.rc for h in hints} == {0, -22}
    fired = [e for m in wedged for e in m.events if isinstance(e, sem.LatchFired)]
    assert fired and all(f.rank == 2 for f in fired) and fired[0].generation == 0
    counters = [e for m in wedged for e in m.events if isinstance(e, sem.HostCounters)][-1]
    assert dict(counters.values) == {"pub_calls": 2702, "gr_rel": 202, "faked": 0, "drain_held": 0}
    released = [e for m in wedged for e in m.events if isinstance(e, sem.WorkCompleted)]
    assert released and released[0].how is sem.Completion.RELEASE
    registered = next(e for m in wedged for e in m.events if isinstance(e, sem.HostChannelRegistered))
    assert registered.rank == 2 and registered.channel == 0xCAF000D4
    assert all(isinstance(e, sem.HostEvent) for m in wedged if m.call.first.source == Source.SEMA for e in m.events)


def test_meaning_comes_from_numbers_not_from_names():
    """Renaming every class and control of a profile changes what calls are called, not what they mean."""
    profile = load_profile("580.142")
    renamed = dataclasses.replace(
        profile, version="580.142-renamed",
        classes={cid: ClassInfo(cid, f"CLASS_{cid:X}", info.alloc_params) for cid, info in profile.classes.items()},
        controls={cmd: Control(cmd, f"CONTROL_{cmd:X}", c.params, c.size) for cmd, c in profile.controls.items()})
    c = Crafter(profile, pid=9)
    alloc = c.rm_alloc(0xC1D00001, 0x5C000004, 0x5C000006, "HOPPER_CHANNEL_GPFIFO_A",
                       {"gpFifoOffset": COMPUTE_RING, "gpFifoEntries": 512})
    token = c.rm_control(0xC1D00001, 0x5C000006, "NVC36F_CTRL_CMD_GPFIFO_GET_WORK_SUBMIT_TOKEN",
                         after={"workSubmitToken": 7})
    interpreter = sem.Interpreter(DecoderSet(renamed, user=False))
    m = interpreter.interpret(Call(tuple(alloc), CallState.COMPLETE))
    assert m.decoded.detail == "CLASS_C86F"
    assert m.events[1] == sem.ChannelAllocated(0xC1D00001, 0x5C000006, 0x5C000004, 0, COMPUTE_RING, 512, 0)
    t = interpreter.interpret(Call(tuple(token), CallState.COMPLETE))
    assert t.decoded.detail == "CONTROL_C36F0108" and t.events[1] == sem.WorkTokenIssued(0xC1D00001, 0x5C000006, 7)


def test_a_call_through_ioctl_xfer_means_its_inner_escape():
    profile = load_profile("580.142")
    defs = context(profile).defs
    inner = defs.build_values("NVOS00_PARAMETERS", {"hRoot": 5, "hObjectParent": 5, "hObjectOld": 6})
    xfer = defs.build_values("nv_ioctl_xfer_t", {"cmd": 0x29, "size": len(inner), "ptr": 0x7000})
    bufs = (Buffer(Role.ARG, When.BEFORE, xfer), Buffer(Role.XFER, When.BEFORE, inner))
    enter = Record(Source.RM, Phase.ENTER, op=0xD3, call_id=1, pid=1, buffers=bufs)
    exit_ = Record(Source.RM, Phase.EXIT, op=0xD3, call_id=1, pid=1, buffers=tuple(
        dataclasses.replace(b, when=When.AFTER) for b in bufs))
    m = sem.Interpreter(DecoderSet(profile, user=False)).interpret(Call((enter, exit_), CallState.COMPLETE))
    assert m.decoded.op == 0xD3 and m.events == (sem.ObjectFreed(5, 6),)


@pytest.mark.parametrize("path, device", [
    ("/dev/nvidiactl", sem.Device.CONTROL), ("/dev/nvidia0", sem.Device.GPU), ("/dev/nvidia13", sem.Device.GPU),
    ("/dev/nvidia-uvm", sem.Device.UVM), ("/dev/nvidia-uvm-tools", sem.Device.UVM_TOOLS),
    ("/dev/nvidia-modeset", sem.Device.OTHER), ("/dev/null", sem.Device.NONE), ("/etc/nvidia", sem.Device.NONE)])
def test_device_nodes(path, device):
    assert sem.device_of(path) is device and device.nvidia == (device is not sem.Device.NONE)


def test_events_are_frozen_values():
    e = sem.ObjectFreed(1, 2)
    with pytest.raises(dataclasses.FrozenInstanceError):
        e.handle = 3  # type: ignore[misc]
    assert e == sem.ObjectFreed(1, 2) and hash(e) == hash(sem.ObjectFreed(1, 2))
    assert sem.LockTaken.applies is sem.Applies.ALWAYS and sem.ObjectAllocated.applies is sem.Applies.ON_SUCCESS


def test_mapped_addresses_and_tokens_are_values_later_calls_use():
    """On the real capture: RM_UNMAP_MEMORY names the address its RM_MAP_MEMORY handed out, an mmap
    the fd it maps and the address it returns; every channel's token is a value it defines."""
    defined: dict = {}
    resolved = unresolved = 0
    for m in meanings(str(captures.path("cuda-streams"))):
        for ref in m.uses:
            if ref.kind is sem.RefKind.CPU_MAPPING:
                if ref in defined:
                    resolved += 1
                    assert defined[ref] in ("RM_MAP_MEMORY", "SYS_MMAP"), defined[ref]
                else:
                    unresolved += 1
        for ref in m.defines:
            defined[ref] = m.decoded.name
        if m.decoded.name == "SYS_MMAP":
            assert sem.Ref(sem.RefKind.FD, m.call.first.fd) in m.uses
    assert resolved >= 28 and unresolved <= 1
    assert sum(ref.kind is sem.RefKind.TOKEN for ref in defined) == 20


def test_a_duplicate_names_its_source_and_defines_its_new_handle():
    profile = load_profile("580.142")
    records = Crafter(profile, pid=9).escape("NV_ESC_RM_DUP_OBJECT", {
        "hClient": 0xC1D00002, "hParent": 0xC1D00002, "hObject": 0x5C000099, "hClientSrc": 0xC1D00001,
        "hObjectSrc": 0x5C000006})
    m = sem.Interpreter(DecoderSet(profile, user=False)).interpret(Call(tuple(records), CallState.COMPLETE))
    assert m.events == (sem.ObjectDuplicated(0xC1D00002, 0x5C000099, 0xC1D00002, 0xC1D00001, 0x5C000006),)
    assert m.defines == (sem.Ref(sem.RefKind.HANDLE, 0x5C000099, 0xC1D00002),)
    assert sem.Ref(sem.RefKind.HANDLE, 0x5C000006, 0xC1D00001) in m.uses


def _event_classes() -> list[type]:
    found, todo = [], [sem.Event]
    while todo:
        cls = todo.pop()
        found.append(cls)
        todo.extend(cls.__subclasses__())
    return [cls for cls in found if dataclasses.fields(cls)]


@pytest.mark.parametrize("cls", _event_classes(), ids=lambda cls: cls.__name__)
def test_events_compare_hash_and_print_as_dataclass_would(cls: type) -> None:
    """Events share Event's __repr__/__eq__/__hash__ (a start-up cost saved): each behaves as the methods
    @dataclass(frozen=True) generates for a class of the same fields, compared on a twin made so."""
    fields = dataclasses.fields(cls)
    twin = dataclasses.make_dataclass(cls.__name__, [(f.name, Any, dataclasses.field(repr=f.repr, compare=f.compare,
                                                                                    hash=f.hash)) for f in fields],
                                      frozen=True)
    twin.__qualname__ = cls.__qualname__
    values = list(range(1, len(fields) + 1))
    event, same, made = cls(*values), cls(*values), twin(*values)
    assert repr(event) == repr(made)
    assert event == same and hash(event) == hash(same) == hash(made)
    other = cls(*values[:-1], -1)
    assert (event == other) == (made == twin(*values[:-1], -1))
    assert event != made and event.__eq__(made) is NotImplemented  # another class: as dataclass, not equal
    unhashable = cls({}, *values[1:])
    with pytest.raises(TypeError):
        hash(unhashable)
