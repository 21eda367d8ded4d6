#!/usr/bin/env bash
# The committed replays of the H200 captures against the real driver, as made on
# the GPU machine (captures/replays/README.md has the device-tool command that
# ran this).  Only what the safety table allows reaches the driver, and every
# client process frees what it allocated.
#
#   captures/replays/run_h200.sh OUTDIR [BENCH_ROUNDS]
#
# Run from the repository root with rmtrace importable by python3.
set -u
OUT=${1:?usage: captures/replays/run_h200.sh OUTDIR [BENCH_ROUNDS]}
ROUNDS=${2:-3}
mkdir -p "$OUT"
RMTRACE=(python3 -m rmtrace.cli.main)
BIN=$(mktemp -d)
{ cat /proc/driver/nvidia/version; nvidia-smi -L; uname -a; nproc
  nvidia-smi --query-compute-apps=pid,process_name --format=csv; } 2>&1
gcc -O2 -Wall -o "$BIN/cuda_streams" captures/programs/cuda_streams.c -ldl || exit 1
TORCH='import torch; x = torch.ones(1 << 20, device="cuda"); torch.cuda.synchronize(); print("torch ok", x.sum().item())'
# The first GPU work after an idle spell pays for waking the GPU up (UVM_REGISTER_GPU and the channel
# allocations take up to twice as long): one unrecorded run first, so that no replay below pays it.
"$BIN/cuda_streams" > /dev/null || exit 1

replay() {  # NAME ARGS...: rmtrace replay ARGS -o OUT/NAME.trace, its output in OUT/NAME.txt
    local name=$1; shift
    local t0=$EPOCHREALTIME
    echo "\$ rmtrace replay $* -o captures/replays/$name.trace" > "$OUT/$name.txt"
    "${RMTRACE[@]}" replay "$@" -o "$OUT/$name.trace" >> "$OUT/$name.txt" 2>&1
    local status=$?
    echo "== $name: exit status $status after $(awk "BEGIN{print $EPOCHREALTIME - $t0}") s"
    sed -i "s|$OUT/|captures/replays/|g" "$OUT/$name.txt"
    cat "$OUT/$name.txt"
    python3 - "$OUT/$name.trace" "$OUT/$name.clients.json" <<'PY'
import json, sys
from rmtrace.record import MarkOp, Role, Source
from rmtrace.trace import TraceReader
with TraceReader(sys.argv[1]) as reader:  # the per-client tables the nvidia target wrote into its trace
    bodies = [json.loads(r.buffer(Role.TEXT).data) for r in reader if r.source == Source.MARK and r.op == MarkOp.NOTE]
tables = [b["client_table"] for b in bodies if "client_table" in b]
if tables:
    json.dump(tables, open(sys.argv[2], "w"), indent=1)
PY
}
for capture in cuda-streams torch-one-kernel nvidia-smi-q cuda-streams-3x-sequential cuda-streams-2-together; do
    replay "$capture.nvidia" "captures/$capture.trace" --against nvidia
done
replay cuda-streams.sequential-3.nvidia captures/cuda-streams.trace --against nvidia --repeat 3 --schedule sequential
replay cuda-streams.concurrent-2.nvidia captures/cuda-streams.trace --against nvidia --repeat 2 --schedule concurrent
replay cuda-streams.concurrent-2.oracle-2-together.nvidia captures/cuda-streams.trace --against nvidia --repeat 2 \
    --schedule concurrent --oracle captures/cuda-streams-2-together.trace
replay cuda-streams-2-together.concurrent.nvidia captures/cuda-streams-2-together.trace --against nvidia --schedule concurrent
replay cuda-streams.simultaneous-4.nvidia captures/cuda-streams.trace --against nvidia --schedule simultaneous --streams 4
replay torch-one-kernel.sequential-3.nvidia captures/torch-one-kernel.trace --against nvidia --repeat 3 --schedule sequential
replay torch-one-kernel.concurrent-2.nvidia captures/torch-one-kernel.trace --against nvidia --repeat 2 --schedule concurrent
for capture in cuda-streams torch-one-kernel nvidia-smi-q; do
    replay "$capture.model-fixed.oracle-nvidia" "captures/$capture.trace" --against model:fixed --oracle nvidia
done
replay cuda-streams.sequential-3.model-fixed.oracle-nvidia captures/cuda-streams.trace --against model:fixed \
    --oracle nvidia --repeat 3 --schedule sequential
replay cuda-streams.concurrent-2.model-fixed.oracle-nvidia captures/cuda-streams.trace --against model:fixed \
    --oracle nvidia --repeat 2 --schedule concurrent
replay cuda-streams.simultaneous-4.model-fixed.oracle-nvidia captures/cuda-streams.trace --against model:fixed \
    --oracle nvidia --schedule simultaneous --streams 4
echo "== bench"
python3 bench/replay_nvidia.py --program "cuda-streams=$BIN/cuda_streams" \
    --program "torch-one-kernel=python3 -c '$TORCH'" --rounds "$ROUNDS" -o "$OUT/replay_nvidia-h200.md"
nvidia-smi --query-compute-apps=pid,process_name --format=csv 2>&1
