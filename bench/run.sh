#!/bin/sh
# Run the benchmarks: BENCH_REPEAT launches of the primitives at 2 ranks
# (one per core: the figures that count on a 2-core machine) and one at 4
# ranks (oversubscribed), then BENCH_REPEAT runs of the layers (one process).
# Each launch prints its own medians; `make bench` then prints the medians
# over launches (bench/summarize.awk).
#   BENCH_RANKS="2 4"  BENCH_REPEAT=3  BENCH_ARGS="--max-kib 4096 --only broadcast"
#   BENCH_LAYERS=0 skips the layers; BENCH_LAYER_ARGS="--only conv2d"
#   BENCH_DIST=0 skips the distributed benchmarks; BENCH_DIST_ARGS="--only lenet"
#   BENCH_PIPE=0 skips the pipeline schedules; BENCH_PIPE_ARGS="--steps 20"
#   BENCH_GPT=0 skips the GPT step; BENCH_GPT_ARGS="--layers 2"
set -u
dir=${1:?usage: bench/run.sh BUILD_BENCH_DIR}
MPIEXEC=${MPIEXEC:-mpiexec}
# one BLAS thread per rank unless told otherwise: the ranks share the cores
export OPENBLAS_NUM_THREADS=${OPENBLAS_NUM_THREADS:-1}
# one rank per core where they fit, so the scheduler cannot stack them;
# Open MPI refuses to bind more ranks than cores unless told it may (the
# oversubscribed 4-rank launches), MPICH's hydra shares the cores out
if $MPIEXEC --version 2>&1 | grep -qiE "open ?(mpi|rte)"; then
    flags="--oversubscribe --bind-to core:overload-allowed"
    export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
else
    flags="-bind-to core"
fi
# launch LABEL RANKS REPEAT PROG ARGS: REPEAT launches of bench PROG on
# RANKS ranks, each under a heading "== LABELRANKS ranks, launch R"
launch() {
    for r in $(seq "$3"); do
        echo "== $1$2 ranks, launch $r"
        $MPIEXEC $flags -n "$2" "$dir/$4" $5 || exit 1
    done
}
# BENCH_REPEAT launches at up to 2 ranks, one above (oversubscribed)
repeat_at() {
    if [ "$1" -le 2 ]; then echo "${BENCH_REPEAT:-3}"; else echo 1; fi
}
for n in ${BENCH_RANKS:-2 4}; do
    launch "" "$n" "$(repeat_at "$n")" bench_primitives "${BENCH_ARGS:-}"
done
# distributed layers and LeNet-5 training: launches at 2 ranks (the figures
# that count) and one at 4 (oversubscribed)
if [ "${BENCH_DIST:-1}" = 1 ]; then
    for n in ${BENCH_RANKS:-2 4}; do
        launch "distributed, " "$n" "$(repeat_at "$n")" bench_dist "${BENCH_DIST_ARGS:-}"
    done
fi
# pipeline schedules on the network of unequal stages: at 2 ranks (one per
# core, where measured and simulated bubbles can be compared) and at 4
if [ "${BENCH_PIPE:-1}" = 1 ]; then
    for n in 2 4; do
        launch "pipeline, " "$n" "${BENCH_REPEAT:-3}" bench_pipe "${BENCH_PIPE_ARGS:-}"
    done
fi
# the GPT step on 1 rank, data parallel, tensor parallel and a pipeline
# of 2 stages over 2 (one per core), in the same launch
if [ "${BENCH_GPT:-1}" = 1 ]; then
    launch "gpt, " 2 "${BENCH_REPEAT:-3}" bench_gpt "${BENCH_GPT_ARGS:-}"
fi
if [ "${BENCH_LAYERS:-1}" = 1 ]; then
    for r in $(seq "${BENCH_REPEAT:-3}"); do
        echo "== layers, run $r"
        "$dir/bench_layers" ${BENCH_LAYER_ARGS:-} || exit 1
    done
fi
