#!/bin/sh
# The batch-norm study's long run (docs/training.md): ladle-bn-study at
# 2, 4 and 8 ranks into one CSV, the last launch drawing every run.
#   scripts/bn-study.sh [OUTDIR]        (docs/bn-study by default)
# Settings (environment): BN_RANKS ("2 4 8"), BN_PER_RANK (2,4,8,16,32,64),
# BN_SEEDS (3), BN_SAMPLES (30000), BN_TEST (5000), MPIEXEC (mpiexec),
# BINDIR (bin), BN_ARGS (more options, e.g. "--model resnet20").
# Ranks beyond the cores are fine for accuracy; times count only where each
# rank has a core (the tool marks the others). Hours on 2 cores.
set -eu
out=${1:-docs/bn-study}
MPIEXEC=${MPIEXEC:-mpiexec}
BINDIR=${BINDIR:-bin}
mkdir -p "$out"
csv="$out/bn-study.csv"
if [ -e "$csv" ]; then
    echo "bn-study: $csv exists; move it away or name another OUTDIR" >&2
    exit 2
fi
export OPENBLAS_NUM_THREADS=1
for n in ${BN_RANKS:-2 4 8}; do
    echo "== $n ranks"
    $MPIEXEC -n "$n" "$BINDIR/ladle-bn-study" --per-rank "${BN_PER_RANK:-2,4,8,16,32,64}" \
        --seeds "${BN_SEEDS:-3}" --samples "${BN_SAMPLES:-30000}" \
        --test-limit "${BN_TEST:-5000}" --quiet ${BN_ARGS:-} --csv "$csv" \
        --svg "$out/bn-study.svg" >"$out/bn-study-$n.txt"
    cat "$out/bn-study-$n.txt"
done
