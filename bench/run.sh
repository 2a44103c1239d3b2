#!/bin/sh
# Run the benchmarks at 2 ranks (one per core: the figures that count on a
# 2-core machine) and at 4 ranks (oversubscribed). BENCH_RANKS and
# BENCH_ARGS override, e.g. BENCH_ARGS="--max-kib 4096".
set -u
dir=${1:?usage: bench/run.sh BUILD_BENCH_DIR}
MPIEXEC=${MPIEXEC:-mpiexec}
# one rank per core where they fit, so the scheduler cannot stack them
if $MPIEXEC --version 2>&1 | grep -qi "open mpi"; then
    flags="--oversubscribe --bind-to core"
else
    flags="-bind-to core"
fi
for n in ${BENCH_RANKS:-2 4}; do
    echo "== $n ranks"
    $MPIEXEC $flags -n "$n" "$dir/bench_primitives" ${BENCH_ARGS:-} || exit 1
done
