"""The garbage collector held off while many long-lived objects are made (a fold, a model's load, a redraw)."""

from __future__ import annotations

import contextlib
import gc
from collections.abc import Iterator


@contextlib.contextmanager
def young_collections() -> Iterator[None]:
    """No automatic collection runs meanwhile, in any thread (the switch is the process's); a user that
    leaves cycles behind collects the young generations itself (``rmtrace.columns.fold``'s ``_blocks``, after each block), and one
    that makes none (a model's load, the TUI's redraw) collects nothing.  The fold makes millions of
    objects that live as long as the model; each full collection walks them all again, a fifth of the
    fold's time, while the cycles a decode leaves are young when they die.  Nested or overlapping uses
    leave the collector on at the end: the first to switch it off is the one that switches it on."""
    was = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was:
            gc.enable()
