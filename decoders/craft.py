"""Craft the records of RM and UVM calls from field values (scapy-style building).

Tests, benchmarks and the replayer need traffic shaped exactly like a real
capture: an ENTER record with the argument struct (and params) read before the
call and an EXIT record with them read after, built with the same construct
definitions the decoders parse with, for the profile in use.  ``Crafter``
starts every struct from zeros and sets only the fields given, so what it
writes decodes back to those values::

    c = Crafter(load_profile("580.142"), pid=1447)
    records = c.rm_alloc(0xC1D00001, 0xC1D00001, 0x5C000001, "NV01_DEVICE_0", {"deviceId": 0})
    records += c.rm_control(0xC1D00001, 0x5C000002, "NVC36F_CTRL_CMD_GPFIFO_GET_WORK_SUBMIT_TOKEN",
                            after={"workSubmitToken": 0x1F})
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from rmtrace.decoders.context import context
from rmtrace.decoders.profiles.model import DriverProfile

from rmtrace.errors import RmtraceError
from rmtrace.record import Buffer, Phase, Record, Role, Source, SysOp, When

PARAMS_ADDR = 0x7FFE0000
"""Where crafted params buffers claim to live in the process (NVOS54.params)."""


def _by_name(table: Mapping[int, Any], name: str, what: str) -> int:
    for number, entry in table.items():
        if getattr(entry, "name", entry) == name:
            return number
    raise RmtraceError(f"the profile has no {what} named {name}")


@dataclass
class Crafter:
    """Builds call records for one process; time advances by ``step_ns`` per record."""

    profile: DriverProfile
    pid: int = 1000
    tid: int | None = None
    t_ns: int = 1_000_000_000
    step_ns: int = 10_000
    ctl_fd: int = 3
    uvm_fd: int = 4
    _next_call: int = field(default=1, repr=False)
    thread: int = field(init=False, default=0, repr=False)
    """The records' tid: ``tid``, else the pid."""

    def __post_init__(self) -> None:
        self.ctx = context(self.profile)
        self.thread = self.pid if self.tid is None else self.tid

    # -- numbers by name ---------------------------------------------------------------

    def class_id(self, cls: int | str) -> int:
        return cls if isinstance(cls, int) else _by_name(self.profile.classes, cls, "class")

    def control_id(self, cmd: int | str) -> int:
        return cmd if isinstance(cmd, int) else _by_name(self.profile.controls, cmd, "control command")

    def uvm_id(self, cmd: int | str) -> int:
        return cmd if isinstance(cmd, int) else _by_name(self.profile.uvm, cmd, "UVM command")

    def escape_id(self, name: str) -> int:
        return _by_name(self.profile.escapes, name, "escape")

    # -- structs -----------------------------------------------------------------------

    def struct_bytes(self, layout: str, values: Mapping[str, Any] | None = None) -> bytes:
        """Layout ``layout`` built from zeros with ``values`` set (nested dicts for nested structs)."""
        return self.ctx.defs.build_values(layout, values or {}, flex=False)

    # -- records -----------------------------------------------------------------------

    def _stamp(self) -> int:
        self.t_ns += self.step_ns
        return self.t_ns

    def call(self, source: int, op: int, fd: int, before: list[Buffer], after: list[Buffer],
             ret: int = 0, err: int = 0, in_flight: bool = False, duration_ns: int | None = None) -> list[Record]:
        """An ENTER record and (unless ``in_flight``) its EXIT record."""
        call_id = self._next_call
        self._next_call += 1
        enter = Record(source, Phase.ENTER, op=op, time_ns=self._stamp(), pid=self.pid, tid=self.thread,
                       call_id=call_id, fd=fd, buffers=tuple(before))
        if in_flight:
            return [enter]
        if duration_ns is not None:
            self.t_ns += duration_ns - self.step_ns
        exit_ = Record(source, Phase.EXIT, op=op, time_ns=self._stamp(), pid=self.pid, tid=self.thread,
                       call_id=call_id, fd=fd, ret=ret, err=err, buffers=tuple(after))
        return [enter, exit_]

    def finish(self, enter: Record, done: list[Record]) -> Record:
        """The exit of an ``in_flight`` call ``enter``, taken from ``done`` (the same call, built whole)."""
        exit_ = done[-1]
        return Record(exit_.source, Phase.EXIT, op=exit_.op, time_ns=self._stamp(), pid=enter.pid, tid=enter.tid,
                      call_id=enter.call_id, fd=enter.fd, ret=exit_.ret, err=exit_.err, buffers=exit_.buffers)

    def _ioctl(self, source: int, op: int, fd: int, layout: str | None, before: Mapping[str, Any],
               after: Mapping[str, Any], extra: Sequence[tuple[int, bytes, bytes]] = (), **kw: Any) -> list[Record]:
        if layout is None:
            raise RmtraceError(f"profile {self.profile.version} has no argument layout for op {op:#x}")
        arg_b = self.struct_bytes(layout, before)
        arg_a = self.struct_bytes(layout, {**before, **after})
        bufs_b = [Buffer(Role.ARG, When.BEFORE, arg_b)] + [Buffer(r, When.BEFORE, b) for r, b, _ in extra]
        bufs_a = [Buffer(Role.ARG, When.AFTER, arg_a)] + [Buffer(r, When.AFTER, a) for r, _, a in extra]
        return self.call(source, op, fd, bufs_b, bufs_a, **kw)

    def rm_alloc(self, h_client: int, h_parent: int, h_object: int, cls: int | str,
                 params: Mapping[str, Any] | None = None, status: int = 0, new_handle: int | None = None,
                 **kw: Any) -> list[Record]:
        """RM_ALLOC in its 32-byte NVOS21 form, with the class's alloc params when it has a layout.

        ``new_handle``: the handle RM chose (written back AFTER) when the caller passed ``h_object`` 0.
        """
        class_id = self.class_id(cls)
        info = self.profile.classes.get(class_id)
        extra = []
        if info is not None and info.alloc_params and self.ctx.defs.layout(info.alloc_params) is not None:
            p = self.struct_bytes(info.alloc_params, params)
            extra.append((Role.ALLOC_PARAMS, p, p))
        fields = {"hRoot": h_client, "hObjectParent": h_parent, "hObjectNew": h_object, "hClass": class_id,
                  "paramsSize": len(extra[0][1]) if extra else 0}
        after = {"status": status} if new_handle is None else {"status": status, "hObjectNew": new_handle}
        return self._ioctl(Source.RM, self.escape_id("NV_ESC_RM_ALLOC"), self.ctl_fd, "NVOS21_PARAMETERS",
                           fields, after, extra, **kw)

    def rm_free(self, h_client: int, h_parent: int, h_object: int, status: int = 0, **kw: Any) -> list[Record]:
        return self._ioctl(Source.RM, self.escape_id("NV_ESC_RM_FREE"), self.ctl_fd, "NVOS00_PARAMETERS",
                           {"hRoot": h_client, "hObjectParent": h_parent, "hObjectOld": h_object}, {"status": status},
                           **kw)

    def rm_control(self, h_client: int, h_object: int, cmd: int | str, params: Mapping[str, Any] | None = None,
                   after: Mapping[str, Any] | None = None, status: int = 0, nested: Sequence[bytes] = (),
                   raw_size: int = 0, **kw: Any) -> list[Record]:
        """RM_CONTROL with the command's params (``after`` = what the driver wrote back).

        ``nested``: the arrays the params' embedded pointers point to, read after
        the call (NESTED buffers, slot = pointer index).  A command the profile
        has no params layout for gets ``raw_size`` zero bytes of params.
        """
        cmd_id = self.control_id(cmd)
        ctrl = self.profile.controls.get(cmd_id)
        extra = [(Role.PARAMS, bytes(raw_size), bytes(raw_size))] if raw_size else []
        if ctrl is not None and ctrl.params and self.ctx.defs.layout(ctrl.params) is not None:
            extra = [(Role.PARAMS, self.struct_bytes(ctrl.params, params),
                      self.struct_bytes(ctrl.params, {**(params or {}), **(after or {})}))]
        fields = {"hClient": h_client, "hObject": h_object, "cmd": cmd_id, "params": PARAMS_ADDR,
                  "paramsSize": len(extra[0][1]) if extra else 0}
        records = self._ioctl(Source.RM, self.escape_id("NV_ESC_RM_CONTROL"), self.ctl_fd, "NVOS54_PARAMETERS",
                              fields, {"status": status}, extra, **kw)
        if nested and len(records) == 2:
            exit_ = records[1]
            records[1] = replace(exit_, buffers=exit_.buffers + tuple(
                Buffer(Role.NESTED, When.AFTER, data, slot=i) for i, data in enumerate(nested)))
        return records

    def escape(self, name: str, fields: Mapping[str, Any], after: Mapping[str, Any] | None = None,
               fd: int | None = None, **kw: Any) -> list[Record]:
        """Any RM escape by name (NV_ESC_CHECK_VERSION_STR, NV_ESC_RM_MAP_MEMORY, ...): its argument struct only."""
        nr = self.escape_id(name)
        return self._ioctl(Source.RM, nr, self.ctl_fd if fd is None else fd, self.profile.escapes[nr].struct,
                           fields, after or {}, **kw)

    def uvm(self, cmd: int | str, params: Mapping[str, Any] | None = None, status: int = 0,
            after: Mapping[str, Any] | None = None, **kw: Any) -> list[Record]:
        """A UVM ioctl: its params struct is the argument (rmStatus is set after)."""
        nr = self.uvm_id(cmd)
        layout = self.profile.uvm[nr].params
        return self._ioctl(Source.UVM, nr, self.uvm_fd, layout, dict(params or {}),
                           {**(after or {}), "rmStatus": status}, **kw)

    def sys(self, op: SysOp, fd: int = -1, ret: int = 0, path: str | None = None) -> list[Record]:
        bufs = (Buffer(Role.PATH, When.ONCE, path.encode()),) if path is not None else ()
        return [Record(Source.SYS, Phase.EVENT, op=op, time_ns=self._stamp(), pid=self.pid, tid=self.thread,
                       fd=fd, ret=ret, buffers=bufs)]
