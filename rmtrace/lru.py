"""A least-recently-used cache bounded in entries and in bytes, counting its hits and misses.

rmtrace keeps several such caches of decode work (parsed buffers, buffers' JSON objects, show's
call summaries), each keyed by bytes of a trace that recur.  They share one rule besides the two
budgets: an entry larger than the whole byte budget is never kept, since kept it would push out
every other entry and then itself, leaving the cache empty.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Hashable
from typing import Generic, TypeVar

K = TypeVar("K", bound=Hashable)
V = TypeVar("V")


class BoundedLRU(Generic[K, V]):
    """At most ``max_entries`` values and ``max_bytes`` of what their ``put`` said they stand for
    (``None``: no bound in bytes, for a cache whose entries are all of a size), the least recently
    used (looked up or put) going first.  ``hits`` and ``misses`` count ``get``s;
    ``bytes`` is what the kept entries stand for now."""

    __slots__ = ("max_entries", "max_bytes", "hits", "misses", "bytes", "_kept")

    def __init__(self, max_entries: int, max_bytes: int | None) -> None:
        self.max_entries = max_entries
        self.max_bytes = max_bytes
        self.hits = 0
        self.misses = 0
        self.bytes = 0
        self._kept: OrderedDict[K, tuple[V, int]] = OrderedDict()

    def __len__(self) -> int:
        return len(self._kept)

    def __contains__(self, key: object) -> bool:
        """Whether ``key`` is kept (neither counted nor made recent)."""
        return key in self._kept

    @property
    def hit_rate(self) -> float:
        """Hits per lookup so far (0.0 before any)."""
        lookups = self.hits + self.misses
        return self.hits / lookups if lookups else 0.0

    def get(self, key: K) -> V | None:
        """The value kept for ``key`` (now the most recent), else None; counted as a hit or a miss."""
        found = self._kept.get(key)
        if found is None:
            self.misses += 1
            return None
        self.hits += 1
        self._kept.move_to_end(key)
        return found[0]

    def put(self, key: K, value: V, nbytes: int) -> None:
        """Keep ``value`` for ``key`` as standing for ``nbytes``, unless that is more than all the
        cache may hold (then an older value for ``key`` is dropped too: ``get`` never answers
        with a value a caller has replaced); then drop the least recent entries until both budgets
        hold again."""
        kept = self._kept
        old = kept.pop(key, None)
        if old is not None:
            self.bytes -= old[1]
        max_bytes = self.max_bytes
        if (max_bytes is not None and nbytes > max_bytes) or self.max_entries <= 0:
            return
        kept[key] = (value, nbytes)
        self.bytes += nbytes
        while len(kept) > self.max_entries or (max_bytes is not None and self.bytes > max_bytes):
            self.bytes -= kept.popitem(last=False)[1][1]

    def clear(self) -> None:
        """Forget every entry (the counts stay)."""
        self._kept.clear()
        self.bytes = 0
