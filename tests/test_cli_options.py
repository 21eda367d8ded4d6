"""An option that means nothing is refused (exit 2) with what it may be, never silently run."""

from __future__ import annotations

import pytest

from rmtrace.cli.main import main
from rmtrace.exitcodes import ExitCode


def refused(capsys, argv: list[str]) -> str:
    """stderr of a command that must stop with a usage error: argparse's own, or rmtrace's."""
    try:
        status = main(argv)
    except SystemExit as exc:
        status = exc.code
    out, err = capsys.readouterr()
    assert status == ExitCode.ERROR, (argv, out, err)
    assert "Traceback" not in err and not out.strip(), (argv, out)
    return err


@pytest.mark.parametrize("argv, message", [
    (["show", "nvidia-smi-q", "--limit", "-1"], "argument --limit: must be 0 or more, not -1"),
    (["show", "nvidia-smi-q", "--limit", "many"], "argument --limit: not a number: 'many'"),
    (["show", "nvidia-smi-q", "--from", "soon"], "argument --from: not a duration: 'soon'"),
    (["show", "nvidia-smi-q", "--to=-2ms"], "argument --to: must not be negative"),
    (["show", "nvidia-smi-q", "--source", "rm,bogus"], "unknown source 'bogus' (one of: rm (1), uvm (2)"),
    (["show", "nvidia-smi-q", "--source", "99"], "unknown source '99'"),
    (["show", "nvidia-smi-q", "--phase", "entry"], "unknown phase 'entry' (one of: enter (1), exit (2)"),
    (["show", "nvidia-smi-q", "--pid", "init"], "not a list of numbers: 'init'"),
    (["show", "nvidia-smi-q", "--status", "NV_ERR_BOGUS"], "--status: nothing is called 'NV_ERR_BOGUS'"),
    (["wedges", "nvidia-smi-q", "--slow=-1s"], "argument --slow: must not be negative, not '-1s'"),
    (["wedges", "nvidia-smi-q", "--slow", "0"], "argument --slow: must be longer than zero, not '0'"),
    (["record", "-o", "x.trace", "--duration", "0", "--", "true"], "argument --duration: must be longer than zero"),
    (["record", "-o", "x.trace", "--duration=-5s", "--", "true"], "argument --duration: must not be negative"),
    (["replay", "nvidia-smi-q", "--repeat", "0"], "argument --repeat: must be 1 or more, not 0"),
    (["replay", "nvidia-smi-q", "--runs", "0"], "argument --runs: must be 1 or more, not 0"),
    (["replay", "nvidia-smi-q", "--streams", "0"], "argument --streams: must be 1 or more, not 0"),
    (["replay", "nvidia-smi-q", "--seed=-1"], "argument --seed: must be 0 or more, not -1"),
    (["replay", "nvidia-smi-q", "--timeout", "0s"], "argument --timeout: must be longer than zero"),
    (["replay", "nvidia-smi-q", "--timeout", "soon"], "argument --timeout: not a duration: 'soon'"),
    (["replay", "nvidia-smi-q", "--clients", "0"], "--clients takes client numbers such as 1,3 (c1 is 1)"),
    (["reduce", "nvidia-smi-q", "--repeat", "-2"], "argument --repeat: must be 0 or more, not -2"),
    (["profiles", "show", "580.142", "--control", "NV_NO_SUCH_CMD"], "no control named 'NV_NO_SUCH_CMD'"),
    (["show", "nvidia-smi-q", "--raw", "--failed", "-V"], "--raw prints records undecoded: --failed, -V need decoded"),
    (["info", "nvidia-smi-q", "--shipped"], "--shipped lists the shipped captures: give it no FILE"),
    (["replay", "nvidia-smi-q", "--seed", "7"], "--seed picks the chaos schedule's random choices; recorded makes"),
    (["replay", "nvidia-smi-q", "--allow-unsafe"], "--allow-unsafe lifts the real driver's safety table: give it "
                                                   "with --against nvidia or --oracle nvidia"),
    (["replay", "nvidia-smi-q", "--against", "bogus"], "unknown target 'bogus' (one of: model, unix, recorded"),
    (["replay", "nvidia-smi-q", "--schedule", "bogus"], "unknown schedule 'bogus' (one of: recorded, sequential"),
    (["replay", "nvidia-smi-q", "--clients", "9"], "no client 9: the trace has 1 (c1)"),
    (["show", "nvidia-smi-q", "--driver", "999.1"], "--driver 999.1: no such shipped profile; shipped: 535.288.01"),
    (["export", "nvidia-smi-q", "-f", "jsonl", "-o", "-", "--host", "h200"], "--host names the host of a parquet "
                                                                              "dataset's rows"),
    (["export", "nvidia-smi-q", "-f", "svg", "-o", "x"], "argument --format/-f: invalid choice: 'svg' (choose from"),
    (["record", "-o", "x.trace", "--backend", "ebpf", "--", "true"], "--backend ebpf: preload or kmod[:PATH]"),
    (["record", "-o", "x.trace", "--ring-size", "3", "--", "true"], "ring size 3 must be a power of two from 4096"),
    (["record", "-o", "x.trace", "--driver", "580.142", "--", "true"], "--driver names the kernel shim's driver: "
                                                                       "give it with --backend kmod"),
])
def test_meaningless_options_are_refused(capsys, tmp_path, monkeypatch, argv, message):
    monkeypatch.chdir(tmp_path)
    assert message in refused(capsys, argv)
    assert not list(tmp_path.iterdir())  # and nothing was written
