"""rmtrace model serve: the reference host-service model behind a Unix socket."""

from __future__ import annotations

import argparse

from rmtrace.exitcodes import ExitCode

NAME = "model"
HELP = "the reference host-service model: 'serve' it on a Unix socket for unix: replays"
DESCRIPTION = """\
rmtrace model serve --socket PATH [--legacy | --model NAME]

Runs the embedded host-service model as the replay protocol's reference
server (docs/replay-protocol.md): 'rmtrace replay FILE --against unix:PATH'
then gives the same outcome as '--against model'.  Each connection is one
replay with a fresh model.  Stop it with Ctrl-C.
"""


def add_arguments(parser: argparse.ArgumentParser) -> None:
    from rmtrace.replayer.model.policy import PRESETS  # only for this command: the replayer costs no other
    sub = parser.add_subparsers(dest="model_command", metavar="ACTION", required=True)
    serve = sub.add_parser("serve", help="serve the model on a Unix socket",
                           description="Serve the host-service model on a Unix socket until interrupted.")
    serve.add_argument("--socket", required=True, metavar="PATH", help="the socket to listen on")
    which = serve.add_mutually_exclusive_group()
    which.add_argument("--legacy", action="store_true", help="the unfixed service (model:legacy)")
    which.add_argument("--model", choices=sorted(PRESETS), help="a model preset (default fixed)")


def run(args: argparse.Namespace) -> int:
    import signal
    import threading

    from rmtrace.replayer.model.policy import policy
    from rmtrace.replayer.server import ModelServer
    chosen = policy("legacy" if args.legacy else args.model)
    server = ModelServer(args.socket, chosen)
    stop = threading.Event()
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, lambda *_: stop.set())
    print(f"serving model:{chosen.name} on {args.socket} ({chosen.summary})", flush=True)
    server.serve(stop)
    return ExitCode.OK
