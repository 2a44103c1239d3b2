#!/bin/sh
# The LeNet-5 step through ladle.torch against the same step in DistDL, on
# Open MPI at 2 and 4 ranks (bench/torch_lenet_step.py, bench/distdl_lenet.py),
# in interleaved rounds (ladle.torch, then DistDL, for each rank count, ROUNDS
# times) so that both see the same machine; then the medians over the rounds.
#
#   DISTDL_SRC=DISTDL/src bench/torch_vs_distdl.sh      (make bench-distdl)
#
# DISTDL_SRC: DistDL's src folder (a checkout of github.com/distdl/distdl);
# ROUNDS (3), REPS steps per launch (50); LAYOUT_2 and LAYOUT_4 the layouts
# ("--spatial 2x1 --fc-ways 2" and "--spatial 2x2 --fc-ways 2": one batch
# block, since DistDL's linear layer has no batch split).
set -u
here=$(cd "$(dirname "$0")" && pwd)
PYTHON3=${PYTHON3:-/usr/bin/python3}
MPIEXEC=${MPIEXEC:-mpiexec.openmpi}
: "${DISTDL_SRC:?set DISTDL_SRC to DistDL's src folder}"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OPENBLAS_NUM_THREADS=1
out=$(mktemp)
trap 'rm -f "$out" "$out.run"' EXIT
for r in $(seq "${ROUNDS:-3}"); do
    for n in 2 4; do
        eval "layout=\${LAYOUT_$n:-}"
        [ -n "$layout" ] || { [ "$n" = 2 ] && layout="--spatial 2x1 --fc-ways 2" || layout="--spatial 2x2 --fc-ways 2"; }
        for impl in ladle distdl; do
            if [ $impl = ladle ]; then
                cmd="$here/torch_lenet_step.py $layout"
            else
                cmd="$here/distdl_lenet.py --distdl $DISTDL_SRC $layout"
            fi
            if ! $MPIEXEC --oversubscribe -n "$n" "$PYTHON3" -W ignore $cmd --reps "${REPS:-50}" \
                >"$out.run" 2>&1; then
                echo "FAILED: $impl at $n ranks:"; tail -n 20 "$out.run"; rm -f "$out.run"; exit 1
            fi
            grep "ms/step" "$out.run" | tee -a "$out"
        done
    done
done
echo "== medians over ${ROUNDS:-3} rounds (ms/step)"
awk '{ key = $1 " " $3 " " $4 " " $5 " " $6 " " $7; sub(/:$/, "", key);
       for (i = 1; i <= NF; i++) if ($i == "ms/step") v = $(i - 1);
       n[key]++; vals[key, n[key]] = v; order[key] = ++k }
     END { for (key in n) { m = n[key];
             for (i = 1; i <= m; i++) a[i] = vals[key, i];
             for (i = 1; i <= m; i++) for (j = i + 1; j <= m; j++) if (a[j] < a[i]) { t = a[i]; a[i] = a[j]; a[j] = t }
             printf "%-48s %9.3f\n", key, (m % 2) ? a[(m + 1) / 2] : (a[m / 2] + a[m / 2 + 1]) / 2 } }' "$out" | sort
