#!/bin/bash
# Quiet benches on the H200 host's CPUs (16 cores, nothing else running): a base tree against the working tree,
# on a 1M-record trace, by bench/columns.py, bench/stats_ab.py and bench/tui_open.py (none uses the GPU).
# Staged by hand in a gitignored folder of the tree carried there (the device tool's carry), say .wt-q/ (the copy of the tree leaves it out): this
# script, base.tar (`git archive --format=tar.gz BASE`), t1m.trace (bench/session.py's replicate), whl/ (the
# cp312 wheels of the dependencies that host lacks) and, if that host has none, a zstd binary.
# For PART scaling, also t100k.trace (in any of those folders) and a 10M-record trace: t10m.trace, or (too big for one carry) its `zstd --long=30`
# compression in pieces p0, p1, ... carried in separate calls into sibling folders named .wt-q*/ (a warm machine keeps
# the ones before), joined here and checked against t10m.sha (sha256sum's line of the trace).
# usage: bash .wt-q/h200_quiet.sh PART   (PART: cmds | tui | scaling; ROUNDS=N, default 4, 2 for scaling); results in
# $OUT/q-PART.tgz
set -u
S=$(cd "$(dirname "$0")" && pwd)
T=$S/t1m.trace
PART=$1
command -v zstd >/dev/null || { mkdir -p /tmp/zbin; cp $S/zstd /tmp/zbin/; export PATH=/tmp/zbin:$PATH LD_LIBRARY_PATH=$S; }
zstd --version
for t in base new; do
  [ -x /tmp/v$t/bin/rmtrace ] && continue
  python3 -m venv --system-site-packages /tmp/v$t
  mkdir -p /tmp/tree-$t
  # base: the session's start, carried as a tarball; new: the working tree this runs in
  if [ $t = base ]; then tar xf $S/base.tar -C /tmp/tree-base; else (cd $S/.. && tar --exclude="./$(basename $S)*" -cf - .) | tar xf - -C /tmp/tree-new; fi
  /tmp/v$t/bin/pip install -q --no-index --no-deps $S/whl/*.whl 2>&1 | grep -v WARNING | tail -2
  (cd /tmp/tree-$t && /tmp/v$t/bin/pip install -q --no-index --no-deps --no-build-isolation . 2>&1 | grep -v WARNING | tail -2)
  /tmp/v$t/bin/rmtrace --version || exit 1
done
unset PYTHONDONTWRITEBYTECODE
mkdir -p $OUT/q; cd /tmp/tree-new
{ date -u; uptime; nproc; grep -m1 "model name" /proc/cpuinfo; python3 --version; } > $OUT/q/machine-$PART.txt
export BENCH_TMP=/tmp/bt; mkdir -p $BENCH_TMP
STEPS_C=("zstd -dc" "zstd pass" "fold" "stats, cache cold" "wedges, cache cold" "show, cache cold" "stats, cache warm" "wedges, cache warm" "show, cache warm")
if [ $PART = scaling ]; then
  T10=$S/t10m.trace
  if [ ! -f $T10 ]; then
    for i in $(seq 0 9); do cat $S/../.wt-q*/p$i 2>/dev/null; done | zstd -dc --long=30 > $T10 || exit 1
    (cd $S && sed "s#  .*#  $T10#" t10m.sha | sha256sum -c) || exit 1
  fi
  timeout 560 /tmp/vnew/bin/python bench/scaling.py --traces $(ls $S/../.wt-q*/t100k.trace | head -1) $T $T10 --rounds ${ROUNDS:-2} \
    --steps "stats, cache cold" "wedges, cache cold" "show, cache cold" "stats, cache warm" "wedges, cache warm" \
    "show, cache warm" > $OUT/q/scaling.txt 2>&1; echo "rc=$?" >> $OUT/q/scaling.txt
elif [ $PART = cmds ]; then
  for t in new base; do
    (cd /tmp/tree-$t && timeout 280 /tmp/v$t/bin/python bench/columns.py --trace $T --rounds ${ROUNDS:-4} --steps "${STEPS_C[@]}" > $OUT/q/columns-$t.txt 2>&1; echo "rc=$?" >> $OUT/q/columns-$t.txt)
  done
else
  for t in new base; do
    (cd /tmp && timeout 170 /tmp/v$t/bin/python /tmp/tree-$t/bench/tui_open.py --trace $T --rounds ${ROUNDS:-4} > $OUT/q/tui-$t.txt 2>&1; echo "rc=$?" >> $OUT/q/tui-$t.txt)
  done
  # from /tmp: run from a source tree, python -m would import that tree's rmtrace, which has no built C library
  cd /tmp; timeout 200 /tmp/vnew/bin/python /tmp/tree-new/bench/stats_ab.py --trace $T --base /tmp/vbase --rounds ${ROUNDS:-4} --caches cold warm --modes json > $OUT/q/stats_ab.txt 2>&1; echo "rc=$?" >> $OUT/q/stats_ab.txt
fi
uptime >> $OUT/q/machine-$PART.txt
cd $OUT && tar czf q-$PART.tgz q && rm -rf q
