#!/bin/sh
# ladle's layers next to PyTorch's (CPU, one thread) on the same shapes:
# bench_layers, then bench/torch_reference.py, joined by layer and shape.
# Needs Debian's python3-torch (not a ladle dependency); skips without it.
#   bench/torch_compare.sh BUILD_BENCH_DIR [--dtype f64]
set -eu
dir=${1:-build/bench}
shift || true
dtype=f32
[ "${1:-}" = "--dtype" ] && dtype=${2:-f32}
py=/usr/bin/python3
if ! $py -c "import torch" 2>/dev/null; then
    echo "torch_compare: python3-torch is not installed; skipped"
    exit 0
fi
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
OPENBLAS_NUM_THREADS=1 "$dir/bench_layers" --dtype "$dtype" > "$tmp/ladle"
OMP_NUM_THREADS=1 $py "$(dirname "$0")/torch_reference.py" 15 "$dtype" > "$tmp/torch"
head -1 "$tmp/torch"
# rows are "%-8s %-34s" then numbers: the first 43 columns are the key
awk 'function key(s) { s = substr(s, 1, 43); sub(/ +$/, "", s); return s }
     function first(s,  f) { split(substr(s, 44), f, " "); return f[1] }
     FNR == NR { if ($0 !~ /^#/) t[key($0)] = first($0); next }
     { k = key($0) }
     k in t && first($0) + 0 > 0 {
         printf "%-43s ladle %9.3f ms  torch %9.3f ms  torch/ladle %6.2f\n", k, first($0), t[k],
                t[k] / first($0) }' "$tmp/torch" "$tmp/ladle"
