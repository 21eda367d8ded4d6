"""What moved between two driver profiles: the traps a decoder keyed by the wrong branch falls into.

``diff_profiles(a, b)`` returns plain data (JSON-ready), one section per kind
of change; every list is sorted so the output is stable:

* ``status``: codes added, removed, renumbered, and codes whose *meaning*
  changed (same number, another name: 0x8B in 590 vs 595);
* ``gsp_functions`` / ``gsp_events``: renumbered names, reused numbers, added, removed;
* ``gsp_payloads``: RPCs whose payload struct changed version, or kept its
  name and changed layout (``rpc_gsp_rm_control_v03_00`` 570 -> 575);
* ``controls``: renumbered, resized params, added, removed;
* ``escapes``, ``uvm``, ``classes``: renumbered, resized, added, removed;
* ``engine_types``: renumbered, reused (550's RESERVED34 is 570's COPY10), added, removed;
* ``layouts``: the escape, alloc, UVM and GSP structs whose layout changed;
* ``constants``: values that differ.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

from rmtrace.decoders.profiles.model import DriverProfile, Layout


def _named(p: DriverProfile, table: str) -> dict[str, int]:
    """Every name of a table, the other names the headers give a number included."""
    names = dict(p.aliases.get(table, {}))
    names.update({_name(v): k for k, v in getattr(p, table).items()})
    return names


def _numbers(a: DriverProfile, b: DriverProfile, table: str, size: Callable[[Any], object] | None = None) -> dict:
    """Name-keyed comparison of one number table: renumbered, reused, resized, added, removed."""
    ta, tb = getattr(a, table), getattr(b, table)
    na, nb = _named(a, table), _named(b, table)
    out = {
        "added": sorted(name for name in nb.keys() - na.keys()),
        "removed": sorted(name for name in na.keys() - nb.keys()),
        "renumbered": sorted([name, na[name], nb[name]] for name in na.keys() & nb.keys() if na[name] != nb[name]),
        # a number whose old name now means another number or nothing (not a mere change of
        # which of its names is canonical)
        "reused": sorted([n, _name(ta[n]), _name(tb[n])] for n in ta.keys() & tb.keys()
                         if _name(ta[n]) != _name(tb[n]) and nb.get(_name(ta[n])) != n),
    }
    if size is not None:
        out["resized"] = sorted([name, size(ta[na[name]]), size(tb[nb[name]])] for name in na.keys() & nb.keys()
                                if size(ta[na[name]]) != size(tb[nb[name]]))
    return out


def _name(value: Any) -> str:
    return value if isinstance(value, str) else value.name


def layout_changes(old: Layout, new: Layout) -> dict:
    """Fields added, removed, and moved or resized ([old offset, size], [new offset, size])."""
    fa = {f.name: f for f in old.fields}
    fb = {f.name: f for f in new.fields}
    return {
        "size": [old.size, new.size],
        "added": [f.name for f in new.fields if f.name not in fa],
        "removed": [f.name for f in old.fields if f.name not in fb],
        "moved_or_resized": {name: [[fa[name].offset, fa[name].size], [fb[name].offset, fb[name].size]]
                             for name in fa.keys() & fb.keys()
                             if (fa[name].offset, fa[name].size) != (fb[name].offset, fb[name].size)},
    }


def _layout_diffs(a: DriverProfile, b: DriverProfile, names: Iterable[str]) -> dict[str, dict]:
    out = {}
    for name in sorted(set(names)):
        la, lb = a.layouts.get(name), b.layouts.get(name)
        if la is not None and lb is not None and (la.size, la.fields) != (lb.size, lb.fields):
            out[name] = layout_changes(la, lb)
    return out


def _payloads(a: DriverProfile, b: DriverProfile) -> dict:
    """Per RPC name: payload struct renamed (new version) or same name, other layout."""
    versions, layouts = [], {}
    for table in ("gsp_functions", "gsp_events"):
        na, nb = _named(a, table), _named(b, table)
        for name in sorted(na.keys() & nb.keys()):
            pa, pb = a.gsp_payloads.get(na[name]), b.gsp_payloads.get(nb[name])
            if pa and pb and pa != pb:
                versions.append([name, pa, pb])
            elif pa and pb and (a.layouts[pa].size, a.layouts[pa].fields) != (b.layouts[pb].size, b.layouts[pb].fields):
                layouts[f"{name} ({pa})"] = layout_changes(a.layouts[pa], b.layouts[pb])
    return {"struct_changed": versions, "same_struct_new_layout": layouts}


def _key_layouts(p: DriverProfile) -> set[str]:
    names = {e.struct for e in p.escapes.values() if e.struct}
    names |= {c.alloc_params for c in p.classes.values() if c.alloc_params}
    names |= {u.params for u in p.uvm.values() if u.params}
    names |= {n for n in p.layouts if n.startswith(("GSP_", "msgq", "rpc_message_header"))}
    return names


def diff_profiles(a: DriverProfile, b: DriverProfile) -> dict:
    status_a, status_b = {n: c for c, n in a.status.items()}, {n: c for c, n in b.status.items()}
    return {
        "from": a.version,
        "to": b.version,
        "status": {
            "added": sorted([name, status_b[name]] for name in status_b.keys() - status_a.keys()),
            "removed": sorted([name, status_a[name]] for name in status_a.keys() - status_b.keys()),
            "renumbered": sorted([name, status_a[name], status_b[name]] for name in status_a.keys() & status_b.keys()
                                 if status_a[name] != status_b[name]),
            "meaning_changed": sorted([code, a.status[code], b.status[code]] for code in a.status.keys() & b.status.keys()
                                      if a.status[code] != b.status[code]),
        },
        "gsp_functions": _numbers(a, b, "gsp_functions"),
        "gsp_events": _numbers(a, b, "gsp_events"),
        "gsp_payloads": _payloads(a, b),
        "controls": _numbers(a, b, "controls", size=lambda c: c.size),
        "escapes": _numbers(a, b, "escapes", size=lambda e: e.size),
        "uvm": _numbers(a, b, "uvm", size=lambda u: u.size),
        "classes": _numbers(a, b, "classes"),
        "engine_types": _numbers(a, b, "engine_types"),
        "layouts": _layout_diffs(a, b, _key_layouts(a) & _key_layouts(b)),
        "constants": {k: [a.constants.get(k), b.constants.get(k)] for k in sorted(a.constants.keys() | b.constants.keys())
                      if a.constants.get(k) != b.constants.get(k)},
    }
