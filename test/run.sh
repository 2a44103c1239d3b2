#!/bin/sh
# Run every test program at each rank count it supports, under a wall-clock
# timeout, oversubscribed; print one line per run and a summary.
#
#   test/run.sh BUILD_TEST_DIR        (make check does this)
#
# MPIEXEC picks the launcher; VALGRIND=1 runs the 1- and 2-rank runs under
# valgrind memcheck instead. RANKS="1 2" limits the rank counts.
set -u
dir=${1:?usage: test/run.sh BUILD_TEST_DIR}
MPIEXEC=${MPIEXEC:-mpiexec}
BINDIR=${BINDIR:-bin}
TIMEOUT=${TEST_TIMEOUT:-600}
export CK_FORK=no
# one BLAS thread per process: the ranks already share the cores
export OPENBLAS_NUM_THREADS=${OPENBLAS_NUM_THREADS:-1}

# Open MPI refuses to start more ranks than cores unless told, and refuses
# to run as root (CI containers) unless told.
flags=""
openmpi=0
if $MPIEXEC --version 2>&1 | grep -qiE "open ?(mpi|rte)"; then
    openmpi=1
    flags="--oversubscribe"
    export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
fi

# valgrind: a definite leak or a memory error in any rank fails its run.
# Under Open MPI, its own suppression file (in its share/openmpi beside the
# launcher's bin/, where the package has one) and test/valgrind-openmpi.supp
# cover what happens inside Open MPI. --keep-debuginfo keeps the names of
# the components MPI_Finalize unloads, so the leaks made inside them still
# match; 30 callers reach from the allocation down to the MPI call.
vg=""
if [ "${VALGRIND:-0}" = 1 ]; then
    vg="valgrind -q --error-exitcode=97 --leak-check=full --errors-for-leak-kinds=definite"
    vg="$vg --keep-debuginfo=yes --num-callers=30 --suppressions=test/valgrind.supp"
    if [ $openmpi = 1 ]; then
        launcher=$(readlink -f "$(command -v "${MPIEXEC%% *}")")
        shipped="${launcher%/bin/*}/share/openmpi/openmpi-valgrind.supp"
        [ -f "$shipped" ] && vg="$vg --suppressions=$shipped"
        vg="$vg --suppressions=test/valgrind-openmpi.supp"
    fi
fi

# program: rank counts
SUITE="
test_core: 1
test_backend: 1
test_linear: 1
test_activation: 1
test_loss: 1
test_conv: 1
test_pool: 1
test_batchnorm: 1
test_optim: 1
test_pipe_plan: 1
test_partition: 1 2 3 4 6
test_broadcast: 1 2 3 4 5 12
test_sum_reduce: 1 2 3 4 5 12
test_all_sum_reduce: 1 2 3 4 12
test_repartition: 1 2 3 4 6 12
test_halo: 1 2 3 4 9 12
test_errors: 1 2 4
test_dist_linear: 1 2 3 4 6 9 12
test_dist_conv: 1 2 3 4 6 8 12
test_dist_bn: 1 2 3 4 6 8 12
test_dist_misc: 1 2 3 4 6 8 12
test_dist_train: 1 2 3 4 6 8 12
test_checkpoint: 1 2 3 4 6
test_pipe_schedule: 1
test_pipeline: 1 2 3 4 5 6
"

echo "MPI: $MPIEXEC ($($MPIEXEC --version 2>&1 | grep -m1 -iE 'version:|open ?(mpi|rte)' | tr -s ' ' |
    sed -e 's/^ //' -e 's/^.*(OpenRTE)/Open MPI/'))"
pass=0
fail=0
failed=""
logdir=$(mktemp -d)
start=$(date +%s)
for line in $(echo "$SUITE" | tr ' ' '%'); do
    [ -n "$line" ] || continue
    prog=$(echo "$line" | cut -d: -f1)
    counts=$(echo "$line" | cut -d: -f2 | tr '%' ' ')
    [ -x "$dir/$prog" ] || { echo "missing $dir/$prog"; fail=$((fail + 1)); failed="$failed $prog"; continue; }
    for n in $counts; do
        if [ -n "${RANKS:-}" ] && ! echo " $RANKS " | grep -q " $n "; then continue; fi
        [ -z "$vg" ] || [ "$n" -le 2 ] || continue
        t0=$(date +%s)
        log="$logdir/$prog.$n.log"
        if LADLE_TEST_RANKS=$n timeout "$TIMEOUT" $MPIEXEC $flags -n "$n" $vg "$dir/$prog" >"$log" 2>&1; then
            res=PASS; pass=$((pass + 1))
        else
            res=FAIL; fail=$((fail + 1)); failed="$failed $prog@$n"
        fi
        printf '%-4s %-22s %2d ranks %4ds\n' "$res" "$prog" "$n" $(( $(date +%s) - t0 ))
        [ "$res" = PASS ] || sed 's/^/    | /' "$log" | tail -40
    done
done

# the command-line tool, end to end
t0=$(date +%s)
if MPIEXEC="$MPIEXEC $flags" BINDIR="$BINDIR" EXAMPLES="${EXAMPLES:-build/examples}" test/tool_test.sh >"$logdir/tool.log" 2>&1; then
    res=PASS; pass=$((pass + 1))
else
    res=FAIL; fail=$((fail + 1)); failed="$failed tool_test"
fi
printf '%-4s %-22s          %4ds\n' "$res" "tool_test.sh" $(( $(date +%s) - t0 ))
[ "$res" = PASS ] || sed 's/^/    | /' "$logdir/tool.log" | tail -40

rm -rf "$logdir"
echo "----"
echo "$pass passed, $fail failed in $(( $(date +%s) - start ))s${failed:+ (failed:$failed)}"
[ "$fail" -eq 0 ]
