"""What a call means: one typed layer between the decoders and everything that reads them.

    from rmtrace.semantics import Interpreter, ObjectAllocated, LockTaken
    interpreter = Interpreter(decoders)              # one per trace (its DecoderSet)
    for call in decoders.calls(trace.records()):
        meaning = interpreter.interpret(call)        # decoded as deep as its meaning needs
        for event in meaning.effective():            # what the recording says took effect
            ...
        meaning.events, meaning.uses, meaning.defines

The session fold, the replayer, ``wedges`` and the host model read calls through this
layer only: which objects a call creates or frees, which channel it binds or brings up,
which lock it holds, what a host message does to a rank, which values it defines that later
calls reuse.  Roles come from the numbers in the driver profile (rmtrace.decoders.roles),
never from display names.  docs/events.md describes every event.

Layer 2.5: imports the record format, the trace file and the decoders only.
"""

from typing import TYPE_CHECKING, Any

from rmtrace.decoders.roles import Category, ControlRole, EscapeRole, GspRole, Roles, UvmRole, roles
from rmtrace.semantics.locks import LOCKS, LockKind, LockRule

if TYPE_CHECKING:
    from rmtrace.semantics.events import (
        Applies,
        CallInFlightAtStop,
        ChannelAllocated,
        ChannelBound,
        ChannelGroupAllocated,
        ChannelScheduled,
        Completion,
        ControlIssued,
        Device,
        DrainHeld,
        DrainReleased,
        Event,
        FdClosed,
        FdDuplicated,
        FdOpened,
        GspEvent,
        GspReply,
        GspRequest,
        GspSessionStarted,
        HostChannelRegistered,
        HostChannelUnregistered,
        HostCounters,
        HostEvent,
        HostSessionReset,
        LatchArmed,
        LatchFired,
        LockReleased,
        LockTaken,
        MemoryMapped,
        MemoryUnmapped,
        ObjectAllocated,
        ObjectDuplicated,
        ObjectFreed,
        ProcessExecuted,
        ProcessExited,
        ProcessForked,
        Publication,
        Published,
        RecordingStopped,
        RecordsLost,
        Ref,
        RefKind,
        ReplayVerdict,
        SemaAcquire,
        SemaHint,
        UvmChannelRegistered,
        UvmChannelUnregistered,
        UvmInitialized,
        UvmRegistered,
        UvmUnregistered,
        VaSpaceUsed,
        WorkCompleted,
        WorkTokenIssued,
    )
    from rmtrace.semantics.interpret import CallMeaning, Interpreter, device_of

_LAZY = ("rmtrace.semantics.events", "rmtrace.semantics.interpret")
"""Where the other names of __all__ live, loaded on first use (PEP 562): the call table's modules need only the
lock kinds, and the ~50 event classes are most of this package's import (show's columns path never reads them)."""


def __getattr__(name: str) -> Any:
    import importlib
    if name in __all__:
        for home in _LAZY:
            module = importlib.import_module(home)
            if hasattr(module, name):
                value = globals()[name] = getattr(module, name)  # found once: later reads are plain
                return value
    from rmtrace.lazymodule import submodule
    return submodule(__name__, name)


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})


__all__ = [
    "Interpreter", "CallMeaning", "device_of", "LOCKS", "LockRule", "roles", "Roles",
    "Category", "ControlRole", "EscapeRole", "GspRole", "UvmRole",
    "Applies", "Completion", "Device", "LockKind", "Publication", "Ref", "RefKind", "Event", "HostEvent",
    "FdOpened", "FdClosed", "FdDuplicated", "MemoryMapped", "MemoryUnmapped", "ProcessForked", "ProcessExecuted",
    "ProcessExited", "ObjectAllocated", "ChannelAllocated", "ChannelGroupAllocated", "ObjectDuplicated",
    "ObjectFreed", "ControlIssued", "WorkTokenIssued", "ChannelBound", "ChannelScheduled", "UvmInitialized",
    "VaSpaceUsed", "UvmRegistered", "UvmUnregistered", "UvmChannelRegistered", "UvmChannelUnregistered",
    "LockTaken", "LockReleased", "GspRequest", "GspReply", "GspEvent", "GspSessionStarted",
    "HostChannelRegistered", "HostChannelUnregistered", "Published", "SemaHint", "WorkCompleted", "SemaAcquire",
    "LatchArmed", "LatchFired", "DrainHeld", "DrainReleased", "HostSessionReset", "HostCounters",
    "RecordingStopped", "RecordsLost", "CallInFlightAtStop", "ReplayVerdict",
]
