#!/usr/bin/env bash
# The committed H200 captures and overhead figures, as made on the GPU machine
# (captures/README.md has the device-tool command that ran this).
#
#   captures/record_h200.sh OUTDIR
#
# Run from the repository root with rmtrace importable by python3.  Ordinary
# workloads only: queries, plain allocations, one small kernel per stream.
set -u
OUT=${1:?usage: captures/record_h200.sh OUTDIR}
RMTRACE=(python3 -m rmtrace.cli.main)
BIN=$(mktemp -d)
{ cat /proc/driver/nvidia/version; nvidia-smi -L; uname -a; nproc; } 2>&1
gcc -O2 -Wall -o "$BIN/cuda_streams" captures/programs/cuda_streams.c -ldl || exit 1
"$BIN/cuda_streams" || echo "cuda_streams alone failed: $?"

TORCH='import torch; x = torch.ones(1 << 20, device="cuda"); torch.cuda.synchronize(); print("torch ok", x.sum().item())'
record() {
    local name=$1; shift
    echo "== $name: $*"
    local t0=$EPOCHREALTIME
    "${RMTRACE[@]}" record -o "$OUT/$name.trace" -- "$@"
    echo "exit status $? after $(awk "BEGIN{print $EPOCHREALTIME - $t0}") s"
    "${RMTRACE[@]}" info "$OUT/$name.trace"
}
record nvidia-smi-q nvidia-smi -q
record torch-one-kernel python3 -c "$TORCH"
record cuda-streams "$BIN/cuda_streams"
record cuda-streams-3x-sequential sh -c "$BIN/cuda_streams && $BIN/cuda_streams && $BIN/cuda_streams"
record cuda-streams-2-together sh -c "$BIN/cuda_streams & $BIN/cuda_streams & wait"
echo "== overhead"
python3 bench/record_overhead.py --real --rounds 9 --calls 20000 --e2e-rounds 7 \
    -o "$OUT/record_overhead-h200.md" --e2e "$BIN/cuda_streams"
