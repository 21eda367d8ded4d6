"""Where columns live: growing arrays in memory, or ``.npy`` files that are memory-mapped once written.

Both kinds take rows at the end (``append``), rewrite rows already there
(``patch``: a call that was open gets its exit) and give the rows so far
(``view``).  ``FileColumns`` writes with plain file writes, so the rows it
holds are in the page cache, not in the process; once ``finish``\\ ed, its
columns are memory-mapped read-only (``np.load(mmap_mode="r")``), and a
reader touches only the pages it reads.
"""

from __future__ import annotations

import mmap
import os
from pathlib import Path

import numpy as np

NPY_HEADER = 128
"""Bytes of the ``.npy`` header FileColumns writes: room for any shape, so it is rewritten in place."""


class MemoryColumns:
    """Columns of one length in memory, grown by doubling.  Their room is ``np.zeros``: pages the kernel
    maps when they are first written, so room not yet used costs address space, not memory."""

    def __init__(self, dtypes: dict[str, str], capacity: int = 4096) -> None:
        self.n = 0
        self._data = {name: np.zeros(capacity, dtype=dtype) for name, dtype in dtypes.items()}

    def append(self, values: dict[str, np.ndarray]) -> None:
        count = len(next(iter(values.values())))
        need = self.n + count
        capacity = len(next(iter(self._data.values())))
        if need > capacity:
            grown = max(need, capacity * 2)
            for name, column in self._data.items():
                bigger = np.zeros(grown, dtype=column.dtype)
                bigger[:self.n] = column[:self.n]
                self._data[name] = bigger
        for name, column in self._data.items():
            column[self.n:need] = values[name]
        self.n = need

    def patch(self, rows: np.ndarray, values: dict[str, np.ndarray]) -> None:
        for name, value in values.items():
            self._data[name][rows] = value

    def view(self) -> dict[str, np.ndarray]:
        return {name: column[:self.n] for name, column in self._data.items()}


class FileColumns:
    """Columns of one length as ``directory/NAME.npy`` files, written as rows come."""

    def __init__(self, directory: Path, dtypes: dict[str, str]) -> None:
        self.directory = directory
        self.n = 0
        self.dtypes = {name: np.dtype(dtype) for name, dtype in dtypes.items()}
        self._files = {}
        for name, dtype in self.dtypes.items():
            f = open(directory / f"{name}.npy", "wb")  # noqa: SIM115 -- open until finish()
            f.write(npy_header(dtype, 0))
            self._files[name] = f

    def append(self, values: dict[str, np.ndarray]) -> None:
        for name, f in self._files.items():
            f.write(np.ascontiguousarray(values[name], dtype=self.dtypes[name]).tobytes())
        self.n += len(next(iter(values.values())))

    def patch(self, rows: np.ndarray, values: dict[str, np.ndarray]) -> None:
        for name, value in values.items():
            f, dtype = self._files[name], self.dtypes[name]
            f.flush()
            data = np.broadcast_to(np.asarray(value, dtype=dtype), rows.shape)
            for row, item in zip(rows.tolist(), data):
                os.pwrite(f.fileno(), item.tobytes(), NPY_HEADER + row * dtype.itemsize)

    def view(self) -> dict[str, np.ndarray]:
        """The rows written so far, mapped read-only."""
        out = {}
        for name, f in self._files.items():
            f.flush()
            dtype = self.dtypes[name]
            out[name] = (np.memmap(f.name, dtype=dtype, mode="r", offset=NPY_HEADER, shape=(self.n,)) if self.n
                         else np.zeros(0, dtype=dtype))
        return out

    def finish(self) -> dict[str, np.ndarray]:
        """Write the headers, close the files and map them."""
        for name, f in self._files.items():
            f.seek(0)
            f.write(npy_header(self.dtypes[name], self.n))
            f.close()
        self._files = {}
        return open_columns(self.directory, list(self.dtypes))

    def abandon(self) -> None:
        for f in self._files.values():
            f.close()
        self._files = {}


def npy_header(dtype: np.dtype, rows: int) -> bytes:
    """A version 1.0 ``.npy`` header for ``rows`` values of ``dtype``, exactly ``NPY_HEADER`` bytes long."""
    text = repr({"descr": np.lib.format.dtype_to_descr(dtype), "fortran_order": False, "shape": (rows,)})
    body = text.encode("latin1")
    room = NPY_HEADER - 10 - len(body) - 1
    assert room >= 0
    return b"\x93NUMPY\x01\x00" + (NPY_HEADER - 10).to_bytes(2, "little") + body + b" " * room + b"\n"


def open_columns(directory: Path, names: list[str]) -> dict[str, np.ndarray]:
    """The columns ``names`` of ``directory``, memory-mapped read-only."""
    return {name: _load(directory / f"{name}.npy") for name in names}


FAULT_AROUND_ROWS = 65_536
"""Rows before a block whose pages are let go again after it: a read fault on a mapped file maps the pages
around it that the page cache holds (the kernel's fault-around, 64 KiB aligned in the address space), which
puts back pages of the rows before (of a column of bytes, up to 65,536 rows), let go once already; without
this, a third of the table's columns came back a block at a time and the process held them to the end."""


def release_rows(column: np.ndarray, start: int, end: int) -> None:
    """Let go of the pages of items [start, end) of ``column`` when it is mapped from a file (a whole
    ``np.load(mmap_mode="r")`` array, not a slice of one): the kernel keeps them in its page cache, the
    process no longer holds them (a pass over mapped columns stays small).  Nothing for an array in memory."""
    held = getattr(column, "_mmap", None)
    if held is None or end <= start:
        return
    size = column.dtype.itemsize
    base = column.offset % mmap.ALLOCATIONGRANULARITY if isinstance(column, np.memmap) else 0
    first = (base + start * size) // mmap.PAGESIZE * mmap.PAGESIZE
    last = (base + end * size) // mmap.PAGESIZE * mmap.PAGESIZE
    if last > first:
        held.madvise(mmap.MADV_DONTNEED, first, last - first)


def _load(path: Path) -> np.ndarray:
    try:
        return np.load(path, mmap_mode="r")
    except ValueError:  # an empty column: nothing to map
        return np.load(path)
