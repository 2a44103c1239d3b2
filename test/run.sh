#!/bin/sh
# Run every test program at each rank count it supports, under a wall-clock
# timeout, oversubscribed; print one line per run and a summary.
#
#   test/run.sh BUILD_TEST_DIR        (make check does this)
#
# MPIEXEC picks the launcher; VALGRIND=1 runs the 1- and 2-rank runs under
# valgrind memcheck instead. RANKS="1 2" limits the rank counts. CANARY=PROG
# (make asan, make valgrind) first runs the canary, test/canary.c, whose
# faults the sanitizers or valgrind must report (see docs/testing.md).
# DEVICES (default "cpu guarded"; "cpu" under valgrind) lists the devices
# the test programs run on, each pass setting LADLE_TEST_DEVICE: the guarded
# test device proves that nothing touches device memory around the backend
# (under make asan its memory is poisoned outside its own kernels). The
# cuda pass runs CUDA_SUITE instead of SUITE: the CUDA backend's own
# programs and the layers' and primitives' tests at 1 to 4 ranks sharing
# one GPU (make check runs it over the emulator, scripts/device-check.sh on
# a GPU).
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

# More ranks than cores under MPICH: the ranks are launched with the
# idle-yield shim (test/idle_yield.c; make builds it beside the tests), so
# that a rank waiting on a message gives its core to the others instead of
# polling for its whole time slice. Open MPI yields by itself when it sees
# the cores oversubscribed. The tool scripts, which launch several counts,
# have it throughout. Not under valgrind, and not where the shim was not
# built. Under ASan (make asan sets ASAN_RUNTIME) the sanitizer's runtime
# is preloaded first: it must come before every other library.
cores=$(nproc 2>/dev/null || echo 1)
shim=${IDLE_YIELD-$dir/idle_yield.so}
preload=""
if [ $openmpi = 0 ] && [ "${VALGRIND:-0}" != 1 ] && [ -n "$shim" ] && [ -f "$shim" ]; then
    libs=$(readlink -f "$shim")
    if [ -n "${ASAN_RUNTIME:-}" ]; then
        [ -f "$ASAN_RUNTIME" ] || { echo "run.sh: no ASan runtime at $ASAN_RUNTIME"; exit 2; }
        libs="$(readlink -f "$ASAN_RUNTIME"):$libs"
    fi
    preload="-genv LD_PRELOAD $libs"
fi
# launcher flags for a run of N ranks
ranks_flags() {
    if [ "$1" -gt "$cores" ]; then
        echo "$flags $preload"
    else
        echo "$flags"
    fi
}

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
test_cli: 1 2 3
test_data: 1 2 3
test_text: 1
test_augment: 1 2 3 4
test_backend: 1
test_half: 1 2
test_bf16: 1 2
test_linear: 1
test_activation: 1
test_loss: 1
test_conv: 1
test_pool: 1
test_interp: 1
test_batchnorm: 1
test_layernorm: 1
test_groupnorm: 1 2 3 4 5 6
test_embedding: 1
test_attention: 1
test_optim: 1
test_loss_scale: 1 2 3 4
test_pipe_plan: 1
test_partition: 1 2 3 4 6
test_broadcast: 1 2 3 4 5 12
test_sum_reduce: 1 2 3 4 5 12
test_all_sum_reduce: 1 2 3 4 12
test_reduce_scatter: 1 2 3 4 5 6 8 12
test_recompute: 1 2 3 4
test_repartition: 1 2 3 4 6 12
test_halo: 1 2 3 4 9 12
test_errors: 1 2 3 4
test_hostile: 1 2 3
test_dist_linear: 1 2 3 4 6 9 12
test_dist_conv: 1 2 3 4 6 8 12
test_conv_transpose: 1 2 3 4 5 6
test_dist_bn: 1 2 3 4 6 8 12
test_dist_misc: 1 2 3 4 6 8 12
test_dist_gpool: 1 2 3 4 5 6
test_dist_interp: 1 2 3 4 6
test_adaptive_max: 1 2 3 4 5 6
test_dist_vocab: 1 2 3 4 6
test_dist_tp: 1 2 3 4 6
test_dist_train: 1 2 3 4 6 8 12
test_zero: 1 2 3 4
test_checkpoint: 1 2 3 4 6
test_graph: 1 2 3 4 5 6
test_gpt: 1 2 3 4
test_gpt_pipe: 1 2 3 4
test_resnet: 1 2 3 4 8
test_custom: 1 2 3 4
test_memory: 1 2 3 4
test_memory_report: 1 2 3 4
test_pipe_schedule: 1
test_zbv: 1
test_pipeline: 1 2 3 4 5 6
test_cuda: 1 2
"

CUDA_SUITE="
test_cuda: 1 2
test_cuda_fault: 1 2
test_cuda_blas: 1
test_cuda_act: 1
test_cuda_conv: 1
test_cuda_pool: 1
test_cuda_norm: 1
test_cuda_loss: 1
test_cuda_planes: 1
test_cuda_attn: 1
test_half: 1
test_bf16: 1 2
test_linear: 1
test_activation: 1
test_loss: 1
test_conv: 1
test_pool: 1
test_interp: 1
test_batchnorm: 1
test_layernorm: 1
test_groupnorm: 1 2 4
test_embedding: 1
test_attention: 1
test_gpt: 1 2
test_gpt_pipe: 1
test_optim: 1
test_loss_scale: 1 2
test_text: 1
test_broadcast: 1 2 3 4
test_sum_reduce: 1 2 3 4
test_reduce_scatter: 1 2 4
test_recompute: 1 2 4
test_all_sum_reduce: 1 2 4
test_repartition: 1 2 3 4
test_halo: 1 2 4
test_dist_linear: 1 2 4
test_dist_conv: 1 2 4
test_conv_transpose: 1 2 4
test_dist_bn: 1 2 4
test_dist_misc: 1 2 4
test_dist_gpool: 1 2 4
test_dist_interp: 1 2 4
test_dist_vocab: 1 2
test_adaptive_max: 1 2 4
test_dist_train: 1 2 4
test_zero: 1 2
test_checkpoint: 1 2
test_graph: 1 2 4
test_pipeline: 1 2 4
test_custom: 1 2 4
test_memory: 1 2 4
"

# selected: is NAME one of TEST's (everything when TEST is empty)?
selected() { [ -z "${TEST:-}" ] || echo " $TEST " | grep -q " $1 "; }
for t in ${TEST:-}; do
    case " $(echo "$SUITE$CUDA_SUITE" | cut -d: -f1 | tr '\n' ' ') tool_test tool_errors tool_cuda net_train resume_kill canary " in
    *" $t "*) ;;
    *) echo "run.sh: TEST names '$t', which is not in the suite"; exit 2 ;;
    esac
done

echo "MPI: $MPIEXEC ($($MPIEXEC --version 2>&1 | grep -m1 -iE 'version:|open ?(mpi|rte)' | tr -s ' ' |
    sed -e 's/^ //' -e 's/^.*(OpenRTE)/Open MPI/'))"
pass=0
fail=0
failed=""
logdir=$(mktemp -d)
start=$(date +%s)

# The canary's faults, on 2 ranks under the suite's launcher, wrapper and
# suppressions. Each run must fail and print every pattern given; in leak mode
# every leak reported must be the canary's (one that is not means the
# suppressions miss something of MPI's). A canary that passes unreported
# would mean the tools, or our suppressions, hide ladle's faults too.
canary() { # MODE PATTERN...
    mode=$1
    shift
    log="$logdir/canary.$mode.log"
    t0=$(date +%s)
    timeout "$TIMEOUT" $MPIEXEC $flags -n 2 $vg "$CANARY" "$mode" >"$log" 2>&1
    st=$?
    why=""
    case $st in
    0) why=" it exited 0;" ;;
    124) why=" it timed out;" ;;
    esac
    for p in "$@"; do
        grep -Eq -- "$p" "$log" || why="$why no '$p';"
    done
    if [ "$mode" = leak ] && [ "${VALGRIND:-0}" != 1 ]; then
        # ASan: every report's allocation stack holds the canary's new_tensor
        # frame exactly once; counting lines, not blocks, keeps the count
        # right when the two ranks' reports interleave
        reports=$(grep -Ec '^(Direct|Indirect) leak of' "$log")
        ours=$(grep -Ec 'in new_tensor .*canary\.c' "$log")
        [ "$reports" -eq "$ours" ] || why="$why $((reports - ours)) leak reports not the canary's;"
    elif [ "$mode" = leak ]; then
        # a report runs from its first line to the next blank one of the
        # same process: valgrind's lines carry ==PID== (the ranks' reports
        # interleave), ASan writes each report whole
        others=$(awk -v vg="${VALGRIND:-0}" '
            { pid = ""; if (match($0, /^==[0-9]+==/)) pid = substr($0, RSTART, RLENGTH) }
            (vg == 1 && /definitely lost in loss record/) || (vg != 1 && /^(Direct|Indirect) leak of/) {
                n++; inb[pid] = 1; hit[pid] = 0; next }
            inb[pid] && /canary\.c/ && !hit[pid] { hit[pid] = 1; h++ }
            /^$/ || /^==[0-9]+== $/ { inb[pid] = 0 }
            END { print n - h }' "$log")
        [ "$others" -eq 0 ] || why="$why $others leak reports not the canary's;"
    fi
    if [ -z "$why" ]; then
        res=PASS; pass=$((pass + 1))
    else
        res=FAIL; fail=$((fail + 1)); failed="$failed canary-$mode"
    fi
    printf '%-4s %-30s %2d ranks %4ds\n' "$res" "canary $mode" 2 $(( $(date +%s) - t0 ))
    if [ "$res" != PASS ]; then
        echo "    | the canary's fault went unreported or not alone:$why"
        sed 's/^/    | /' "$log" | tail -60
    fi
}
if ! selected canary; then
    :
elif [ -n "${CANARY:-}" ] && [ "${VALGRIND:-0}" = 1 ]; then
    canary leak 'definitely lost' 'ladle_tensor_create(_on)? \(tensor\.c' 'canary_leak \(canary\.c' \
        'canary_leak_in_init \(canary\.c' 'MPI_Init \(canary\.c'
    canary read 'Invalid read of size 8' 'canary_read \(canary\.c' 'free.d' \
        'ladle_tensor_destroy \(tensor\.c'
    canary oob 'Invalid write of size 8' 'canary_oob \(canary\.c' 'after a block of size 40 alloc.d'
elif [ -n "${CANARY:-}" ]; then
    canary leak 'ERROR: LeakSanitizer: detected memory leaks' 'in ladle_tensor_create(_on)? .*tensor\.c' \
        'in canary_leak .*canary\.c' 'in canary_leak_in_init .*canary\.c' 'in MPI_Init .*canary\.c'
    canary read 'ERROR: AddressSanitizer: heap-use-after-free' 'READ of size 8' \
        'in canary_read .*canary\.c' 'in ladle_tensor_destroy .*tensor\.c'
    # under ASan a block is its 64-byte header and the 40 bytes of the
    # canary's 5 doubles, the redzone right after them (memory.c)
    canary oob 'ERROR: AddressSanitizer: heap-buffer-overflow' 'WRITE of size 8' \
        'in canary_oob .*canary\.c' '0 bytes to the right of 104-byte region'
    canary ub 'canary\.c:[0-9]+:[0-9]+: runtime error: signed integer overflow'
    canary device 'ERROR: AddressSanitizer: use-after-poison' 'READ of size 8' \
        'in canary_device .*canary\.c'
fi
if [ -n "${LADLE_TEST_DEVICE:-}" ]; then
    DEVICES=${DEVICES:-$LADLE_TEST_DEVICE}
elif [ -n "$vg" ]; then
    DEVICES=${DEVICES:-cpu}
else
    DEVICES=${DEVICES:-cpu guarded}
fi
# The guarded pass checks that nothing but the backend touches device
# memory: staged messages, values fetched through the backend. It runs
# every count the CPU pass runs (GUARDED_MAX_RANKS=N stops it at N ranks).
for dev in $DEVICES; do
    # the CPU's runs carry the plain name, the others the device's
    suffix=""
    [ "$dev" = cpu ] || suffix="@$dev"
    suite=$SUITE
    [ "$dev" != cuda ] || suite=$CUDA_SUITE
    for line in $(echo "$suite" | tr ' ' '%'); do
        [ -n "$line" ] || continue
        prog=$(echo "$line" | cut -d: -f1)
        counts=$(echo "$line" | cut -d: -f2 | tr '%' ' ')
        selected "$prog" || continue
        [ -x "$dir/$prog" ] || { echo "missing $dir/$prog"; fail=$((fail + 1)); failed="$failed $prog"; continue; }
        for n in $counts; do
            if [ -n "${RANKS:-}" ] && ! echo " $RANKS " | grep -q " $n "; then continue; fi
            [ -z "$vg" ] || [ "$n" -le 2 ] || continue
            # the guarded device at up to GUARDED_MAX_RANKS: see above
            [ "$dev" != guarded ] || [ "$n" -le "${GUARDED_MAX_RANKS:-$n}" ] || continue
            t0=$(date +%s)
            log="$logdir/$prog.$n.$dev.log"
            if LADLE_TEST_DEVICE=$dev LADLE_TEST_RANKS=$n timeout "$TIMEOUT" \
                $MPIEXEC $(ranks_flags "$n") -n "$n" $vg "$dir/$prog" >"$log" 2>&1; then
                res=PASS; pass=$((pass + 1))
            else
                res=FAIL; fail=$((fail + 1)); failed="$failed $prog@$n$suffix"
            fi
            printf '%-4s %-30s %2d ranks %4ds\n' "$res" "$prog$suffix" "$n" $(( $(date +%s) - t0 ))
            [ "$res" = PASS ] || sed 's/^/    | /' "$log" | tail -40
        done
    done
done

# A script of the suite, test/NAME.sh, run with BINDIR and the environment
# assignments given: PASS, FAIL, or with SKIPS 1 SKIP where its log has a
# "skip" line (then shown, for its reason). A failing log shows its last
# KEEP lines, those other than "ok " ones with HIDE_OK 1.
suite_script() {
    name=$1 skips=$2 keep=$3 hide_ok=$4
    shift 4
    selected "$name" || return 0
    t0=$(date +%s)
    log="$logdir/$name.log"
    if env BINDIR="$BINDIR" "$@" "test/$name.sh" >"$log" 2>&1; then
        res=PASS; pass=$((pass + 1))
        [ "$skips" = 1 ] && grep -q '^skip ' "$log" && res=SKIP
    else
        res=FAIL; fail=$((fail + 1)); failed="$failed $name"
    fi
    printf '%-4s %-30s          %4ds\n' "$res" "$name.sh" $(( $(date +%s) - t0 ))
    if [ "$res" = FAIL ]; then
        if [ "$hide_ok" = 1 ]; then grep -v '^ok ' "$log"; else cat "$log"; fi |
            tail -n "$keep" | sed 's/^/    | /'
    fi
    [ "$res" = SKIP ] && sed 's/^/    | /' "$log"
    return 0
}

# the scripts of a pass that has the CPU
case " $DEVICES " in *" cpu "*) has_cpu=1 ;; *) has_cpu=0 ;; esac
if [ $has_cpu = 1 ]; then
    # the command-line tools, end to end
    suite_script tool_test 0 40 0 MPIEXEC="$MPIEXEC $flags $preload" \
        EXAMPLES="${EXAMPLES:-build/examples}"
    # every tool under hostile input, at 1 to 3 ranks
    suite_script tool_errors 0 60 1 MPIEXEC="$MPIEXEC $flags $preload"
    # a training job across two "nodes" (network namespaces over TCP): it
    # skips, with its reason, without root
    suite_script net_train 1 40 0 MPIEXEC="$MPIEXEC"
    # a training job killed with SIGKILL mid-epoch and restarted with
    # --resume latest (it skips without ps), oversubscribed at 3 ranks
    suite_script resume_kill 1 40 0 MPIEXEC="$MPIEXEC $flags $preload"
fi

# the tools on the CUDA device against the CPU, in a pass that has CUDA
case " $DEVICES " in *" cuda "*) has_cuda=1 ;; *) has_cuda=0 ;; esac
if [ $has_cuda = 1 ]; then
    suite_script tool_cuda 0 40 1 MPIEXEC="$MPIEXEC $flags $preload"
fi

rm -rf "$logdir"
if [ $((pass + fail)) -eq 0 ]; then
    echo "nothing ran: TEST='${TEST:-}' RANKS='${RANKS:-}' select no run of the suite"
    exit 1
fi
echo "----"
echo "$pass passed, $fail failed in $(( $(date +%s) - start ))s${failed:+ (failed:$failed)}"
[ "$fail" -eq 0 ]
