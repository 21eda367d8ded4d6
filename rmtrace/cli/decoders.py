"""rmtrace decoders: users' own decoders (from DWARF) and what is installed."""

from __future__ import annotations

import argparse

from rmtrace.errors import RmtraceError
from rmtrace.exitcodes import ExitCode

NAME = "decoders"
HELP = "add decoders for your own messages (from-dwarf), list the decoders in use"
DESCRIPTION = """\
rmtrace decodes RM, UVM, GSP and sema-service records from the driver profiles
it ships.  Your own messages (a host service's private structs, a test
module's) can be decoded too:

  rmtrace decoders from-dwarf my_service.ko --struct my_msg --source sema --op 0x40

reads struct my_msg from the object's DWARF (build it with -g) and saves a
decoder for SEMA records with op 0x40 in the user decoder directory
($RMTRACE_DECODER_DIR, else your config dir); every later run uses it.  With
several --struct, a buffer is decoded as the one whose size it has.  Packages
can add decoder tables through the 'rmtrace.decoders' entry point group
(docs/decoders.md).  'rmtrace decoders list' shows what is installed.
"""


def add_arguments(parser: argparse.ArgumentParser) -> None:
    sub = parser.add_subparsers(dest="action", metavar="ACTION")
    dwarf = sub.add_parser("from-dwarf", help="make a decoder from a struct in a debug-built object",
                           description="Read structs from an object file's DWARF and save a decoder for "
                                       "(source, op) in the user decoder directory.")
    dwarf.add_argument("object", metavar="MODULE.ko", help="an object with DWARF debug info (.ko, .o, .so)")
    dwarf.add_argument("--struct", dest="structs", action="append", required=True, metavar="NAME",
                       help="struct tag or typedef name (repeat: the buffer's size picks among them)")
    dwarf.add_argument("--source", required=True, help="record source: rm, uvm, gsp, sema, sys, mark")
    dwarf.add_argument("--op", required=True, help="operation number (0x40 or 64)")
    dwarf.add_argument("--name", help="the operation's name in output (default: the struct's name)")
    dwarf.add_argument("--force", action="store_true", help="replace a saved decoder of the same source and op")
    sub.add_parser("list", help="user decoders and plugins, and the shipped profiles",
                   description="List the user decoders, plugin tables and shipped driver profiles.")


def _source(text: str) -> int:
    from rmtrace.record import Source
    try:
        return int(Source[text.upper()])
    except KeyError:
        raise RmtraceError(f"unknown source {text!r} (one of: {', '.join(s.name.lower() for s in Source)})") from None


def _op(text: str) -> int:
    try:
        return int(text, 0)
    except ValueError:
        raise RmtraceError(f"--op: not a number: {text!r}") from None


def _from_dwarf(args: argparse.Namespace) -> int:
    from rmtrace.cli.common import output_path
    from rmtrace.decoders.user import decoder_dir, from_dwarf, save
    from rmtrace.record import Source, enum_name
    decoder = from_dwarf(args.object, args.structs, _source(args.source), _op(args.op), args.name)
    output_path(str(decoder_dir() / decoder.path_name), force=args.force, inputs=(args.object,))
    path = save(decoder)
    sizes = ", ".join(f"{s} ({decoder.layouts[s].size} bytes)" for s in decoder.structs)
    print(f"{enum_name(Source, decoder.source)} op {decoder.op:#x} is now decoded as {decoder.name}: {sizes}")
    print(f"saved {path}")
    return ExitCode.OK


def _list(args: argparse.Namespace) -> int:
    from rmtrace.decoders.profiles import available_profiles, load_profile
    from rmtrace.decoders.user import ENTRY_POINT_GROUP, UserDecoder, decoder_dir, load_all, plugin_errors
    from rmtrace.record import Source, enum_name
    print(f"user decoders in {decoder_dir()}:")
    found = False
    for path, decoder in load_all():
        found = True
        if isinstance(decoder, UserDecoder):
            print(f"  {enum_name(Source, decoder.source)} op {decoder.op:#x}  {decoder.name}: "
                  f"{', '.join(decoder.structs)}  (from {decoder.origin})")
        else:
            print(f"  {path.name}: not loaded: {decoder}")
    if not found:
        print("  none")
    from importlib import metadata
    plugins = list(metadata.entry_points(group=ENTRY_POINT_GROUP))
    print(f"plugins ({ENTRY_POINT_GROUP} entry points): " + (", ".join(f"{e.name} = {e.value}" for e in plugins)
                                                           or "none"))
    shipped = available_profiles()
    for error in plugin_errors(load_profile(shipped[-1])) if plugins else ():
        print(f"  {error}")
    print(f"driver profiles: {', '.join(shipped)}")
    return ExitCode.OK


ACTIONS = {"from-dwarf": _from_dwarf, "list": _list}


def run(args: argparse.Namespace) -> int:
    action = ACTIONS.get(args.action)
    if action is None:
        raise RmtraceError("say what to do: 'rmtrace decoders from-dwarf ...' or 'rmtrace decoders list'")
    return action(args)
