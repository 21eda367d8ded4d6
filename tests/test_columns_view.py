"""StructView gives, member by member, what a construct parse gives: on the params layouts of every profile."""

from __future__ import annotations

import random
from collections.abc import Mapping
from typing import Any

import pytest
from rmtrace.decoders.context import context
from rmtrace.decoders.profiles import available_profiles, load_profile
from rmtrace.decoders.roles import Category, roles

from rmtrace.columns.view import StructView

SAMPLE = 30
"""Other params layouts checked per profile, besides the ones the fold reads (picked at random, seeded)."""


def same(view: StructView, parsed: Mapping[str, Any]) -> None:
    for name in view._members:
        got, want = view[name], parsed[name]
        if isinstance(got, StructView):
            same(got, want)
        else:
            assert got == want, name
        assert name in view
    # construct keeps its stream in a parse's "_io" when the parser was built without compiling (as it is
    # once another test has built that layout's parser first): not a member, and every decoder drops it
    assert list(view) == [k for k in parsed if not k.startswith("_")]
    assert len(view) == len(list(view))


@pytest.mark.parametrize("version", available_profiles())
def test_view_reads_what_construct_parses(version):
    profile = load_profile(version)
    defs = context(profile).defs
    r = roles(profile)
    read = {profile.controls[cmd].params for cmd in r.controls if cmd in profile.controls}
    read |= {info.alloc_params for cid, info in profile.classes.items()
             if r.category(cid) in (Category.CHANNEL, Category.TSG)}
    every = {c.params for c in profile.controls.values()} | {i.alloc_params for i in profile.classes.values()}
    others = sorted(every - read - {None})
    rng = random.Random(version)
    names = sorted(read - {None}) + rng.sample(others, min(SAMPLE, len(others)))
    for name in names:
        layout = defs.layout(name)
        if layout is None or layout.size == 0:
            continue
        data = rng.randbytes(layout.size)
        try:
            parsed, _ = defs.parse(name, data)
        except Exception:  # noqa: BLE001 -- a flexible member random bytes do not fit: nothing to compare
            continue
        same(StructView(defs, layout, data), parsed)
