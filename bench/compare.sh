#!/bin/sh
# Compare two builds' benchmarks: the layers (one process) and the
# distributed layers (2 ranks) of OLD_DIR and NEW_DIR (folders holding
# bench_layers and bench_dist, e.g. build/bench of two clones), launched
# alternately ROUNDS times so that drift on a busy machine hits both alike;
# then per row the median of each side, new/old, and the spread (max - min)
# / median of each side's launches: the noise a ratio must beat.
#   bench/compare.sh OLD_DIR NEW_DIR [ROUNDS]     (python3 for the table)
set -eu
old=${1:?usage: bench/compare.sh OLD_DIR NEW_DIR [ROUNDS]}
new=${2:?usage: bench/compare.sh OLD_DIR NEW_DIR [ROUNDS]}
rounds=${3:-10}
MPIEXEC=${MPIEXEC:-mpiexec}
export OPENBLAS_NUM_THREADS=${OPENBLAS_NUM_THREADS:-1}
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
for r in $(seq "$rounds"); do
    for v in old new; do
        eval d=\$$v
        "$d/bench_layers" ${BENCH_LAYER_ARGS:-} >"$out/$v-layers-$r.txt"
        $MPIEXEC -n 2 "$d/bench_dist" ${BENCH_DIST_ARGS:-} >"$out/$v-dist-$r.txt"
    done
done
python3 "$(dirname "$0")/compare.py" "$out"
