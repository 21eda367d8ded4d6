# What the H200 scripts (h200_shim_ab.sh, h200_cpu_kinds.sh, h200_fmt.sh) share; sourced, not run.

# build_shim TREE SO: the shim of source tree TREE (its kmod_shim/, built by its own shim_build) into SO.
build_shim() {
    python3 -c 'import sys; sys.path.insert(0, sys.argv[1]); import shim_build; from pathlib import Path
shim_build.build(Path(sys.argv[2]), source_dir=Path(sys.argv[1]))' "$1/kmod_shim" "$2"
}

# add_shims BIN NAME=TREE[:CFLAGS]...: each TREE's shim built (with CFLAGS added: `os=.:-Os`) into BIN/NAME.so and
# added to the SHIMS array (record_overhead.py's --shim NAME=SO), so that a variant is measured beside the change.
add_shims() {
    local bin=$1 spec name tree flags
    shift
    for spec in "$@"; do
        name=${spec%%=*}
        tree=${spec#*=}
        flags=
        case $tree in *:*) flags=${tree#*:}; tree=${tree%%:*} ;; esac
        CFLAGS="${CFLAGS:-} $flags" build_shim "$tree" "$bin/$name.so" || return 1
        SHIMS+=(--shim "$name=$bin/$name.so")
    done
}

# build_floor TREE N SO: TREE's shim built again as floor N of bench/shim_floor.c into SO: that file first on
# the compiler's line with -DRMTRACE_BENCH_FLOOR=N, then TREE's own sources, linked with
# --allow-multiple-definition so that the ioctl hook the library exports is the floor's (the first definition).
build_floor() {
    python3 -c 'import sys, subprocess; sys.path.insert(0, sys.argv[1]); import shim_build; from pathlib import Path
cmd = shim_build.compile_command(Path(sys.argv[3]), source_dir=Path(sys.argv[1]))
at = cmd.index("-o") + 2
cmd[at:at] = [sys.argv[4], f"-DRMTRACE_BENCH_FLOOR={sys.argv[2]}", "-Wl,--allow-multiple-definition"]
sys.exit(subprocess.run(cmd).returncode)' "$1/kmod_shim" "$2" "$3" "$(dirname "${BASH_SOURCE[0]}")/shim_floor.c"
}

# add_floors BIN TREE [N...]: TREE's shim built again as the floors N (default 1 2) of bench/shim_floor.c
# (floor-forward forwards every ioctl and does nothing else; floor-clock does a traced ioctl's state checks,
# call id and two timestamps and writes no record; floor-records writes its two records without buffers;
# between them, floor-begin begins each record (rec_init, rec_fast) and writes nothing, floor-ctl adds the ring
# control's stores but no header), added to SHIMS beside the shim itself.
add_floors() {
    local bin=$1 tree=$2 n name
    shift 2
    [ $# -gt 0 ] || set -- 1 2
    for n in "$@"; do
        name=floor-forward
        [ "$n" = 2 ] && name=floor-clock
        [ "$n" = 3 ] && name=floor-records
        [ "$n" = 4 ] && name=floor-begin
        [ "$n" = 5 ] && name=floor-ctl
        build_floor "$tree" "$n" "$bin/$name.so" || return 1
        SHIMS+=(--shim "$name=$bin/$name.so")
    done
}

# build_tools BIN BEFORE: the RM test program and BEFORE's shim (BIN/rmprog, BIN/before.so).
build_tools() {
    gcc -O2 -Wall -o "$1/rmprog" tests/c/rmprog.c -lpthread || return 1
    build_shim "$2" "$1/before.so"
}

# cpu_costs BIN OUT: a bare RM control pinned to each CPU (OUT/ioctl_by_cpu.txt; fields: CPU traced_ns T
# untraced_ns U ...), then sets FAST and SLOW (the cheapest and dearest CPU: which is which moves from
# machine to machine) and FASTSET (the other CPUs below the midpoint of the two).
cpu_costs() {
    for c in $(seq 0 $(($(nproc) - 1))); do
        echo "$c $(RMPROG_DEVICE_DIR=/dev taskset -c "$c" "$1/rmprog" bench 20000 stack)"
    done > "$2/ioctl_by_cpu.txt"
    read -r FAST SLOW FASTSET < <(awk '{u[$1] = $5} END {lo = hi = -1
        for (c in u) { if (lo < 0 || u[c] < u[lo]) lo = c; if (hi < 0 || u[c] > u[hi]) hi = c }
        mid = (u[lo] + u[hi]) / 2; set = ""
        for (c = 0; c in u; c++) if (u[c] < mid && c != lo) set = set (set ? "," : "") c
        print lo, hi, set}' "$2/ioctl_by_cpu.txt")
    echo "fast $FAST slow $SLOW other fast $FASTSET" | tee -a "$2/ioctl_by_cpu.txt"
}
