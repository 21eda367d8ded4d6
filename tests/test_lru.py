"""BoundedLRU: both budgets hold after every step, the least recent goes first, hits and misses counted,
and nothing larger than the byte budget is ever kept; checked step by step against a plain reference model."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from rmtrace.lru import BoundedLRU


class Reference:
    """The same rules written the slow, obvious way: a list of (key, value, nbytes), oldest first."""

    def __init__(self, max_entries: int, max_bytes: int) -> None:
        self.max_entries, self.max_bytes = max_entries, max_bytes
        self.entries: list[tuple[int, str, int]] = []
        self.hits = self.misses = 0

    def get(self, key: int) -> str | None:
        for i, (k, v, _n) in enumerate(self.entries):
            if k == key:
                self.hits += 1
                self.entries.append(self.entries.pop(i))
                return v
        self.misses += 1
        return None

    def put(self, key: int, value: str, nbytes: int) -> None:
        self.entries = [e for e in self.entries if e[0] != key]  # the older value goes, kept anew or not
        if nbytes > self.max_bytes or self.max_entries <= 0:
            return
        self.entries.append((key, value, nbytes))
        while len(self.entries) > self.max_entries or sum(e[2] for e in self.entries) > self.max_bytes:
            self.entries.pop(0)


_steps = st.lists(st.tuples(st.sampled_from(["get", "put"]), st.integers(0, 7), st.integers(0, 12)), max_size=60)


@settings(max_examples=300, deadline=None)
@given(st.integers(0, 5), st.integers(0, 24), _steps)
def test_the_cache_does_what_the_reference_does(max_entries, max_bytes, steps):
    lru: BoundedLRU[int, str] = BoundedLRU(max_entries, max_bytes)
    ref = Reference(max_entries, max_bytes)
    for n, (op, key, nbytes) in enumerate(steps):
        if op == "get":
            assert lru.get(key) == ref.get(key)
        else:
            lru.put(key, f"v{n}", nbytes)
            ref.put(key, f"v{n}", nbytes)
        assert [k for k, _v, _n in ref.entries] == list(lru._kept)  # the same keys in the same order
        assert lru.bytes == sum(e[2] for e in ref.entries) <= max_bytes
        assert len(lru) == len(ref.entries) <= max_entries
        assert (lru.hits, lru.misses) == (ref.hits, ref.misses)


def test_the_least_recently_used_goes_first_and_a_lookup_makes_an_entry_recent():
    lru: BoundedLRU[str, int] = BoundedLRU(2, 100)
    lru.put("a", 1, 1)
    lru.put("b", 2, 1)
    assert lru.get("a") == 1  # "b" is now the least recent
    lru.put("c", 3, 1)
    assert "b" not in lru and lru.get("a") == 1 and lru.get("c") == 3
    assert lru.get("b") is None and (lru.hits, lru.misses) == (3, 1) and lru.hit_rate == 0.75


def test_the_byte_budget_pushes_out_the_oldest_until_it_holds():
    lru: BoundedLRU[str, int] = BoundedLRU(10, 10)
    for key in "abc":
        lru.put(key, 0, 4)
    assert list(lru._kept) == ["b", "c"] and lru.bytes == 8


def test_an_entry_larger_than_the_byte_budget_is_never_kept_and_pushes_nothing_out():
    lru: BoundedLRU[str, int] = BoundedLRU(10, 10)
    lru.put("small", 1, 4)
    lru.put("big", 2, 11)
    assert "big" not in lru and lru.get("small") == 1 and lru.bytes == 4
    lru.put("exact", 3, 6)  # as large as what is left: kept, nothing pushed out
    assert len(lru) == 2 and lru.bytes == 10


def test_putting_a_kept_key_again_replaces_it_and_its_bytes():
    lru: BoundedLRU[str, int] = BoundedLRU(10, 10)
    lru.put("a", 1, 4)
    lru.put("a", 2, 6)
    assert len(lru) == 1 and lru.bytes == 6 and lru.get("a") == 2


def test_replacing_a_value_with_one_too_large_to_keep_drops_the_old_one():
    lru: BoundedLRU[str, int] = BoundedLRU(10, 10)
    lru.put("a", 1, 4)
    lru.put("a", 2, 11)  # the new value is not kept; the replaced one must not answer for it
    assert lru.get("a") is None and lru.bytes == 0 and len(lru) == 0


def test_clear_forgets_the_entries_and_keeps_the_counts():
    lru: BoundedLRU[str, int] = BoundedLRU(4, 40)
    lru.put("a", 1, 4)
    lru.get("a")
    lru.get("z")
    lru.clear()
    assert (len(lru), lru.bytes, lru.hits, lru.misses) == (0, 0, 1, 1) and lru.get("a") is None


def test_a_cache_of_no_entries_keeps_nothing():
    lru: BoundedLRU[str, int] = BoundedLRU(0, 40)
    lru.put("a", 1, 1)
    assert len(lru) == 0 and lru.get("a") is None


def test_no_byte_bound_keeps_entries_of_any_size_up_to_the_entry_bound():
    lru: BoundedLRU[str, int] = BoundedLRU(2, None)
    lru.put("a", 1, 10**12)
    lru.put("b", 2, 10**12)
    assert lru.get("a") == 1 and lru.get("b") == 2
    lru.put("c", 3, 1)
    assert "a" not in lru and lru.get("c") == 3 and lru.bytes == 10**12 + 1
