"""What calls whose meaning is their handles and class did, as columns: one row per effect.

``Interpreter.meaning`` says what one call means, as events.  For the bulk of a trace (RM
allocations, frees and duplicates, UVM channel registrations, the controls the model reads)
the events are a function of a few numbers the call table keeps (the operation, the handles by
member name, the class or command, whether the call succeeded), so ``row_effects`` says the same
for many calls at once, with numpy: which calls made which effect, on which handles.  It is the
same table of roles as the readers of ``rmtrace.semantics.interpret`` (``_rm_alloc``,
``_rm_free``, ``_rm_dup``, ``_rm_control``, ``_uvm``), by profile numbers only.  Where a call's
meaning is in its params too (a channel's or TSG's allocation, those controls) its row says which
object and which command; ``alloc_params_event`` and ``control_event`` of the interpreter say the
rest from the params buffer, for the fold to read where it lies.
``tests/test_semantics_effects.py`` checks the two agree on every call of every test trace.
"""

from __future__ import annotations

import enum
from collections.abc import Callable
from dataclasses import dataclass, fields

import numpy as np

from rmtrace.decoders.roles import Category, EscapeRole, Roles, UvmRole
from rmtrace.record import Source

CATEGORIES = tuple(Category)
"""``Effects.category`` holds the index of the object's Category here."""
NO_CLASS = -1
"""``class_id`` of a call that names no class."""


class EffectKind(enum.IntEnum):
    """What one row of ``Effects`` did (the event of ``rmtrace.semantics.events`` it stands for)."""

    NONE = 0
    ALLOCATED = 1        # ObjectAllocated (a root client: h_client == handle, no parent)
    FREED = 2            # ObjectFreed
    DUPLICATED = 3       # ObjectDuplicated
    UVM_CHANNEL_REGISTERED = 4
    UVM_CHANNEL_UNREGISTERED = 5
    CONTROL = 6          # a control the model reads: its event is in its params (``control_event``)
    ALLOCATED_MEMORY = 7  # ObjectAllocated by RM_ALLOC_MEMORY (whose params are never a channel's)


ESCAPE_KINDS = {EscapeRole.ALLOC: EffectKind.ALLOCATED, EscapeRole.ALLOC_MEMORY: EffectKind.ALLOCATED_MEMORY,
                EscapeRole.FREE: EffectKind.FREED, EscapeRole.DUP_OBJECT: EffectKind.DUPLICATED}
"""RM escapes whose events are their handles and class."""
UVM_KINDS = {UvmRole.REGISTER_CHANNEL: EffectKind.UVM_CHANNEL_REGISTERED,
             UvmRole.UNREGISTER_CHANNEL: EffectKind.UVM_CHANNEL_UNREGISTERED}
"""UVM commands whose only event the session keeps is their handles'."""
PARAMS_CATEGORIES = frozenset({Category.CHANNEL, Category.TSG})
"""Allocations whose meaning is in their params too (``Interpreter.needs_params``): ``alloc_params_event``
says what, from the params buffer."""
NO_COMMAND = -1
"""``command`` of a call that is not a control."""


@dataclass
class Effects:
    """One row per call that had an effect, in the calls' order; 0 is "none" for a handle."""

    at: np.ndarray
    """The position of the call among the calls given to ``row_effects``."""
    kind: np.ndarray
    command: np.ndarray
    """A control's command (``NO_COMMAND`` for any other call)."""
    h_client: np.ndarray
    handle: np.ndarray
    parent: np.ndarray
    class_id: np.ndarray
    category: np.ndarray
    src_client: np.ndarray
    src_handle: np.ndarray
    params: np.ndarray
    """Whether the call's params say more (``alloc_params_event``, ``control_event``)."""

    def __len__(self) -> int:
        return len(self.at)

    def __getitem__(self, keep: np.ndarray) -> Effects:
        """The effects ``keep`` picks (a mask or indexes), in their order."""
        return Effects(*(getattr(self, f.name)[keep] for f in fields(self)))

    @classmethod
    def joined(cls, parts: list[Effects]) -> Effects:
        """The effects of ``parts`` one after another (their ``at`` counted from the same first call).  The
        parts are emptied as they are joined, a field at a time: the join holds no second copy of them."""
        out = {}
        for f in fields(cls):
            out[f.name] = np.concatenate([getattr(part, f.name) for part in parts])
            for part in parts:
                setattr(part, f.name, out[f.name][:0])
        return cls(**out)


def effect_kinds(roles: Roles, source: np.ndarray, op: np.ndarray, command: np.ndarray) -> np.ndarray:
    """Each call's ``EffectKind`` should it succeed; NONE where it has none of these effects.  A control
    is CONTROL when the model reads its ``command`` (``Roles.controls``), NONE otherwise."""
    kinds = np.zeros(len(source), dtype=np.int8)
    numbered = [(Source.RM, number, ESCAPE_KINDS.get(role)) for number, role in roles.escapes.items()]
    numbered += [(Source.UVM, number, UVM_KINDS.get(role)) for number, role in roles.uvm.items()]
    numbered += [(Source.RM, number, EffectKind.CONTROL) for number, role in roles.escapes.items()
                 if role is EscapeRole.CONTROL]
    for src, number, kind in numbered:
        if kind is not None:
            kinds[(source == src) & (op == number)] = kind
    control = kinds == EffectKind.CONTROL
    kinds[control & ~np.isin(command, np.array(sorted(roles.controls), dtype=np.int64))] = EffectKind.NONE
    return kinds


def categories(roles: Roles, class_id: np.ndarray) -> np.ndarray:
    """The index in ``CATEGORIES`` of each class's category (``Roles.category``, each class asked once)."""
    uniq, inverse = np.unique(class_id, return_inverse=True)
    found = [CATEGORIES.index(roles.category(None if c == NO_CLASS else c)) for c in uniq.tolist()]
    return np.array(found, dtype=np.int8)[inverse.ravel()] if len(uniq) else np.zeros(0, dtype=np.int8)


def row_effects(roles: Roles, kinds: np.ndarray, ok: np.ndarray, class_id: np.ndarray, command: np.ndarray,
                handle: Callable[[str], np.ndarray]) -> Effects:
    """The effects of the calls of ``kinds`` (``effect_kinds``) that succeeded (``ok``): every one of
    them holds only on success.  ``handle(member)``: each call's handle of that name, 0 where it names
    none.  What each is, as the readers of ``rmtrace.semantics.interpret`` say it."""
    at = np.flatnonzero((kinds != EffectKind.NONE) & ok)
    kind = kinds[at]
    h_client, parent, handle_ = (handle(name)[at].astype(np.int64) for name in ("hClient", "hParent", "hObject"))
    cls = class_id[at]
    category = categories(roles, cls)
    root = (kind == EffectKind.ALLOCATED) & (category == CATEGORIES.index(Category.ROOT))
    # a root client is its own client (``_rm_alloc``); a UVM call's object is its channel (``_uvm``)
    uvm = (kind == EffectKind.UVM_CHANNEL_REGISTERED) | (kind == EffectKind.UVM_CHANNEL_UNREGISTERED)
    own = np.where(handle_ != 0, handle_, h_client)
    handle_ = np.where(root, own, np.where(uvm, handle("hChannel")[at], handle_))
    h_client = np.where(root, own, h_client)
    parent = np.where(root, 0, parent)
    dup = kind == EffectKind.DUPLICATED
    params = (kind == EffectKind.CONTROL) | ((kind == EffectKind.ALLOCATED)
                                             & np.isin(category, [CATEGORIES.index(c) for c in PARAMS_CATEGORIES]))
    return Effects(at, kind, command[at], h_client, handle_, parent, cls, category,
                   np.where(dup, handle("hClientSrc")[at], 0), np.where(dup, handle("hObjectSrc")[at], 0), params)
