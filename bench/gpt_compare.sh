#!/bin/sh
# The GPT training step of bench_gpt on one rank next to PyTorch's
# (bench/torch_gpt.py: the same model, batch and AdamW, f32, one thread),
# the two alternated launch by launch, BENCH_REPEAT (3) times each; prints
# every launch and the median ratio. Needs Debian's python3-torch; skips
# without it.
#   bench/gpt_compare.sh BUILD_BENCH_DIR [layers width heads context batch]
set -eu
dir=${1:-build/bench}
shift || true
L=${1:-4} E=${2:-128} H=${3:-4} T=${4:-128} N=${5:-16}
py=/usr/bin/python3
MPIEXEC=${MPIEXEC:-mpiexec}
if ! $py -c "import torch" 2>/dev/null; then
    echo "gpt_compare: python3-torch is not installed; skipped"
    exit 0
fi
export OPENBLAS_NUM_THREADS=1 OMP_NUM_THREADS=1
ratios=""
for r in $(seq "${BENCH_REPEAT:-3}"); do
    l=$($MPIEXEC -n 1 "$dir/bench_gpt" --layers "$L" --width "$E" --heads "$H" \
        --context "$T" --batch "$N" | awk '$1 == "1" && $2 == "rank" { print $4 }')
    t=$($py "$(dirname "$0")/torch_gpt.py" "$L" "$E" "$H" "$T" "$N" 3 5 |
        awk '{ for (i = 1; i <= NF; i++) if ($i == "ms/step,") print $(i - 1) }')
    ratio=$(awk -v l="$l" -v t="$t" 'BEGIN { printf "%.2f", t / l }')
    echo "launch $r: ladle $l ms/step, torch $t ms/step, torch/ladle $ratio"
    ratios="$ratios $ratio"
done
echo "$ratios" | tr ' ' '\n' | grep . | sort -n |
    awk '{ v[NR] = $1 } END { m = NR % 2 ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2;
        printf "GPT step, %d launches: torch/ladle median %.2f (above 1: ladle faster)\n", NR, m }'
