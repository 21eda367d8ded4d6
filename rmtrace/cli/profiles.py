"""rmtrace profiles: the shipped driver profiles, how a trace picks one, and making new ones."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

from rmtrace.cli.common import add_json_argument, output_path
from rmtrace.errors import RmtraceError
from rmtrace.exitcodes import ExitCode

if TYPE_CHECKING:  # each action imports what it uses: the profile generator alone costs more than --help
    from rmtrace.decoders.profiles.model import DriverProfile, Layout

NAME = "profiles"
HELP = "driver profiles: list, show, diff, select, build from NVIDIA's headers"
DESCRIPTION = """\
A driver profile holds the numbers (RM escapes, classes, control commands, UVM
ioctls, GSP RPC functions and events, status codes) and the struct layouts of
one NVIDIA driver version; decoders are built from it.  A trace's recorded
driver version picks the profile (the nearest of its branch when that exact
version is not shipped; --driver overrides).

  rmtrace profiles list
  rmtrace profiles show 580.142 --control NV2080_CTRL_CMD_GPU_GET_INFO_V2
  rmtrace profiles diff 570.211.01 575.64.05
  rmtrace profiles select 580.159.04
  rmtrace profiles build --from ~/open-gpu-kernel-modules --tag 580.142
"""


def add_arguments(parser: argparse.ArgumentParser) -> None:
    sub = parser.add_subparsers(dest="action", metavar="ACTION", required=True)
    add_json_argument(sub.add_parser("list", help="shipped profiles and how much each holds"),
                      "a profile object per shipped profile")

    show = sub.add_parser("show", help="facts of one profile (a summary, or the items asked for)")
    show.add_argument("version", metavar="VERSION", help="a shipped profile (see 'list')")
    show.add_argument("--control", metavar="NAME|0xID", help="a control command and its params layout")
    show.add_argument("--class", dest="cls", metavar="NAME|0xID", help="a class and its alloc params layout")
    show.add_argument("--layout", metavar="NAME", help="a struct or union layout")
    show.add_argument("--uvm", metavar="NAME|ID", help="a UVM ioctl and its params layout")
    add_json_argument(show, "a profile object (the summary) or a profile_entry object (the items asked for)")

    diff = sub.add_parser("diff", help="what moved between two profiles (renumbered, resized, relaid-out)")
    diff.add_argument("a", metavar="A", help="the older profile")
    diff.add_argument("b", metavar="B", help="the newer profile")
    add_json_argument(diff, "one profile_diff object")

    select = sub.add_parser("select", help="which profile a trace recorded with DRIVER_VERSION is decoded with")
    select.add_argument("driver_version", metavar="DRIVER_VERSION")
    select.add_argument("--driver", metavar="VERSION", help="the override a user would pass to other commands")

    build = sub.add_parser("build", help="generate a profile from an open-gpu-kernel-modules tree (needs gcc)")
    build.add_argument("--from", dest="tree", required=True, metavar="TREE",
                       help="an extracted open-gpu-kernel-modules tree, or a git clone of it with --tag")
    build.add_argument("--tag", metavar="TAG", help="extract this release tag from the git clone TREE first")
    build.add_argument("--version", metavar="VERSION", help="the driver version, if the tree has no version.mk")
    build.add_argument("--out", metavar="FILE", help="where to write the profile (default: VERSION.json.zst here)")
    build.add_argument("--force", action="store_true", help="overwrite an existing --out")


# -- list ----------------------------------------------------------------------------------------

def counts(profile: DriverProfile) -> dict[str, int]:
    return {"escapes": len(profile.escapes), "classes": len(profile.classes), "controls": len(profile.controls),
            "uvm": len(profile.uvm), "rpc_functions": len(profile.gsp_functions), "rpc_events": len(profile.gsp_events),
            "status": len(profile.status), "layouts": len(profile.layouts), "engine_types": len(profile.engine_types),
            "categories": len(profile.categories)}


def _profile_object(profile: DriverProfile) -> dict[str, Any]:
    from rmtrace import jsonschema
    return jsonschema.profile(profile.version, profile.branch, counts(profile), profile.constants)


def _list(args: argparse.Namespace) -> int:
    from rmtrace import jsonschema
    from rmtrace.decoders.profiles import available_profiles, load_profile
    profiles = [load_profile(v) for v in available_profiles()]
    if args.json:
        jsonschema.write_lines(map(_profile_object, profiles), sys.stdout)
        return ExitCode.OK
    rows = {p.version: counts(p) for p in profiles}
    columns = list(next(iter(rows.values())))
    print(f"{'version':<12}" + "".join(f"{c.replace('_', ' '):>15}" for c in columns))
    for version, row in rows.items():
        print(f"{version:<12}" + "".join(f"{row[c]:>15}" for c in columns))
    return ExitCode.OK


# -- show ----------------------------------------------------------------------------------------

SINGULAR = {"controls": "control", "classes": "class", "uvm": "UVM ioctl"}


def _number(profile: DriverProfile, table: str, text: str) -> int:
    """A number given as a name (aliases too) or as 0x.../decimal; RmtraceError if unknown."""
    number = profile.lookup(table, text)
    if number is None:
        try:
            number = int(text, 0)
        except ValueError:
            raise RmtraceError(f"profile {profile.version} has no {SINGULAR[table]} named {text!r}") from None
    if number not in getattr(profile, table):
        raise RmtraceError(f"profile {profile.version} has no {table} entry {text}")
    return number


def layout_lines(layout: Layout, indent: str = "  ") -> list[str]:
    lines = [f"{layout.kind} {layout.name}  ({layout.size} bytes)"]
    for f in layout.fields:
        bits = (f"  bits {f.bit_offset}..{f.bit_offset + f.bit_size - 1}"
                if f.bit_offset is not None and f.bit_size is not None else "")  # a bitfield has both
        lines.append(f"{indent}@{f.offset:<5} {f.size:>5}  {f.name or '(anonymous)':<32} {f.type}  [{f.kind}]{bits}")
    return lines


def _show_item(profile: DriverProfile, args: argparse.Namespace) -> dict:
    from dataclasses import asdict
    """The items asked for, as JSON-ready data."""
    out: dict = {}
    layouts: list[str] = []
    if args.control:
        control = profile.controls[_number(profile, "controls", args.control)]
        out["control"] = {**asdict(control), "hex": f"{control.cmd:#010x}", "class": f"{control.cls:#06x}",
                          "category": f"{control.category:#04x}", "index": f"{control.index:#04x}",
                          "aliases": sorted(n for n, v in profile.aliases.get("controls", {}).items() if v == control.cmd),
                          "embedded_pointers": [asdict(p) for p in profile.embedded_pointers(control.cmd)]}
        if control.params:  # a control without params has no layout to show
            layouts.append(control.params)
    if args.cls:
        info = profile.classes[_number(profile, "classes", args.cls)]
        out["class"] = {**asdict(info), "hex": f"{info.id:#06x}",
                        "aliases": sorted(n for n, v in profile.aliases.get("classes", {}).items() if v == info.id)}
        if info.alloc_params:
            layouts.append(info.alloc_params)
    if args.uvm:
        cmd = profile.uvm[_number(profile, "uvm", args.uvm)]
        out["uvm"] = asdict(cmd)
        if cmd.params:
            layouts.append(cmd.params)
    if args.layout:
        if args.layout not in profile.layouts:
            raise RmtraceError(f"profile {profile.version} has no layout {args.layout!r}")
        layouts.append(args.layout)
    out["layouts"] = {name: asdict(profile.layouts[name]) for name in layouts if name in profile.layouts}
    return out


def _show(args: argparse.Namespace) -> int:
    from rmtrace import jsonschema
    from rmtrace.decoders.profiles import load_profile
    profile = load_profile(args.version)
    if not (args.control or args.cls or args.layout or args.uvm):
        if args.json:
            jsonschema.write_lines([_profile_object(profile)], sys.stdout)
            return ExitCode.OK
        print(f"profile {profile.version} (branch {profile.branch})")
        for key, value in counts(profile).items():
            print(f"  {key:<14} {value}")
        print("constants")
        for key, value in profile.constants.items():
            print(f"  {key:<34} {value:#x} ({value})")
        return ExitCode.OK
    data = _show_item(profile, args)
    if args.json:
        jsonschema.write_lines([jsonschema.profile_entry(profile.version, data)], sys.stdout)
        return ExitCode.OK
    for key in ("control", "class", "uvm"):
        if key in data:
            item = data[key]
            print(f"{key} " + "  ".join(f"{k}={v}" for k, v in item.items()
                                        if k not in ("embedded_pointers", "cmd", "id")))
            for ptr in item.get("embedded_pointers", []):
                print(f"  pointer {ptr['name']}@{ptr['offset']}: count u{ptr['count_size'] * 8}@{ptr['count_offset']}"
                      f" x {ptr['elem_size']} bytes")
    for name in data["layouts"]:
        print("\n".join(layout_lines(profile.layouts[name])))
    return ExitCode.OK


# -- diff ----------------------------------------------------------------------------------------

DIFF_LABELS = {"gsp_functions": "gsp function", "gsp_events": "gsp event", "controls": "control",
               "escapes": "escape", "uvm": "uvm ioctl", "classes": "class", "engine_types": "engine type"}


def diff_lines(d: dict) -> list[str]:
    lines = [f"profile {d['from']} -> {d['to']}"]
    s = d["status"]
    for code, old, new in s["meaning_changed"]:
        lines.append(f"status {code:#x} changed meaning: {old} -> {new}")
    lines += [f"status added {name} = {code:#x}" for name, code in s["added"]]
    lines += [f"status removed {name} (was {code:#x})" for name, code in s["removed"]]
    lines += [f"status renumbered {name}: {old:#x} -> {new:#x}" for name, old, new in s["renumbered"]]
    for table, label in DIFF_LABELS.items():
        t = d[table]
        lines += [f"{label} renumbered {name}: {old:#x} -> {new:#x}" for name, old, new in t["renumbered"]]
        lines += [f"{label} number {n:#x} reused: {old} -> {new}" for n, old, new in t["reused"]]
        lines += [f"{label} resized {name}: {old} -> {new} bytes" for name, old, new in t.get("resized", [])]
        if t["added"]:
            lines.append(f"{label} added ({len(t['added'])}): {', '.join(t['added'][:12])}"
                         + (" ..." if len(t["added"]) > 12 else ""))
        if t["removed"]:
            lines.append(f"{label} removed ({len(t['removed'])}): {', '.join(t['removed'][:12])}"
                         + (" ..." if len(t["removed"]) > 12 else ""))
    p = d["gsp_payloads"]
    lines += [f"gsp payload of {name}: {old} -> {new}" for name, old, new in p["struct_changed"]]
    for what, change in {**p["same_struct_new_layout"], **d["layouts"]}.items():
        lines.append(f"layout changed {what}: {change['size'][0]} -> {change['size'][1]} bytes"
                     + (f"; added {', '.join(change['added'])}" if change["added"] else "")
                     + (f"; removed {', '.join(change['removed'])}" if change["removed"] else "")
                     + "".join(f"; {f} @{o[0]}/{o[1]}B -> @{n[0]}/{n[1]}B"
                               for f, (o, n) in sorted(change["moved_or_resized"].items())))
    lines += [f"constant {k}: {old} -> {new}" for k, (old, new) in d["constants"].items()]
    if len(lines) == 1:
        lines.append("no differences")
    return lines


def _diff(args: argparse.Namespace) -> int:
    from rmtrace import jsonschema
    from rmtrace.decoders.profiles import load_profile
    from rmtrace.decoders.profiles.diff import diff_profiles
    d = diff_profiles(load_profile(args.a), load_profile(args.b))
    if args.json:
        jsonschema.write_lines([jsonschema.profile_diff(d)], sys.stdout)
    else:
        print("\n".join(diff_lines(d)))
    return ExitCode.OK


# -- select and build ----------------------------------------------------------------------------

def _select(args: argparse.Namespace) -> int:
    from rmtrace.decoders.profiles import select_profile
    profile, warning = select_profile(args.driver_version, args.driver)
    print(f"driver {args.driver_version}: profile {profile.version}")
    if warning:
        print(f"warning: {warning}")
    return ExitCode.OK


def _tree_files(tree: str, out: str | None) -> tuple[str, ...]:
    """--out when it names a file in TREE: every file there is an input of the build (a header, version.mk)."""
    return (out,) if out and Path(tree).resolve() in Path(out).resolve().parents else ()


def _build(args: argparse.Namespace) -> int:
    import tempfile

    from rmtrace.decoders.profiles.generate import extract_tag, timed_build
    from rmtrace.decoders.profiles.serial import encode
    inputs = _tree_files(args.tree, args.out)
    if args.out:
        output_path(args.out, force=args.force, inputs=inputs)  # refused before minutes of building, not after
    with tempfile.TemporaryDirectory(prefix="rmtrace-ogkm-") as tmp:
        tree = extract_tag(args.tree, args.tag, tmp) if args.tag else Path(args.tree)
        profile, seconds = timed_build(tree, args.version or (args.tag if args.tag else None))
    out = Path(output_path(args.out or f"{profile.version}.json.zst", force=args.force, inputs=inputs))
    blob = encode(profile)
    try:
        out.write_bytes(blob)
    except OSError as exc:
        raise RmtraceError(f"cannot write {out}: {exc.strerror}") from None
    c = counts(profile)
    print(f"profile {profile.version}: {c['escapes']} escapes, {c['classes']} classes, {c['controls']} controls, "
          f"{c['uvm']} UVM ioctls, {c['rpc_functions']} RPC functions, {c['rpc_events']} events, "
          f"{c['layouts']} layouts; {len(blob):,} bytes in {out} ({seconds:.1f}s)")
    return ExitCode.OK


ACTIONS = {"list": _list, "show": _show, "diff": _diff, "select": _select, "build": _build}


def run(args: argparse.Namespace) -> int:
    return ACTIONS[args.action](args)
