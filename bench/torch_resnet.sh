#!/bin/sh
# A ResNet-20 training step, ladle next to PyTorch (CPU, one thread each),
# in one run: bench_dist's resnet rows at one rank, then
# bench/torch_resnet_step.py, three launches each, interleaved; the medians
# and their ratio. Needs Debian's python3-torch; skips without it.
#   bench/torch_resnet.sh BUILD_BENCH_DIR
set -eu
dir=${1:-build/bench}
py=/usr/bin/python3
MPIEXEC=${MPIEXEC:-mpiexec}
if ! $py -c "import torch" 2>/dev/null; then
    echo "torch_resnet: python3-torch is not installed; skipped"
    exit 0
fi
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
for r in 1 2 3; do
    OPENBLAS_NUM_THREADS=1 $MPIEXEC -n 1 "$dir/bench_dist" --only resnet --reps 7 |
        awk '/^resnet20 +sequential/ { print $(NF-2) }' >> "$tmp/ladle"
    OMP_NUM_THREADS=1 $py "$(dirname "$0")/torch_resnet_step.py" --reps 7 |
        sed -n 's/.*: \([0-9.]*\) ms.step.*/\1/p' >> "$tmp/torch"
done
med() { sort -n "$1" | awk '{ v[NR] = $1 } END { print v[int((NR + 1) / 2)] }'; }
l=$(med "$tmp/ladle"); t=$(med "$tmp/torch")
echo "resnet20 batch 64, 1 rank, f32: ladle $l ms  torch $t ms  torch/ladle $(awk "BEGIN { printf \"%.2f\", $t / $l }")  (medians of 3 launches of 7 steps)"
