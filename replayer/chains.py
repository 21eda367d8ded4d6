"""The chain ``rmtrace wedges`` gives for each wedged client, read back from a replay's own trace.

The replay trace is an ordinary trace, so the session model and the wedge
finder read it as they read a recording: the chain they print is what an
engineer would get from ``rmtrace wedges replay.trace``, built only from
the records (the guest's calls, the target's sema and GSP records).  The
target's own explanation (``ClientResult.chain``) stays beside it.
"""

from __future__ import annotations

from rmtrace.replayer.runner import ReplayResult, Verdict

from rmtrace.analysis.wedges import find_wedges
from rmtrace.session import load_session


def attach_wedge_chains(result: ReplayResult) -> None:
    """Set ``wedge_chain`` of every wedged client of ``result`` (which must have written a trace)."""
    if result.output is None:
        raise ValueError("a replay without an output trace has nothing for wedges to read")
    wedged = {c.client.pid: c for c in result.clients if c.verdict is Verdict.WEDGED}
    if not wedged:
        return
    model = load_session(result.output)
    for wedge in find_wedges(model):
        if wedge.kind != "in_flight" or wedge.client_id is None:
            continue
        mine = wedged.get(model.client(wedge.client_id).pid)
        if mine is not None and not mine.wedge_chain:
            mine.wedge_chain = list(wedge.chain)
