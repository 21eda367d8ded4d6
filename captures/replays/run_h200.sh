#!/usr/bin/env bash
# The committed replays of the H200 captures against the real driver, as made on
# the GPU machine (captures/replays/README.md has the device-tool command that
# ran this).  Only what the safety table allows reaches the driver, and every
# client process frees what it allocated.
#
#   captures/replays/run_h200.sh OUTDIR [BENCH_ROUNDS [NAME...]]
#
# With NAMEs (e.g. cuda-streams.simultaneous-4.nvidia), only the replays of those names, and no
# bench: a re-run of some of the committed evidence.  Run from the repository root with rmtrace
# importable by python3.
set -u
OUT=${1:?usage: captures/replays/run_h200.sh OUTDIR [BENCH_ROUNDS [NAME...]]}
ROUNDS=${2:-3}
ONLY=" ${*:3} "
wanted() { [ "$ONLY" = "  " ] || [[ "$ONLY" == *" $1 "* ]]; }  # NAME: whether this run makes it
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
    wanted "$name" || return 0
    local t0=$EPOCHREALTIME
    echo "\$ rmtrace replay $* -o captures/replays/$name.trace" > "$OUT/$name.txt"
    "${RMTRACE[@]}" replay "$@" -o "$OUT/$name.trace" >> "$OUT/$name.txt" 2>&1
    local status=$?
    echo "== $name: exit status $status after $(awk "BEGIN{print $EPOCHREALTIME - $t0}") s"
    sed -i "s|$OUT/|captures/replays/|g" "$OUT/$name.txt"
    cat "$OUT/$name.txt"
    client_tables "$name"
}
client_tables() {  # NAME: OUT/NAME.clients.json from the replay's trace
    python3 - "$OUT/$1.trace" "$OUT/$1.clients.json" <<'PY'
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
# Cleanup on Ctrl-C and on a killed client, against the real driver: the client processes run in
# sessions of their own, so what is left of them is looked for by the executor's path.
compute_pids() { nvidia-smi --query-compute-apps=pid --format=csv,noheader 2>/dev/null | tr -d ' '; }
first_client() {  # REPLAY_PID: its first client process that the GPU lists (within 15 s), or nothing
    local deadline=$((SECONDS + 15)) pid
    while [ $SECONDS -lt $deadline ]; do
        for pid in $(compute_pids); do
            [ "$(ps -o ppid= -p "$pid" | tr -d ' ')" = "$1" ] && { echo "$pid"; return; }
        done
        sleep 0.1
    done
}
leftovers() {  # replaying processes alive, GPU compute processes listed
    echo "replaying processes alive: $(ps -eo args= | grep -c '[t]argets/nvidia/executor.py');" \
         "GPU compute processes: $(compute_pids | wc -l)"
}
interrupt() {  # NAME SIGNAL WHOM ARGS...: rmtrace replay ARGS; once a client holds the GPU, SIGNAL to WHOM
    local name=$1 sig=$2 whom=$3; shift 3
    wanted "$name" || return 0
    echo "\$ rmtrace replay $* -o captures/replays/$name.trace   # then SIG$sig to the $whom" > "$OUT/$name.txt"
    set -m  # job control: a background job ignores SIGINT without it, as a terminal's never does
    "${RMTRACE[@]}" replay "$@" -o "$OUT/$name.trace" >> "$OUT/$name.txt" 2>&1 &
    local replay_pid=$! client target before
    before=$(leftovers)
    client=$(first_client "$replay_pid")
    sleep 0.2
    target=$([ "$whom" = replay ] && echo "$replay_pid" || echo "$client")
    [ -n "$target" ] && kill -"$sig" "$target"
    wait "$replay_pid"
    local status=$?
    set +m
    { echo "(SIG$sig sent to the $whom, pid ${target:-none}, while its client process ${client:-none} held the GPU)"
      echo "exit status $status"; echo "before: $before"; sleep 1; echo "after: $(leftovers)"; } >> "$OUT/$name.txt"
    sed -i "s|$OUT/|captures/replays/|g" "$OUT/$name.txt"
    echo "== $name"; cat "$OUT/$name.txt"
    client_tables "$name"
}
interrupt cuda-streams.sequential-3.sigint.nvidia INT replay captures/cuda-streams.trace --against nvidia --repeat 3 \
    --schedule sequential
interrupt cuda-streams.sequential-2.client-killed.nvidia KILL client captures/cuda-streams.trace --against nvidia \
    --repeat 2 --schedule sequential
if [ "$ONLY" = "  " ]; then
    echo "== bench"
    python3 bench/replay_nvidia.py --program "cuda-streams=$BIN/cuda_streams" \
        --program "torch-one-kernel=python3 -c '$TORCH'" --rounds "$ROUNDS" -o "$OUT/replay_nvidia-h200.md"
fi
nvidia-smi --query-compute-apps=pid,process_name --format=csv 2>&1
