"""A client's recorded messages as what its replaying process does: actions, sites, reservations, skips.

Compiled once per message stream (repeats of a client share theirs), before
anything reaches the driver:

* **safety**: each RM and UVM call is looked up in the branch's replay tables
  (``rmtrace.decoders.profiles.safety``) by its numbers; an escape decided by
  its control, class or inner escape is looked up by that.  What is not known
  to be harmless is skipped, with the table's reason, unless ``allow_unsafe``;
* **buffers and pointers**: the request's BEFORE buffers become the buffers
  the replaying process allocates; every user pointer that pointed at one of
  them (by the tables' ``links`` and the profile's embedded-pointer table for
  NESTED arrays) is a link the process fills in with its own address.  A
  pointer the recording did not carry, a buffer the capture cut or could not
  read, a call the recording never saw return: skipped, each with its reason;
* **sites**: every leaf field that must be remapped (handles, fds, process and
  GPU addresses, values the driver hands out, GPU UUIDs and ids: the tables'
  ``fields``, plus NvHandle and NvUuid typed members) with its role;
* **reservations**: the address ranges the recorded process had mapped where
  its calls point (UVM ranges, OS-descriptor memory, fixed mmaps), which the
  replaying process maps before its first call;
* **dependencies**: what each message uses and defines, as the semantic layer
  says (``rmtrace.semantics``: handles scoped by their RM client, fds, UVM VA
  spaces), plus what it does not say yet and the remapping knows from the
  fields (``_extra_refs``: the fds inside arguments and params, the handles in
  alloc and UVM params, dup's fds, the CPU mappings MAP_MEMORY and mmap hand
  out and later calls pass back); a message that uses something a skipped
  message defines is itself skipped, naming that message and the first reason.
  So a status that differs can never come from an object the replay left out.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from rmtrace.decoders.profiles.safety import ReplayTables, Rule
from rmtrace.replayer.messages import Message
from rmtrace.replayer.plan import LANE_VA_SHIFT, lane_shift
from rmtrace.replayer.semantics import Semantics
from rmtrace.replayer.targets.nvidia.fields import RM_ALLOC, RM_CONTROL, RM_XFER, Leaf, Walker, buffer_name, call_keys

from rmtrace.calls import Call, CallState
from rmtrace.capture.ctab import USER_ALLOC_TYPES
from rmtrace.record import BufferFlag, Phase, Record, Role, Source, SysMmap, SysOp, When, decode_record
from rmtrace.semantics import Interpreter
from rmtrace.semantics.events import Ref, RefKind

RM_FREE = 0x29
IOC_READ_WRITE, NV_IOCTL_MAGIC = 3, 0x46
MAP_FIXED = 0x10
PAGE = 4096
FINN_SERIALIZED = 0x4
"""NVOS54 flags: params FINN-serialized (no raw struct to remap)."""
UVM_DEVICE = "nvidia-uvm"
DEV = "/dev/"
DEFAULT_ROLES = {"NvHandle": "handle"}
"""Roles by member type when the tables say nothing of the field."""
CHANNEL_SHIFTED = ("alloc.gpFifoOffset", "alloc.userdOffset[*]")
"""Alloc params ``--streams`` moves per lane (to reach other CE ranks in the model); see ``_place_lane``."""
GPFIFO_ENTRY = 8
LOCAL_PREFIX: dict[int, str] = {Role.ARG: "arg", Role.XFER: "arg"}
"""In an IOCTL_XFER_CMD call the XFER buffer is the inner escape's argument: named ``arg``, the outer one ``xfer``."""


@dataclass(slots=True)
class Site:
    buf: int
    offset: int
    size: int
    role: str
    path: str


@dataclass(slots=True)
class Ioctl:
    """One RM or UVM ioctl as the replaying process issues it."""

    fd: int
    request: int
    bufs: list[bytes]
    keys: list[tuple[int, int]]
    """(role, slot) of each buffer."""
    links: list[tuple[int, int, int]]
    """(buffer, offset, buffer it points to)."""
    after: list[int]
    """Buffers read back after the call, in the reply record's order."""
    recorded_after: list[bytes]
    """What those buffers held after the recorded call."""
    sites: list[Site]
    root: bool = False
    """An RM_ALLOC of a root client: the replay frees what is left of it at the end."""
    drop: list[tuple[int, int]] = field(default_factory=list)
    """CPU mappings the process replaces with its reservation just before the call (see ``_pool_unmaps``)."""
    restore: list[tuple[int, int, bytes]] = field(default_factory=list)
    """(buffer, offset, recorded bytes) of fields the replay moved (``_place_lane``): the answer shows them as recorded."""


@dataclass(slots=True)
class Action:
    kind: str
    """open, close, dup, mmap, munmap, ioctl, exit, none (answered with nothing to do), skip."""
    call: Ioctl | None = None
    fd: int = -1
    old_fd: int = -1
    path: str = ""
    mmap: tuple[int, int, int, int, int] = (0, 0, 0, 0, 0)
    """addr, length, prot, flags, offset."""
    offset_is_va: bool = False
    """A UVM fd's mmap: the offset is the address (UVM's rule), remapped with it."""
    reason: str = ""
    unsafe: str = ""
    """The table's reason when ``allow_unsafe`` let an unsafe call through."""
    uses: tuple[Ref, ...] = ()
    defines: tuple[Ref, ...] = ()

    @property
    def ioctl(self) -> Ioctl:
        """The call an ``ioctl`` action issues (every one is compiled with its call)."""
        if self.call is None:
            raise ValueError(f"a {self.kind} action issues no ioctl")
        return self.call


@dataclass
class Program:
    """A message stream compiled: an action per message, the ranges to reserve first."""

    actions: list[Action]
    reservations: list[tuple[int, int, tuple[tuple[int, int], ...]]]
    """(base, length, read-write subranges): page-aligned, disjoint."""
    skipped: dict[int, str] = field(default_factory=dict)


def ioctl_request(nr: int, size: int) -> int:
    """_IOWR('F', nr, size): how RM's escapes are issued (the driver dispatches on nr, copies size bytes)."""
    return (IOC_READ_WRITE << 30) | (size << 16) | (NV_IOCTL_MAGIC << 8) | nr


def uuid_bytes(text: str) -> bytes | None:
    """'GPU-253c0f5c-4d35-...' (as /proc and nvidia-smi write it) as the 16 bytes calls carry."""
    hexdigits = text.removeprefix("GPU-").replace("-", "")
    try:
        raw = bytes.fromhex(hexdigits)
    except ValueError:
        return None
    return raw if len(raw) == 16 else None


def fd_ref(fd: int) -> Ref:
    return Ref(RefKind.FD, fd)


def mapping_ref(value: int) -> Ref:
    """A CPU mapping by the value the driver or mmap handed out (a cookie, an address)."""
    return Ref(RefKind.CPU_MAPPING, value)


class Compiler:
    """Compiles message streams of one plan (see the module docstring)."""

    def __init__(self, semantics: Semantics, tables: ReplayTables, *, allow_unsafe: bool = False) -> None:
        self.semantics = semantics
        self.profile = semantics.profile
        self.tables = tables
        self.allow_unsafe = allow_unsafe
        self.walker = Walker(self.profile)
        self.root_classes = frozenset(n for n in (self.profile.lookup("classes", name) for name in USER_ALLOC_TYPES)
                                      if n is not None)
        self._names = semantics._ctx.names
        self._room: dict[int, tuple[int, int]] = {}
        self.interpreter = Interpreter(semantics.decoders)

    # ------------------------------------------------------------------ a stream

    def compile(self, messages: Sequence[Message]) -> Program:
        ranges: list[tuple[int, int, bool]] = []
        self._room = self._lane_room(messages)
        actions = []
        lanes: list[tuple[int, int, int]] = []
        """(message, base, length) of each range a lane's clone names (``_own_range``)."""
        for m in messages:
            before = len(ranges)
            actions.append(self._with_meaning(m, self._message(m, ranges)))
            if m.lane:
                lanes.extend((m.index, base, length) for base, length, _rw in ranges[before:])
        self._lanes_apart(messages, actions, lanes, [r for r in ranges if (r[0], r[1]) not in
                                                     {(b, n) for _i, b, n in lanes}])
        self._pool_unmaps(messages, actions)
        for a in actions:  # fixed mmaps land inside the process's own reservations
            if a.kind == "mmap" and a.mmap[3] & MAP_FIXED:
                ranges.append((a.mmap[0], a.mmap[1], False))
        reservations = _merge(ranges)
        program = Program(actions, reservations)
        self._va_checks(messages, program)
        self._dependencies(messages, program)
        return program

    @staticmethod
    def _lanes_apart(messages: Sequence[Message], actions: list[Action], lanes: Sequence[tuple[int, int, int]],
                     recorded: Sequence[tuple[int, int, bool]]) -> None:
        """A lane's range that overlaps one the recording used is skipped, with that reason (the driver
        would refuse it, or place the lane's buffers among lane 0's)."""
        for index, base, length in lanes:
            hit = next(((b, n) for b, n, _rw in recorded if b < base + length and base < b + n), None)
            if hit is not None:
                action = actions[index]
                actions[index] = Action("skip", reason=f"lane {messages[index].lane}'s range {base:#x}+{length:#x} "
                                        f"overlaps {hit[0]:#x}+{hit[1]:#x}, which the recording used",
                                        uses=action.uses, defines=action.defines)

    def _with_meaning(self, msg: Message, action: Action) -> Action:
        """The action with what the semantic layer says its message uses and defines (before its own refs)."""
        records = (decode_record(msg.request),) + ((decode_record(msg.reply),) if msg.reply is not None else ())
        state = CallState.COMPLETE if len(records) > 1 else \
            CallState.SINGLE if records[0].phase == Phase.EVENT else CallState.IN_FLIGHT
        meaning = self.interpreter.interpret(Call(records, state))
        action.uses = tuple(dict.fromkeys(meaning.uses + action.uses))
        action.defines = tuple(dict.fromkeys(meaning.defines + action.defines))
        return action

    def _pool_unmaps(self, messages: Sequence[Message], actions: Sequence[Action]) -> None:
        """Before UVM_FREE of a range the process mapped from its UVM fd, drop that CPU mapping.

        UVM refuses to free a semaphore pool still mapped on the CPU ("munmap it
        first"), so a recorded UVM_FREE that succeeded shows the recorded
        process had dropped the mapping -- libcuda does it by mapping its VA
        reservation back over the range, an anonymous mmap the capture does not
        record.  The replaying process does the same just before the call."""
        free = self.profile.lookup("uvm", "UVM_FREE")
        nodes: dict[int, str] = {}
        mapped: set[tuple[int, int]] = set()
        for msg, action in zip(messages, actions):
            kind = action.kind
            if kind == "open":
                nodes[action.fd] = action.path
            elif kind == "dup" and action.old_fd in nodes:
                nodes[action.fd] = nodes[action.old_fd]
            elif kind == "mmap" and nodes.get(action.fd, "").startswith(UVM_DEVICE):
                mapped.add((action.mmap[0], action.mmap[1]))
            elif kind == "munmap":
                lo, hi = action.mmap[0], action.mmap[0] + action.mmap[1]
                mapped = {(a, n) for a, n in mapped if a + n <= lo or a >= hi}
            elif kind == "ioctl" and action.call is not None and action.call.request == free and action.call.bufs:
                arg = action.call.bufs[0]
                base, length = int.from_bytes(arg[0:8], "little"), int.from_bytes(arg[8:16], "little")
                if (base, length) in mapped and msg.expect.status == 0:
                    action.call.drop.append((base, length))
                    mapped.discard((base, length))

    def _lane_room(self, messages: Sequence[Message]) -> dict[int, tuple[int, int]]:
        """Per USERD memory of lane 0's channels: (the span their GPFIFOs and USERDs take, lanes that fit more).

        ``--streams`` clones a channel onto another lane; a real driver refuses a
        second channel on the same USERD, so lane L's clone goes L spans further
        into the same memory (where lane 0's program left it unused), and a lane
        that does not fit is skipped with that reason."""
        channels: dict[int, list[tuple[int, int]]] = {}
        sizes: dict[int, int] = {}
        for msg in messages:
            if msg.lane or msg.reply is None:
                continue
            fields = self._alloc_fields(msg)
            if "alloc.userdOffset[*]" in fields and fields.get("alloc.hUserdMemory[*]"):
                channels.setdefault(fields["alloc.hUserdMemory[*]"], []).append(
                    (fields["alloc.userdOffset[*]"], fields.get("alloc.gpFifoEntries", 0)))
            elif "alloc.size" in fields:
                sizes[msg.h_object] = fields["alloc.size"]
        room = {}
        for memory, placed in channels.items():
            offsets = sorted(o for o, _n in placed)
            gaps = [b - a for a, b in zip(offsets, offsets[1:]) if b > a]
            stride = min(gaps) if gaps else (max(n for _o, n in placed) * GPFIFO_ENTRY + 2 * PAGE) // PAGE * PAGE
            span = offsets[-1] - offsets[0] + stride
            size = sizes.get(memory, 0)
            room[memory] = (span, max(0, (size - offsets[-1] - stride) // span) if span else 0)
        return room

    def _alloc_fields(self, msg: Message) -> dict[str, int]:
        """The first value of each scalar leaf of a message's alloc params (by pattern), as recorded."""
        record = decode_record(msg.request)
        buf = record.buffer(Role.ALLOC_PARAMS, When.BEFORE)
        if buf is None:
            return {}
        out: dict[str, int] = {}
        for leaf in self.walker.buffer_leaves(record, Role.ALLOC_PARAMS, 0, len(buf.data)):
            if leaf.size <= 8 and leaf.pattern not in out:
                out[leaf.pattern] = int.from_bytes(buf.data[leaf.offset:leaf.offset + leaf.size], "little")
        return out

    def _dependencies(self, messages: Sequence[Message], program: Program) -> None:
        """Skip what uses a key a skipped message defines, naming it and the first reason (by construction)."""
        definer: dict[Ref, int] = {}
        skipped = program.skipped
        for msg, action in zip(messages, program.actions):
            stray = next((k.value for k in action.uses if k.kind is RefKind.FD and k not in definer), None)
            if action.kind != "skip" and stray is not None:
                action = program.actions[msg.index] = Action(
                    "skip", reason=f"fd {stray} is not one this client opened in the recording (it had it before)",
                    uses=action.uses, defines=action.defines)
            if action.kind == "skip":
                skipped[msg.index] = action.reason
            else:
                cause = next((definer[k] for k in action.uses if k in definer and definer[k] in skipped), None)
                if cause is not None:
                    root = messages[cause]
                    why = skipped[cause]
                    first = why.split(": skipped: ", 1)[-1] if why.startswith("depends on") else why
                    reason = f"depends on message {cause + 1} ({root.name}), skipped: {first}"
                    program.actions[msg.index] = Action("skip", reason=reason, uses=action.uses,
                                                        defines=action.defines)
                    skipped[msg.index] = reason
            for key in program.actions[msg.index].defines:
                definer[key] = msg.index

    def _va_checks(self, messages: Sequence[Message], program: Program) -> None:
        """A process address must lie in a range the replay maps (reserved or mmapped): else skipped."""
        known = [(b, b + n) for b, n, _rw in program.reservations]
        for action in program.actions:
            if action.kind == "mmap" and not action.mmap[3] & MAP_FIXED:
                known.append((action.defines[0][1], action.defines[0][1] + action.mmap[1]) if action.defines else (0, 0))
        for msg, action in zip(messages, program.actions):
            if action.call is None:
                continue
            for site in action.call.sites:
                if site.role != "va":
                    continue
                value = int.from_bytes(action.call.bufs[site.buf][site.offset:site.offset + site.size], "little")
                if value and not any(lo <= value < hi for lo, hi in known):
                    program.actions[msg.index] = Action(
                        "skip", reason=f"{site.path}={value:#x} is outside every range the replay maps",
                        uses=action.uses, defines=action.defines)
                    break
                for lo, hi in known:
                    if value and lo <= value < hi:
                        action.uses = action.uses + (mapping_ref(lo),)
                        break

    # ------------------------------------------------------------------ one message

    def _message(self, msg: Message, ranges: list[tuple[int, int, bool]]) -> Action:
        record = decode_record(msg.request)
        if record.source == Source.SYS:
            return self._sys(record, msg)
        if record.source not in (Source.RM, Source.UVM):
            return Action("skip", reason="a GSP RPC, not an ioctl: a real driver is not sent these by a process")
        if msg.expect.response is None or msg.reply is None:
            return Action("skip", reason="the recording never saw this call return")
        reply = decode_record(msg.reply)
        problem = ""
        try:
            call = self._ioctl(record, reply, msg, ranges)
            uses, defines = self._extra_refs(record, call)
        except _Skip as why:
            call, problem = None, str(why)
            uses, defines = (), self._defines_only(record, reply)
        rule, what = self._rule(record)
        unsafe = ""
        if rule is None or not rule.safe:
            unsafe = f"{what}: {rule.reason}" if rule is not None else f"{what} is not in the safety table"
            if not self.allow_unsafe:  # what it would have defined stays defined by it: its users skip too
                return Action("skip", reason=f"unsafe: {unsafe}", uses=uses, defines=defines)
        if call is None:
            return Action("skip", reason=problem, defines=defines)
        return Action("ioctl", call=call, fd=record.fd, unsafe=unsafe, uses=uses, defines=defines)

    def _defines_only(self, record: Record, reply: Record) -> tuple[Ref, ...]:
        """What a call that cannot be rebuilt would have defined beyond what the semantic layer says
        (an RM_ALLOC_MEMORY's new handle, MAP_MEMORY's cookie): read off its argument."""
        roles: dict[str, str] = {}
        for key in call_keys(self.walker, record):
            roles.update(self.tables.fields.get(key, {}))
        arg = reply.buffer(Role.ARG, When.AFTER)
        if arg is None:
            return ()
        out = []
        client = int.from_bytes(arg.data[0:4], "little")
        for leaf in self.walker.buffer_leaves(record, Role.ARG, 0, len(arg.data)):
            role = roles.get(leaf.pattern)
            if role in ("handle-new", "cookie-out"):
                value = int.from_bytes(arg.data[leaf.offset:leaf.offset + leaf.size], "little")
                if value:
                    out.append(Ref(RefKind.HANDLE, value, client or value) if role == "handle-new" else
                               mapping_ref(value))
        return tuple(out)

    def _rule(self, record: Record) -> tuple[Rule | None, str]:
        """The table's rule for a call, and what the call is (for the reason)."""
        t = self.tables
        if record.source == Source.UVM:
            cmd = self.profile.uvm.get(record.op)
            return t.uvm.get(record.op), cmd.name if cmd is not None else f"UVM request {record.op}"
        nr = record.op
        rule = t.escapes.get(nr)
        name = self.profile.escapes[nr].name if nr in self.profile.escapes else f"escape {nr:#x}"
        if rule is not None and rule.by == "inner":
            inner = self.walker.xfer_inner(record)
            if inner is None or inner == RM_XFER:
                return None, f"{name} carrying nothing known"
            rule = t.escapes.get(inner)
            nr = inner
            name = self.profile.escapes[nr].name if nr in self.profile.escapes else f"escape {nr:#x}"
        if rule is None or rule.by is None:
            return rule, name
        if rule.by == "control":
            control = self.walker.control_cmd(record)
            label = self._names.control_label(control).name if control is not None else "an unknown control"
            return ((t.controls.get(control) if control is not None else None),
                    f"{label} ({control:#x})" if control is not None else label)
        cls = self.walker.alloc_class(record)
        label = self._names.class_label(cls).name if cls is not None else "an unknown class"
        return (t.classes.get(cls) if cls is not None else None), f"{name} of {label} ({cls:#x})" if cls is not None \
            else label

    # -- system events

    def _sys(self, record: Record, msg: Message) -> Action:
        op = record.op
        if op == SysOp.OPEN:
            path = record.buffer(Role.PATH)
            text = path.data.rstrip(b"\0").decode(errors="replace") if path is not None else ""
            node = text[len(DEV):] if text.startswith(DEV) else os.path.basename(text)
            fd = record.fd if record.fd >= 0 else record.ret
            if fd < 0:
                return Action("skip", reason=f"the recorded open of {text} failed")
            if self.tables.device(node) is None:
                return Action("skip", reason=f"opens {text}: not a device node the replay opens")
            return Action("open", fd=fd, path=node)
        if op == SysOp.CLOSE:
            return Action("close", fd=record.fd)
        if op == SysOp.DUP:  # (the semantic layer does not say dup uses and defines fds yet)
            return Action("dup", fd=record.fd, old_fd=record.ret, uses=(fd_ref(record.ret),),
                          defines=(fd_ref(record.fd),))
        if op in (SysOp.MMAP, SysOp.MUNMAP):
            arg = record.buffer(Role.ARG)
            if arg is None or len(arg.data) < SysMmap.sizeof():
                return Action("skip", reason=f"the recorded {SysOp(op).name.lower()} carries no arguments")
            m = SysMmap.parse(arg.data)
            if op == SysOp.MUNMAP:
                return Action("munmap", mmap=(m.addr, m.length, 0, 0, 0))
            if msg.reply is None:
                return Action("skip", reason="the recording never saw this mmap return")
            result = decode_record(msg.reply).ret
            defines = (mapping_ref(result),) if not m.flags & MAP_FIXED and result > 0 else ()
            return Action("mmap", fd=record.fd, mmap=(m.addr, m.length, m.prot, m.flags, m.offset),
                          uses=(fd_ref(record.fd),), defines=defines)
        if op == SysOp.EXIT:
            return Action("exit")
        return Action("none")

    # -- an ioctl

    def _ioctl(self, record: Record, reply: Record, msg: Message, ranges: list[tuple[int, int, bool]]) -> Ioctl:
        xfer = record.source == Source.RM and record.op == RM_XFER
        before = [b for b in record.buffers if b.when == When.BEFORE]
        for b in before:
            what = buffer_name(b.role, b.slot)
            if b.flags & BufferFlag.UNREADABLE:
                raise _Skip(f"the capture could not read its {what} buffer")
            if b.flags & BufferFlag.TRUNCATED or (b.orig_len is not None and b.orig_len != len(b.data)):
                raise _Skip(f"the capture cut its {what} buffer ({len(b.data)} of {b.orig_len} bytes)")
        cmd = self.profile.uvm.get(record.op) if record.source == Source.UVM else None
        no_params = cmd is not None and not cmd.size
        if not no_params and not any(b.role == Role.ARG for b in before):
            raise _Skip("the capture has no argument for it (the capture table did not know its size)")
        if record.source == Source.RM and record.op == RM_CONTROL:
            arg = next(b.data for b in before if b.role == Role.ARG)
            if len(arg) >= 16 and int.from_bytes(arg[12:16], "little") & FINN_SERIALIZED:
                raise _Skip("its params are FINN-serialized: no struct to remap")
        index = {(b.role, b.slot): i for i, b in enumerate(before)}
        bufs = [b.data for b in before]
        names = [self._prefix(b.role, b.slot, xfer) for b in before]
        leaves = [self.walker.buffer_leaves(record, b.role, b.slot, len(b.data)) for b in before]
        if xfer:
            leaves = [self._renamed(ls, n) for ls, n in zip(leaves, names)]
        keys = call_keys(self.walker, record)
        links, linked = self._links(record, before, index, names, leaves, keys)
        sites = self._sites(before, leaves, keys, linked)
        restore = self._place_lane(bufs, leaves, msg.lane) if msg.lane else []
        after_by_key = {(b.role, b.slot): b.data for b in reply.buffers if b.when == When.AFTER}
        after = [i for i, b in enumerate(before) if (b.role, b.slot) in after_by_key]
        recorded_after = [after_by_key[(before[i].role, before[i].slot)] for i in after]
        for key in keys:
            reserve = self.tables.reserve.get(key)
            if reserve is not None:
                if msg.lane:
                    restore += self._own_range(bufs, leaves, reserve.base, reserve.length, msg.lane)
                base, length = self._value(bufs, leaves, reserve.base), self._value(bufs, leaves, reserve.length)
                if base and length:
                    ranges.append((base, length + reserve.plus, reserve.prot == "rw"))
        nr = record.op
        request = nr if record.source == Source.UVM else ioctl_request(nr, len(bufs[index[(Role.ARG, 0)]]))
        # (a UVM command with no params has no buffers: the process passes a NULL argument)
        root = record.source == Source.RM and nr == RM_ALLOC and self.walker.alloc_class(record) in self.root_classes
        return Ioctl(record.fd, request, bufs, [(b.role, b.slot) for b in before], links, after, recorded_after,
                     sites, root, restore=restore)

    @staticmethod
    def _prefix(role: int, slot: int, xfer: bool) -> str:
        if xfer:
            return "xfer" if role == Role.ARG else LOCAL_PREFIX.get(role, buffer_name(role, slot))
        return buffer_name(role, slot)

    @staticmethod
    def _renamed(leaves: Sequence[Leaf], prefix: str) -> tuple[Leaf, ...]:
        out = []
        for leaf in leaves:
            head, dot, rest = leaf.path.partition(".")
            _h, _d, prest = leaf.pattern.partition(".")
            out.append(Leaf(prefix + dot + rest, prefix + dot + prest, leaf.offset, leaf.size, leaf.type, leaf.kind))
        return tuple(out)

    def _links(self, record: Record, before: Sequence[Any], index: dict, names: Sequence[str],
               leaves: Sequence[Sequence[Leaf]], keys: Sequence[str]) -> tuple[list[tuple[int, int, int]], set]:
        """The pointers that pointed at captured buffers; a pointer to nothing captured is a skip."""
        by_name = {n: i for i, n in enumerate(names)}
        links: list[tuple[int, int, int]] = []
        linked: set[tuple[int, int]] = set()
        table: dict[str, str] = {}
        for key in keys:
            table.update(self.tables.links.get(key, {}))
        for i, ls in enumerate(leaves):
            for leaf in ls:
                target = table.get(leaf.pattern)
                if target is None:
                    continue
                value = int.from_bytes(before[i].data[leaf.offset:leaf.offset + 8], "little")
                child = by_name.get(target)
                linked.add((i, leaf.offset))
                if child is None:
                    if value and target != "rights":
                        raise _Skip(f"{leaf.path} points to memory the capture did not carry")
                    continue  # NULL, or rights the capture reads only when present
                links.append((i, leaf.offset, child))
        params = by_name.get("params")
        if params is not None:
            cmd = self.walker.control_cmd(record)
            pointers = self.profile.embedded_pointers(cmd) if cmd is not None else ()
            data = before[params].data
            for slot, ptr in enumerate(pointers):
                if ptr.offset + 8 > len(data):
                    continue
                value = int.from_bytes(data[ptr.offset:ptr.offset + 8], "little")
                child = index.get((Role.NESTED, slot))
                linked.add((params, ptr.offset))
                if child is not None:
                    links.append((params, ptr.offset, child))
                elif value:
                    raise _Skip(f"params.{ptr.name} points to memory the capture did not carry")
        return links, linked

    def _sites(self, before: Sequence[Any], leaves: Sequence[Sequence[Leaf]], keys: Sequence[str],
               linked: set) -> list[Site]:
        roles: dict[str, str] = {}
        for key in keys:
            roles.update(self.tables.fields.get(key, {}))
        sites = []
        for i, ls in enumerate(leaves):
            data = before[i].data
            for leaf in ls:
                role = roles.get(leaf.pattern)
                if role is None:
                    if leaf.kind == "uuid":
                        role = "uuid"
                    elif leaf.kind == "ptr" and (i, leaf.offset) not in linked:
                        if int.from_bytes(data[leaf.offset:leaf.offset + leaf.size], "little"):
                            raise _Skip(f"{leaf.path} is a user pointer the recording did not carry")
                        continue
                    else:
                        role = DEFAULT_ROLES.get(leaf.type)
                if role is not None:
                    sites.append(Site(i, leaf.offset, leaf.size, role, leaf.path))
        return sites

    @staticmethod
    def _value(bufs: Sequence[bytes], leaves: Sequence[Sequence[Leaf]], path: str) -> int:
        for data, ls in zip(bufs, leaves):
            for leaf in ls:
                if leaf.path == path:
                    return int.from_bytes(data[leaf.offset:leaf.offset + leaf.size], "little")
        return 0

    def _place_lane(self, bufs: list[bytes], leaves: Sequence[Sequence[Leaf]], lane: int) -> list[tuple[int, int, bytes]]:
        """Where lane ``lane``'s clone of a channel goes in the shared USERD memory (see ``_lane_room``).

        ``--streams`` moved the clone's ring and USERD addresses by
        ``lane_shift`` (the model derives CE ranks from them); here they move
        ``lane`` spans instead, to room a real driver accepts."""
        memory = next((int.from_bytes(bufs[i][leaf.offset:leaf.offset + leaf.size], "little")
                       for i, ls in enumerate(leaves) for leaf in ls if leaf.pattern == "alloc.hUserdMemory[*]"), None)
        if memory is None:
            return []
        span, fits = self._room.get(memory, (0, 0))
        if lane > fits:
            raise _Skip(f"lane {lane} does not fit in USERD memory {memory:#x} beside the recorded channels")
        shift = lane_shift(lane)
        moved = []
        for i, ls in enumerate(leaves):
            data = bytearray(bufs[i])
            for leaf in ls:
                if leaf.pattern in CHANNEL_SHIFTED:
                    raw = bytes(data[leaf.offset:leaf.offset + leaf.size])
                    value = int.from_bytes(raw, "little")
                    if value >= shift:
                        data[leaf.offset:leaf.offset + leaf.size] = (value - shift + lane * span).to_bytes(leaf.size,
                                                                                                          "little")
                        moved.append((i, leaf.offset, raw))
            bufs[i] = bytes(data)
        return moved

    @staticmethod
    def _own_range(bufs: list[bytes], leaves: Sequence[Sequence[Leaf]], base_path: str, length_path: str,
                   lane: int) -> list[tuple[int, int, bytes]]:
        """A lane's clone of a call that names a range (the tables' ``reserve``) gets a range of its own,
        ``lane << LANE_VA_SHIFT`` further, reserved like lane 0's.

        UVM_REGISTER_CHANNEL names the range UVM places a channel group's context buffers in (channels of
        one group share them): lane 0's group fills its range, so another group's buffers find no room
        there (NV_ERR_INVALID_ADDRESS on the H200, then INVALID_CHANNEL to its unregistration and
        INVALID_STATE to scheduling the group).  The answer shows the recorded range."""
        if not Compiler._value(bufs, leaves, length_path):
            return []  # (a copy-engine channel has no context buffers: no range)
        for i, ls in enumerate(leaves):
            leaf = next((leaf for leaf in ls if leaf.path == base_path), None)
            if leaf is None:
                continue
            raw = bufs[i][leaf.offset:leaf.offset + leaf.size]
            value = int.from_bytes(raw, "little")
            if not value:
                return []
            data = bytearray(bufs[i])
            data[leaf.offset:leaf.offset + leaf.size] = (value + (lane << LANE_VA_SHIFT)).to_bytes(leaf.size, "little")
            bufs[i] = bytes(data)
            return [(i, leaf.offset, raw)]
        return []

    def _extra_refs(self, record: Record, call: Ioctl) -> tuple[tuple[Ref, ...], tuple[Ref, ...]]:
        """What the call uses and defines that the semantic layer does not say (see the module docstring):
        read off the fields the remapping rewrites."""
        uses: list[Ref] = []
        defines: list[Ref] = []
        after = {b: data for b, data in zip(call.after, call.recorded_after)}
        client = self._client(call)
        for s in call.sites:
            value = int.from_bytes(call.bufs[s.buf][s.offset:s.offset + s.size], "little") if s.size <= 8 else 0
            if s.role in ("handle", "handle-free") and value:
                uses.append(Ref(RefKind.HANDLE, value, client))
            elif s.role == "fd" and value < 1 << (8 * s.size - 1):  # a negative fd is none
                uses.append(fd_ref(value))
            elif s.role == "cookie" and value:
                uses.append(mapping_ref(value))
            elif s.role in ("handle-new", "cookie-out") and s.buf in after:
                got = int.from_bytes(after[s.buf][s.offset:s.offset + s.size], "little")
                if got:
                    defines.append(Ref(RefKind.HANDLE, got, client or got) if s.role == "handle-new" else
                                   mapping_ref(got))
        return tuple(dict.fromkeys(uses)), tuple(defines)

    @staticmethod
    def _client(call: Ioctl) -> int:
        """The RM client a call's handles belong to: its argument's first member (hRoot, hClient) for RM,
        the params' hClient for UVM."""
        site = next((s for s in call.sites if s.path == "arg.hClient"), None)
        arg = call.bufs[site.buf if site is not None else 0] if call.bufs else b""
        offset = site.offset if site is not None else 0
        return int.from_bytes(arg[offset:offset + 4], "little") if len(arg) >= offset + 4 else 0


class _Skip(Exception):
    """A call the replay cannot rebuild; the message says why."""


def _merge(ranges: Sequence[tuple[int, int, bool]]) -> list[tuple[int, int, tuple[tuple[int, int], ...]]]:
    """Page-aligned disjoint ranges covering ``ranges``, each with its read-write parts."""
    spans = sorted((base & ~(PAGE - 1), (base + length + PAGE - 1) & ~(PAGE - 1), rw) for base, length, rw in ranges
                   if length > 0)
    out: list[list[Any]] = []
    for lo, hi, rw in spans:
        if out and lo <= out[-1][1]:
            out[-1][1] = max(out[-1][1], hi)
        else:
            out.append([lo, hi, []])
        if rw:
            out[-1][2].append((lo, hi - lo))
    return [(lo, hi - lo, tuple(rws)) for lo, hi, rws in out]


__all__ = ["Compiler", "Program", "Action", "Ioctl", "Site", "ioctl_request", "uuid_bytes"]
