"""The session model: a trace folded into processes, clients, RM object trees, channels,
ranks and host-service state, with every change a timestamped transition.

    from rmtrace.session import load_session
    model = load_session("run1.trace")
    model.clients, model.channels, model.state_at(t), model.history("chan/c1/ch0"), model.lanes()

Layer 3: imports the trace file and the decoders; no I/O beyond reading the trace.
"""

from typing import TYPE_CHECKING, Any

from rmtrace.session.entities import (
    STATE_SYMBOLS,
    STATES,
    CallInfo,
    Channel,
    Client,
    GspExchange,
    Lane,
    LaneState,
    Process,
    Rank,
    RmObject,
    Segment,
    State,
    Transition,
)

if TYPE_CHECKING:
    from rmtrace.session.model import SessionModel, load_session


def __getattr__(name: str) -> Any:
    """The model is loaded on first use (PEP 562): the call table needs the entities, not the fold behind the model."""
    import importlib
    if name in ("SessionModel", "load_session"):
        value = globals()[name] = getattr(importlib.import_module("rmtrace.session.model"), name)
        return value
    from rmtrace.lazymodule import submodule  # rmtrace.session.NAME, as when the model was imported eagerly
    return submodule(__name__, name)


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})


__all__ = [
    "load_session", "SessionModel", "STATE_SYMBOLS", "STATES", "CallInfo", "Channel", "Client", "GspExchange",
    "Lane", "LaneState", "Process", "Rank", "RmObject", "Segment", "State", "Transition",
]
