"""The objects every ``--json`` prints and ``rmtrace export --format jsonl`` writes (docs/json-schema.md).

One builder per object type, each taking the library's own object (a
decoded call, a wedge, a divergence, a replayed client, a stats row, a
trace's reader) and giving a JSON-ready dict whose first key, ``type``,
says which it is.  Output is JSON Lines: one object per line, however many
a command prints, so ``jq``, pandas and DuckDB read every command's output
the same way.

Times follow one rule everywhere: ``t_ns`` (and ``*_t_ns``) is nanoseconds
since the trace's first record, ``time_ns`` (and ``*_time_ns``) is the
recording host's monotonic clock as recorded, any other ``*_ns`` is a
duration.  The ``info`` object carries ``start_time_ns``, which ties the two.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Iterable, Iterator, Mapping
from itertools import islice
from typing import IO, TYPE_CHECKING, Any

import orjson

from rmtrace.record import Buffer, Phase, Record, Role, Source, When, enum_name

if TYPE_CHECKING:  # the builders only read these objects' attributes; importing them would cost every caller
    from rmtrace.analysis.diff import Divergence
    from rmtrace.analysis.wedges import Wedge
    from rmtrace.calls import Call
    from rmtrace.columns.stats import Operations
    from rmtrace.decoders.base import Decoded
    from rmtrace.replayer.reduce import Reduction
    from rmtrace.replayer.runner import ClientResult, ReplayResult
    from rmtrace.trace import TraceReader

SCHEMA_VERSION = 1
"""Bumped when a field changes meaning or goes away (new fields do not bump it)."""

JsonObject = dict[str, Any]

DERIVED_BACKENDS = ("replay", "reduce")
"""The backends of traces rmtrace made from another trace (replayer/output.py, replayer/reduce.py)."""


ORJSON_OPTIONS = orjson.OPT_PASSTHROUGH_DATACLASS | orjson.OPT_PASSTHROUGH_DATETIME
"""Dataclasses and datetimes go to ``encode_default`` (their ``str``), as they do in ``json`` with ``default=str``."""


def encode_default(obj: Any) -> Any:
    """What ``encode`` writes for a value JSON has no type for: a float subclass as a number, else its ``str``."""
    if isinstance(obj, float):  # a float subclass (numpy's float64): a number, as json writes it
        return float(obj)
    return str(obj)


def encode(obj: Mapping[str, Any], newline: bool = False) -> bytes:
    """One object as one line of compact ASCII JSON (``newline``: with its ``\\n``), the bytes ``json.dumps`` gives.

    orjson writes the same bytes as ``json.dumps(obj, separators=(",", ":"), default=str)``
    seven times faster, except where the two differ: text beyond ASCII (json escapes it as
    ``\\uXXXX``, as it does DEL), and what orjson refuses (an integer beyond 64 bits, a key that
    is not text, a lone surrogate); those objects go through json itself.  Floats are written
    in the shortest form that reads back as the same number, which for some below 1e-4 is
    spelled otherwise than json would (``0.00001`` for ``1e-05``): docs/json-schema.md.
    """
    try:
        line = orjson.dumps(obj, default=encode_default, option=ORJSON_OPTIONS | (orjson.OPT_APPEND_NEWLINE if newline else 0))
    except TypeError:
        return _json_dumps(obj, newline)
    if orjson_as_is(line):
        return line
    return _json_dumps(obj, newline)


def orjson_as_is(line: bytes) -> bool:
    """Whether ``encode`` writes orjson's bytes ``line`` as they are: ASCII with no DEL (else json writes it)."""
    return line.isascii() and b"\x7f" not in line


def fragment(obj: Any) -> orjson.Fragment | None:
    """``obj`` encoded (``encode``) to be spliced into a line that orjson writes: None where ``encode``
    would not use orjson's bytes for it (text beyond ASCII, DEL, what orjson refuses), as a line holding
    it would then be written by json, whose bytes can differ (floats) from orjson's."""
    try:
        line = orjson.dumps(obj, default=encode_default, option=ORJSON_OPTIONS)
    except TypeError:
        return None
    return orjson.Fragment(line) if orjson_as_is(line) else None


def _json_dumps(obj: Mapping[str, Any], newline: bool = False) -> bytes:
    return (json.dumps(obj, separators=(",", ":"), default=encode_default) + ("\n" if newline else "")).encode("ascii")


def dumps(obj: Mapping[str, Any]) -> str:
    """One object as one line of compact JSON (``encode`` as text)."""
    return encode(obj).decode("ascii")


LINES_AT_ONCE = 256
"""Lines ``write_lines`` joins into one write (``stats --json`` on 1M records writes 75,000)."""


def write_lines(objects: Iterable[Mapping[str, Any]], out: IO[str], limit: int | None = None) -> int:
    """Objects as JSON Lines (at most ``limit``); how many were written.  The lines go as ``encode``'s
    bytes, ``LINES_AT_ONCE`` in one write, to ``out``'s binary buffer where it has one (flushed first, so
    that what was written as text before stays in order): each line made text and then bytes again took
    a tenth of ``stats --json``'s user CPU with the cache warm at 1M records (0.69 -> 0.62 s)."""
    n = 0

    def taken() -> Iterator[Mapping[str, Any]]:
        nonlocal n
        for obj in objects if limit is None else islice(objects, limit):
            n += 1
            yield obj

    write_encoded(encoded(taken()), out)
    return n


def encoded(objects: Iterable[Mapping[str, Any]]) -> Iterator[bytes]:
    """``encode``'s lines of ``objects``, each with its ``\\n``, ``LINES_AT_ONCE`` lines a piece."""
    objects = iter(objects)
    while batch := list(islice(objects, LINES_AT_ONCE)):
        yield b"".join([encode(obj, newline=True) for obj in batch])


def write_encoded(data: Iterable[bytes], out: IO[str]) -> None:
    """Lines already encoded (``encode``'s bytes, each with its ``\\n``; several lines a piece) to ``out``,
    a write per piece, as ``write_lines`` writes them."""
    binary = getattr(out, "buffer", None)
    if binary is None:
        for piece in data:
            out.write(piece.decode("ascii"))
        return
    out.flush()
    for piece in data:
        binary.write(piece)
    binary.flush()


def _rel(time_ns: int | None, start_ns: int) -> int | None:
    return None if time_ns is None else time_ns - start_ns


# -- one trace -----------------------------------------------------------------------------


def info(reader: TraceReader) -> JsonObject:
    """What a trace holds: counts over record headers only (no buffer is decoded), and where it came from."""
    from rmtrace.columns.headers import header_counts  # numpy: only for the commands that count

    counts = header_counts(reader)
    sources: dict[str, dict[str, int]] = {}
    for (source, phase), n in sorted(counts.by_source.items()):
        sources.setdefault(enum_name(Source, source), {})[enum_name(Phase, phase).lower()] = n
    span = reader.time_span
    meta = reader.meta
    return {
        "type": "info", "schema": SCHEMA_VERSION, "file": reader.path, "size": os.path.getsize(reader.path),
        "complete": reader.recovery.complete, "recovery": reader.recovery.describe(),
        "records": reader.record_count, "chunks": len(reader.chunks),
        "start_time_ns": span[0] if span else None, "end_time_ns": span[1] if span else None,
        "duration_ns": span[1] - span[0] if span else 0,
        "processes": counts.pids, "sources": sources, "in_flight_at_stop": counts.in_flight,
        "recorded": recording(meta), "made": made(meta), "meta": meta,
    }


def recording(meta: Mapping[str, Any]) -> JsonObject:
    """Where, when and how the recording was made; for a replay or a reduced trace, the recording it
    goes back to (replayer.output.provenance keeps it)."""
    made_meta = meta.get("made")
    facts = made_meta["recording"] if made_meta else meta
    return {"host": facts.get("host"), "kernel": facts.get("kernel"), "start_time": facts.get("start_time"),
            "backend": facts.get("backend"), "command": list(facts.get("command") or []),
            "driver_version": meta.get("driver_version")}


def made(meta: Mapping[str, Any]) -> JsonObject | None:
    """For a trace rmtrace made from another (a replay, a reduction): by what, on which host, when,
    from which file, against what target in what schedule; None for a recording."""
    made_meta = meta.get("made")
    backend = meta.get("backend")
    if not made_meta and backend not in DERIVED_BACKENDS:
        return None
    made_meta = made_meta or {"by": f"rmtrace {backend}"}  # written before replays said where and when
    how = meta.get("replay") or meta.get("reduce") or {}
    return {"by": made_meta.get("by"), "rmtrace_version": made_meta.get("rmtrace_version", meta.get("rmtrace_version")),
            "host": made_meta.get("host"), "kernel": made_meta.get("kernel"), "time": made_meta.get("time"),
            "from": made_meta.get("from") or how.get("source") or meta.get("reduced_from"),
            "target": how.get("target"), "schedule": how.get("schedule")}


def record(rec: Record, start_ns: int, buffer: Callable[[Buffer], Any] | None = None) -> JsonObject:
    """A record as it is in the trace: every header field, every buffer's bytes in hex (``buffer``: how
    a buffer's object is made, by default ``record_buffer``)."""
    return {
        "type": "record", "seq": rec.seq, "t_ns": rec.time_ns - start_ns, "time_ns": rec.time_ns,
        "pid": rec.pid, "tid": rec.tid, "source": enum_name(Source, rec.source), "phase": enum_name(Phase, rec.phase),
        "op": rec.op, "call_id": rec.call_id, "fd": rec.fd, "ret": rec.ret, "err": rec.err, "flags": rec.flags,
        "buffers": list(map(buffer or record_buffer, rec.buffers)),
    }


def record_buffer(b: Buffer, hex_text: str | None = None) -> JsonObject:
    """A record's buffer as it is in the trace, its bytes in hex (``hex_text``: that hex, made already)."""
    return {"role": enum_name(Role, b.role), "when": enum_name(When, b.when), "flags": b.flags, "addr": b.addr,
            "len": len(b.data), "orig_len": b.orig_len, "slot": b.slot,
            "hex": b.data.hex() if hex_text is None else hex_text}


def call(decoded: Decoded, folded: Call, start_ns: int, buffers: list[Any] | None = None,
         record_buffer: Callable[[Buffer], Any] | None = None) -> JsonObject:
    """A call (an enter and its exit, a request and its response, or a message alone), decoded
    (``buffers`` and ``record_buffer``: the buffers' objects as the caller makes them, as jsonl splices
    them in already encoded; by default ``render.buffer_objects`` and ``record_buffer``)."""
    first = folded.first
    return {
        "type": "call", "seq": first.seq, "t_ns": first.time_ns - start_ns, "time_ns": first.time_ns,
        "pid": first.pid, "tid": first.tid, "call_id": first.call_id, "fd": first.fd, "state": folded.state.value,
        "duration_ns": folded.duration_ns, **decoded.to_dict(buffers),
        "records": [record(r, start_ns, record_buffer) for r in folded.records],
    }


# -- analysis ------------------------------------------------------------------------------


def wedge(w: Wedge, start_ns: int) -> JsonObject:
    """Something that never finished (or finished late), ranked, with its chain of why."""
    return {"type": "wedge", "rank": w.rank, "kind": w.kind, "summary": w.summary, "client": w.client_id,
            "entity": w.entity, "seq": w.seq, "t_ns": _rel(w.t_ns, start_ns), "time_ns": w.t_ns,
            "since_t_ns": _rel(w.since_ns, start_ns), "chain": list(w.chain)}


def divergence(d: Divergence, a_start_ns: int, b_start_ns: int) -> JsonObject:
    """The first place two runs of a client differ; each side's call by sequence and time in its own trace."""
    return {"type": "divergence", "client": d.client_id, "kind": d.kind, "index": d.index, "summary": d.summary,
            "a_seq": d.a.enter_seq if d.a else None, "a_t_ns": d.a.t_enter - a_start_ns if d.a else None,
            "b_seq": d.b.enter_seq if d.b else None, "b_t_ns": d.b.t_enter - b_start_ns if d.b else None,
            "details": list(d.details)}


def traffic(rows: Iterable[Mapping[str, Any]]) -> list[JsonObject]:
    """diff's traffic table (``analysis.diff.traffic_table``), one object per client and source."""
    return [{"type": "traffic", "client": row["client"], "source": source, "a": a, "b": b}
            for row in rows for source, (a, b) in row["sources"].items()]


def stats(stats_dict: Mapping[str, Any]) -> Iterator[JsonObject]:
    """``analysis.stats.session_stats`` as objects: each process, each client, each operation row, made
    one at a time (the operations may be an iterator: ``analysis.stats.stats_parts``)."""
    yield from ({"type": "process", **p} for p in stats_dict["processes"])
    yield from ({"type": "client", **c} for c in stats_dict["clients"])
    yield from ({"type": "stats", **row} for row in stats_dict["operations"])


def stats_lines(stats_dict: Mapping[str, Any]) -> Iterator[bytes]:
    """``stats``' objects as ``encode``'s lines, several lines a piece: with the operations an
    ``Operations`` (``analysis.stats.stats_parts``), their lines are written from its columns a block at
    a time (``stats_rows_lines``), not made dicts and encoded one by one."""
    ops = stats_dict["operations"]
    if not hasattr(ops, "blocks"):  # a list of rows' dicts (``session_stats``)
        yield from encoded(stats(stats_dict))
        return
    yield from encoded(stats({**stats_dict, "operations": ()}))
    yield from stats_rows_lines(ops)


def stats_rows_lines(ops: Operations) -> Iterator[bytes]:
    """The ``stats`` objects of ``ops``' rows, a block's lines a piece, each the bytes ``encode`` gives for
    the row's dict (``Operations.rows``).  Each text is written once, by ``json.dumps`` (a line that is
    not ASCII is json's, and where it is, orjson's text is json's: they differ only on non-ASCII and DEL,
    for which ``encode`` takes json's), and each row's line made by one format.  Where two statuses
    have the same text (a row's dict would hold one), the rows' dicts are encoded instead.
    1M records' 74,200 rows, cache warm, in-process best of 5 (load ~20): 0.596 -> 0.263 s CPU against
    ``write_lines`` of ``stats``' dicts; the whole ``stats --json`` 1.85 -> 1.41 s (bench/results/stats_ab.txt)."""
    if len(set(ops.status_names)) != len(ops.status_names):
        yield from encoded({"type": "stats", **row} for row in ops.rows())
        return
    statuses = [json.dumps(t) for t in ops.status_names]
    clients = [json.dumps(c) if c else "null" for c in ops.clients]
    sources = {k: json.dumps(v) for k, v in ops.sources.items()}
    names = [json.dumps(n) for n in ops.names]
    for b in ops.blocks(texts=statuses):
        text, counted, bounds = b.status_text, b.status_count, b.status_bounds
        st = [f"{{{text[a]}:{counted[a]}}}" if z - a == 1 else
              "{" + ",".join([f"{k}:{v}" for k, v in zip(text[a:z], counted[a:z])]) + "}"
              for a, z in zip(bounds, bounds[1:])]
        latency = [f'{{"min":{lo},"median":{med},"p99":{p99},"max":{hi}}}' if t else "null"
                   for lo, med, p99, hi, t in zip(b.latency_min, b.latency_median, b.latency_p99, b.latency_max, b.timed)]
        yield "".join([
            f'{{"type":"stats","pid":{p},"client":{clients[cl]},"source":{sources[so]},"operation":{names[o]},'
            f'"count":{n},"statuses":{s},"latency_ns":{lat},"bytes":{by},"in_flight":{f}}}\n'
            for p, cl, so, o, n, s, lat, by, f in zip(b.pid, b.client, b.source, b.operation, b.calls, st,
                                                      latency, b.bytes, b.in_flight)]).encode("ascii")


def coverage(coverage_dict: Mapping[str, Any]) -> JsonObject:
    """How much of a trace the decoders name for its profile: ``decoders.coverage``'s dict, with the
    profile's version and the warning of its choice (``profile``, ``profile_warning``)."""
    return {"type": "coverage", **coverage_dict}


# -- replay --------------------------------------------------------------------------------


def verdict(client: ClientResult, run: ReplayResult) -> JsonObject:
    """One replayed client: green, diverged or wedged, at which message, and why."""
    at = client.at
    return {
        "type": "verdict", "client": client.client.id, "label": client.client.label, "pid": client.client.pid,
        "origin": client.client.origin, "run": client.client.run, "verdict": client.verdict.value,
        "message": at.index + 1 if at else None, "name": at.name if at else None,
        "recorded_seq": at.seq if at else None,
        "differences": [{"what": d.what, "expected": str(d.expected), "got": str(d.got)} for d in client.differences],
        "diverged_messages": client.diverged, "chain": list(client.chain), "wedge_chain": list(client.wedge_chain),
        "sent": client.sent, "answered": client.answered, "messages": len(client.client.messages),
        "skipped": len(client.skipped), "target": run.target, "schedule": str(run.schedule), "seed": run.schedule.seed,
    }


def replay(run: ReplayResult, source: str) -> JsonObject:
    """One replay run: what was replayed against what, how it ended, where its trace is."""
    return {"type": "replay", "source": source, "target": run.target, "schedule": str(run.schedule),
            "seed": run.schedule.seed, "clients": len(run.clients), "messages": run.messages,
            "exit_status": int(run.exit_status), "output": run.output, "counters": dict(run.counters)}


def reduction(red: Reduction, source: str, output: str, target: str, schedule: str, same: bool) -> JsonObject:
    """What ``reduce`` kept of a wedging replay, where it wrote it, and whether it wedges the same way alone."""
    return {"type": "reduction", "source": source, "output": output, "target": target, "schedule": schedule,
            "clients_before": red.before_clients, "messages_before": red.before_messages,
            "clients": len(red.plan.clients), "messages": red.messages, "replays": red.tests,
            "signature": [{"name": name, "kind": kind} for name, kind in red.signature],
            "kept": [{"client": c.id, "label": c.label, "messages": [m.name for m in c.messages]}
                     for c in red.plan.clients],
            "same": same, "exit_status": 0 if same else 1}


# -- datasets ------------------------------------------------------------------------------


def row(columns: Iterable[str], values: Iterable[Any]) -> JsonObject:
    """One row of an SQL answer (``rmtrace query``): its columns by name under ``values``, where a column
    called ``type`` cannot take the place of the object's own."""
    return {"type": "row", "values": dict(zip(columns, values))}


# -- driver profiles -----------------------------------------------------------------------


def profile(version: str, branch: str, counts: Mapping[str, int], constants: Mapping[str, int]) -> JsonObject:
    """A shipped driver profile: how many of each kind of entry it holds, and its constants."""
    return {"type": "profile", "version": version, "branch": branch, "counts": dict(counts),
            "constants": dict(constants)}


def profile_entry(version: str, entries: Mapping[str, Any]) -> JsonObject:
    """Entries of one profile asked for by name or number (control, class, uvm) and their layouts."""
    return {"type": "profile_entry", "version": version, **entries}


def profile_diff(changes: Mapping[str, Any]) -> JsonObject:
    """What moved between two profiles (``decoders.profiles.diff.diff_profiles``)."""
    return {"type": "profile_diff", **changes}
