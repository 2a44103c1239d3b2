#!/bin/sh
# End-to-end checks of bin/ladle-adjoint: exit codes, the last line, and the
# messages a user sees for bad configurations.
set -u
MPIEXEC=${MPIEXEC:-mpiexec}
BINDIR=${BINDIR:-bin}
tool="$BINDIR/ladle-adjoint"
fails=0

expect() { # expect CODE NRANKS ARGS...: exit code and, for 0/1, the last line
    want=$1; n=$2; shift 2
    err=$(mktemp)
    out=$(timeout 120 $MPIEXEC -n "$n" "$tool" "$@" 2>"$err")
    got=$?
    # the tool's last line on standard output (launchers add their own
    # notes about failed ranks on standard error)
    last=$(printf '%s\n' "$out" | tail -n 1)
    out="$out
$(cat "$err")"
    rm -f "$err"
    ok=1
    [ "$got" -eq "$want" ] || ok=0
    if [ "$want" -le 1 ]; then
        printf '%s\n' "$last" | grep -Eq '^adjoint mismatch: [0-9.e+-]+$' || ok=0
    fi
    if [ $ok -eq 1 ]; then
        echo "ok   [$got] $*"
    else
        echo "FAIL [got $got, want $want] -n $n $*"
        printf '%s\n' "$out" | sed 's/^/     /'
        fails=$((fails + 1))
    fi
}

# the example from the documentation
expect 0 6 broadcast --px 1x3@0-2 --py 2x3@0-5 --shape 7x11 --dtype f64
expect 0 6 sum-reduce --px 2x3 --py 1x3@3,4,5 --shape 7x11 --dtype f32
expect 0 6 all-sum-reduce --px 2x3 --axes 1 --shape 5x5
expect 0 4 all-sum-reduce --px 2x2 --axes none --shape 5
expect 0 6 repartition --px 3x2 --py 1x6 --shape 77x55 --x-split 27,25,25/30,25
expect 0 6 halo-exchange --px 1x1x2x3 --shape 2x3x17x19 --kernel 1,1,5,3 \
    --stride 1,1,2,1 --padding 0,0,2,1 --dilation 1,1,1,2
expect 0 4 halo-exchange --px 1x1x4 --shape 1x1x11 --kernel 1,1,2 --stride 1,1,2 --ceil-mode
# periodic: 2-d corners wrapping over two split dimensions, a halo as wide as
# the extent over blocks narrower than it, one periodic and one padded dimension
expect 0 6 halo-exchange --px 1x1x2x3 --shape 2x3x7x8 --kernel 1,1,3,3 --padding 0,0,1,1 \
    --periodic 2,3
expect 0 4 halo-exchange --px 1x4 --shape 2x5 --kernel 1,11 --padding 0,5 --periodic 1 --dtype f32
expect 0 3 halo-exchange --px 1x3x1 --shape 2x9x4 --kernel 1,3,5 --padding 0,1,2 --periodic 1 \
    --device guarded
# a periodic halo wider than the extent: refused, exit 2
expect 2 2 halo-exchange --px 1x2 --shape 2x4 --kernel 1,11 --padding 0,5 --periodic 1
# all-gather and reduce-scatter: uneven and empty shards, an inner dim, the
# groups on one axis of a 2-d grid, ranks left out
expect 0 3 all-gather --px 3 --shape 7x4 --counts 5,0,2
expect 0 6 reduce-scatter --px 2x3 --axis 1 --shape 2x9x3 --dim 1 --counts 4,0,5
expect 0 6 all-gather --px 2x2@0-3 --axis 0 --shape 5x3 --dim 1 --dtype f32 --device guarded
expect 0 6 broadcast --px 1x3@0,2,4 --py 3x1@1,3,5 --shape 4 --transpose-src
# ranks outside both partitions take part as inactive ranks
expect 0 8 repartition --px 2x1@0,1 --py 1x3@5-7 --shape 9x10 --seed 7
# an illegal pair of partitions is refused with a message, exit 2
expect 2 6 broadcast --px 1x3 --py 3x1 --shape 7x11
out=$($MPIEXEC -n 6 "$tool" broadcast --px 1x3 --py 3x1 --shape 7x11 2>&1)
echo "$out" | grep -q "cannot broadcast a 1x3 partition to a 3x1 one" ||
    { echo "FAIL: the illegal-pair message is missing"; echo "$out"; fails=$((fails + 1)); }
expect 2 2 broadcast --px 1x3 --py 1x3 --shape 7
expect 2 1 frobnicate --shape 3
expect 2 1 broadcast --shape 3x
expect 2 1 broadcast --px 2x2@0-2 --shape 3
expect 2 2 halo-exchange --px 1x2 --shape 4x4 --kernel 3
expect 2 2 halo-exchange --px 1x2 --shape 4x4 --kernel 1,9
# help
$MPIEXEC -n 1 "$tool" --help | grep -q "^usage: mpiexec" ||
    { echo "FAIL: --help"; fails=$((fails + 1)); }
# a tolerance no test can meet makes the tool fail with 1
expect 1 2 all-sum-reduce --px 2 --shape 1000 --dtype f32 --tolerance 1e-300
expect 2 1 all-sum-reduce --shape 10 --tolerance -1

# the README's example program
out=$(timeout 120 $MPIEXEC -n 6 "${EXAMPLES:-build/examples}/broadcast" 2>&1)
if [ "$out" = "y[0] = 1, adjoint mismatch 0.0e+00" ]; then
    echo "ok   examples/broadcast"
else
    echo "FAIL examples/broadcast printed: $out"; fails=$((fails + 1))
fi

# docs/embedding.md's example: the adjoint of the user's own operator
out=$(timeout 120 $MPIEXEC -n 1 "${EXAMPLES:-build/examples}/custom_adjoint" 2>&1)
case "$out" in
"adjoint ok, mismatch "*) echo "ok   examples/custom_adjoint" ;;
*) echo "FAIL examples/custom_adjoint printed: $out"; fails=$((fails + 1)) ;;
esac

# docs/graphs.md's example: a residual block as a graph network, data parallel
out=$(timeout 120 $MPIEXEC -n 3 "${EXAMPLES:-build/examples}/residual_graph" 2>&1)
case "$out" in
"residual graph ok: "*) echo "ok   examples/residual_graph" ;;
*) echo "FAIL examples/residual_graph printed: $out"; fails=$((fails + 1)) ;;
esac

# ladle-train end to end (needs the dataset package the deps script installs):
# an interrupted run resumed from its checkpoint ends exactly like an
# uninterrupted one, on another layout too up to rounding
train="$BINDIR/ladle-train"
data=${LADLE_DATA:-/usr/share/datasets/fashion-mnist}
if [ -f "$data/train-images-idx3-ubyte.gz" ]; then
    tmp=$(mktemp -d)
    run_train() { # NRANKS SUMMARY ARGS...
        n=$1; sum=$2; shift 2
        timeout 300 $MPIEXEC -n "$n" "$train" --quiet --steps "${steps:-25}" --batch 32 --dtype f64 \
            --seed 4 --summary "$sum" "$@" >>"$tmp/log" 2>&1
    }
    loss_of() { sed -n 's/.*last_loss \([0-9.]*\).*/\1/p' "$1" | tail -n 1; }
    run_train 2 "$tmp/whole" --epochs 2 --data-ways 2 &&
        run_train 2 "$tmp/first" --epochs 2 --stop-after 1 --data-ways 2 --checkpoint "$tmp/ck" &&
        cp "$tmp/ck" "$tmp/ck2" && cp "$tmp/ck" "$tmp/ck3" &&
        run_train 2 "$tmp/rest" --epochs 2 --data-ways 2 --checkpoint "$tmp/ck2" --resume &&
        run_train 3 "$tmp/other" --epochs 2 --spatial 3x1 --checkpoint "$tmp/ck3" --resume
    st=$?
    a=$(loss_of "$tmp/whole"); b=$(loss_of "$tmp/rest"); c=$(loss_of "$tmp/other")
    if [ $st -eq 0 ] && [ -n "$a" ] && [ "$a" = "$b" ] && [ "$a" = "$c" ]; then
        echo "ok   ladle-train: resumed runs end with the uninterrupted loss $a"
    else
        echo "FAIL ladle-train resume: uninterrupted '$a', resumed '$b', other layout '$c'"
        sed 's/^/     /' "$tmp/log"
        fails=$((fails + 1))
    fi
    # a damaged checkpoint is refused with a clear message on every rank
    # (searched in this run's whole log: Open MPI's launcher appends a dozen
    # lines of its own about the failed ranks)
    head -c 100 "$tmp/ck" >"$tmp/torn"
    : >"$tmp/log"
    out=$(run_train 2 "$tmp/x" --epochs 1 --checkpoint "$tmp/torn" --resume; cat "$tmp/log")
    if printf '%s' "$out" | grep -q "truncated or torn\|too short"; then
        echo "ok   ladle-train refuses a torn checkpoint"
    else
        echo "FAIL ladle-train accepted a torn checkpoint"; fails=$((fails + 1))
    fi
    # a ResNet (a graph network) the same way: resumed on data, spatial and
    # channel layouts, it ends with the uninterrupted run's loss (f64); 8
    # steps an epoch, enough to cross the checkpoint with momentum and
    # running statistics in flight
    steps=8
    run_train 2 "$tmp/rwhole" --model resnet8 --epochs 2 --data-ways 2 &&
        run_train 2 "$tmp/rfirst" --model resnet8 --epochs 2 --stop-after 1 --data-ways 2 \
            --checkpoint "$tmp/rck" &&
        cp "$tmp/rck" "$tmp/rck2" && cp "$tmp/rck" "$tmp/rck3" &&
        run_train 2 "$tmp/rrest" --model resnet8 --epochs 2 --spatial 2x1 \
            --checkpoint "$tmp/rck2" --resume &&
        run_train 4 "$tmp/rother" --model resnet8 --epochs 2 --channel-ways 2 \
            --checkpoint "$tmp/rck3" --resume
    st=$?
    a=$(loss_of "$tmp/rwhole"); b=$(loss_of "$tmp/rrest"); c=$(loss_of "$tmp/rother")
    if [ $st -eq 0 ] && [ -n "$a" ] && [ "$a" = "$b" ] && [ "$a" = "$c" ]; then
        echo "ok   ladle-train --model resnet8: resumed on spatial and channel layouts, loss $a"
    else
        echo "FAIL ladle-train --model resnet8: uninterrupted '$a', spatial '$b', channels '$c'"
        sed 's/^/     /' "$tmp/log"
        fails=$((fails + 1))
    fi
    # ladle-bn-study: 4 ranks, two per-rank batches, every mode that applies
    # (local, group2, global), one seed: a CSV row per run, a chart point per
    # row, and the group2 run is the run ladle-train makes with those
    # statistics, batch and scaled rate (the same last loss)
    study="$BINDIR/ladle-bn-study"
    timeout 300 $MPIEXEC -n 4 "$study" --per-rank 2,4 --seeds 1 --seed 5 --samples 64 \
        --test-limit 300 --quiet --csv "$tmp/bn.csv" --svg "$tmp/bn.svg" >"$tmp/study" 2>&1
    st=$?
    rows=$(grep -c '^4,' "$tmp/bn.csv" 2>/dev/null)
    dots=$(grep -c '<circle' "$tmp/bn.svg" 2>/dev/null)
    want=$(awk -F, '$2 == 4 && $3 == "group2" { printf "%.4f", $7 }' "$tmp/bn.csv" 2>/dev/null)
    timeout 300 $MPIEXEC -n 4 "$train" --model resnet8 --data-ways 4 --bn-sync group \
        --bn-group 2 --batch 16 --lr 0.0125 --epochs 1 --steps 4 --seed 5 --test-limit 300 \
        --quiet --summary "$tmp/g2" >>"$tmp/study" 2>&1
    got=$(loss_of "$tmp/g2")
    if [ $st -eq 0 ] && [ "$rows" = 6 ] && [ "$dots" = 6 ] && [ -n "$want" ] && [ "$want" = "$got" ]; then
        echo "ok   ladle-bn-study: 6 runs, 6 points, group2 at 4 per rank = ladle-train's (loss $got)"
    else
        echo "FAIL ladle-bn-study: status $st, $rows rows, $dots points, group2 loss '$want' vs '$got'"
        sed 's/^/     /' "$tmp/study"
        fails=$((fails + 1))
    fi
    # pipeline mode: the planner's hybrid on 4 ranks learns (accuracy well
    # above chance after 60 steps) and draws its measured timeline
    out=$(timeout 300 $MPIEXEC -n 4 "$train" --pipeline hybrid --microbatches 4 --epochs 1 \
        --steps 60 --quiet --timeline "$tmp/t.svg" 2>&1)
    acc=$(printf '%s\n' "$out" | sed -n 's/.*test accuracy \([0-9]*\)\..*/\1/p' | tail -n 1)
    if [ -n "$acc" ] && [ "$acc" -ge 50 ] && grep -q "<rect" "$tmp/t.svg" 2>/dev/null; then
        echo "ok   ladle-train --pipeline hybrid: $acc% after 60 steps, timeline drawn"
    else
        echo "FAIL ladle-train --pipeline hybrid"
        printf '%s\n' "$out" | sed 's/^/     /'
        fails=$((fails + 1))
    fi
    # ZB-V: four stages in a V on 2 ranks learns as well
    out=$(timeout 300 $MPIEXEC -n 2 "$train" --pipeline zbv --microbatches 8 --epochs 1 \
        --steps 60 --quiet 2>&1)
    acc=$(printf '%s\n' "$out" | sed -n 's/.*test accuracy \([0-9]*\)\..*/\1/p' | tail -n 1)
    if [ -n "$acc" ] && [ "$acc" -ge 50 ] && printf '%s\n' "$out" | grep -q "4 stages on 2 workers"; then
        echo "ok   ladle-train --pipeline zbv: $acc% after 60 steps"
    else
        echo "FAIL ladle-train --pipeline zbv"
        printf '%s\n' "$out" | sed 's/^/     /'
        fails=$((fails + 1))
    fi
    rm -rf "$tmp"
else
    echo "skip ladle-train: no dataset at $data"
fi

# ladle-gpt: a short job on a corpus written here, interrupted after 6 steps
# and resumed from its checkpoint, ends with the uninterrupted run's loss;
# its validation loss is a number, it samples text, and a checkpoint of
# another run is refused
gpt="$BINDIR/ladle-gpt"
gtmp=$(mktemp -d)
awk 'BEGIN { srand(3); for (r = 0; r < 400; r++) { n = 20 + int(rand() * 40); s = "";
    for (i = 0; i < n; i++) s = s substr("the quick brown fox jumps over a lazy dog ", 1 + int(rand() * 42), 1);
    print s; print "%" } }' >"$gtmp/corpus"
gargs="--corpus $gtmp/corpus --layers 1 --width 16 --heads 2 --context 16 --batch 4 --steps 12
    --warmup 2 --eval-every 6 --eval-limit 20 --seed 3 --quiet"
timeout 300 $MPIEXEC -n 1 "$gpt" $gargs --sample 40 --summary "$gtmp/whole" >"$gtmp/out" 2>&1 &&
    timeout 300 $MPIEXEC -n 1 "$gpt" $gargs --stop-after 6 --checkpoint "$gtmp/ck" \
        --summary "$gtmp/first" >>"$gtmp/out" 2>&1 &&
    timeout 300 $MPIEXEC -n 1 "$gpt" $gargs --resume --checkpoint "$gtmp/ck" \
        --summary "$gtmp/rest" >>"$gtmp/out" 2>&1
st=$?
a=$(awk '{ for (i = 1; i < NF; i++) if ($i == "last_loss") print $(i + 1) }' "$gtmp/whole" 2>/dev/null)
b=$(awk '{ for (i = 1; i < NF; i++) if ($i == "last_loss") print $(i + 1) }' "$gtmp/rest" 2>/dev/null)
v=$(awk '{ for (i = 1; i < NF; i++) if ($i == "val_loss") print $(i + 1) }' "$gtmp/whole" 2>/dev/null)
timeout 120 $MPIEXEC -n 1 "$gpt" $gargs --seed 4 --resume --checkpoint "$gtmp/ck" >"$gtmp/other" 2>&1
other=$?
if [ $st -eq 0 ] && [ -n "$a" ] && [ "$a" = "$b" ] && printf '%s' "$v" | grep -Eq '^[0-9]+\.[0-9]+$' &&
    grep -q "^sample (temperature 0.8):" "$gtmp/out" && [ $other -ne 0 ] &&
    grep -q "written by another run" "$gtmp/other"; then
    echo "ok   ladle-gpt: resumed after 6 of 12 steps, last loss $a as uninterrupted; validation $v"
else
    echo "FAIL ladle-gpt: status $st, uninterrupted '$a', resumed '$b', validation '$v', other seed $other"
    sed 's/^/     /' "$gtmp/out" "$gtmp/other"
    fails=$((fails + 1))
fi
# --f32-tiles (the attention's tile products in f32) trains to the same
# validation and last losses as the tiles in double within 1e-4 relative, on
# one rank and on 2 tensor-parallel ranks (its layers built another way)
timeout 300 $MPIEXEC -n 1 "$gpt" $gargs --sample 0 --f32-tiles --summary "$gtmp/t1" \
    >"$gtmp/tout" 2>&1 &&
    timeout 300 $MPIEXEC -n 2 "$gpt" $gargs --sample 0 --f32-tiles --tensor-ways 2 \
        --summary "$gtmp/t2" >>"$gtmp/tout" 2>&1
st=$?
close=$(awk 'function rel(a, b) { return (a > b ? a - b : b - a) / (b > 0 ? b : 1) }
    FNR == 1 { for (i = 1; i < NF; i++) { if ($i == "val_loss") v[FILENAME] = $(i + 1);
                                          if ($i == "last_loss") l[FILENAME] = $(i + 1) } }
    END { ok = 1; for (f in v) if (rel(v[f], v[W]) > 1e-4 || rel(l[f], l[W]) > 1e-4) ok = 0;
          print (ok && length(v) == 3) ? "yes" : "no" }' W="$gtmp/whole" "$gtmp/whole" \
    "$gtmp/t1" "$gtmp/t2" 2>/dev/null)
if [ $st -eq 0 ] && [ "$close" = yes ]; then
    echo "ok   ladle-gpt --f32-tiles: 1 rank and 2 tensor-parallel ranks within 1e-4 of the double tiles"
else
    echo "FAIL ladle-gpt --f32-tiles: status $st, close '$close'"
    sed 's/^/     /' "$gtmp/tout" "$gtmp/whole" "$gtmp/t1" "$gtmp/t2" 2>/dev/null
    fails=$((fails + 1))
fi
# data parallel (the batch split, the gradients summed) and tensor parallel
# (heads, MLP features and the sequence split) over 2 ranks take one rank's
# steps, in f64 to the printed digits
gpt_dp="--corpus $gtmp/corpus --layers 1 --width 16 --heads 2 --context 16 --batch 4 --steps 6
    --warmup 2 --eval-every 6 --eval-limit 20 --seed 3 --quiet --f64 --sample 0"
timeout 300 $MPIEXEC -n 1 "$gpt" $gpt_dp --summary "$gtmp/dp1" >"$gtmp/dpout" 2>&1 &&
    timeout 300 $MPIEXEC -n 2 "$gpt" $gpt_dp --summary "$gtmp/dp2" >>"$gtmp/dpout" 2>&1 &&
    timeout 300 $MPIEXEC -n 2 "$gpt" $gpt_dp --tensor-ways 2 --summary "$gtmp/tp2" \
        >>"$gtmp/dpout" 2>&1
st=$?
a=$(awk '{ print $4, $12, $14 }' "$gtmp/dp1" 2>/dev/null)
b=$(awk '{ print $4, $12, $14 }' "$gtmp/dp2" 2>/dev/null)
c=$(awk '{ print $4, $12, $14 }' "$gtmp/tp2" 2>/dev/null)
if [ $st -eq 0 ] && [ -n "$a" ] && [ "$a" = "$b" ] && [ "$a" = "$c" ]; then
    echo "ok   ladle-gpt: 2 data-parallel and 2 tensor-parallel ranks end as 1 rank (validation, last loss, parameters: $a)"
else
    echo "FAIL ladle-gpt data/tensor parallel: status $st, 1 rank '$a', data '$b', tensor '$c'"
    sed 's/^/     /' "$gtmp/dpout"
    fails=$((fails + 1))
fi
rm -rf "$gtmp"

# ladle-pipe: a generated schedule is valid (exit 0); a hand-made deadlock is
# refused (exit 1) with the grid pointing at it
pipe="$BINDIR/ladle-pipe"
out=$("$pipe" --schedule zbh1 --stages 4 --microbatches 8 2>&1)
if [ $? -eq 0 ] && printf '%s' "$out" | grep -q "bubble 0.1111"; then
    echo "ok   ladle-pipe: ZB-H1 valid, bubble 1/9"
else
    echo "FAIL ladle-pipe zbh1: $out"; fails=$((fails + 1))
fi
# the receiver's time and the parameters' memory, by hand (test_pipe_schedule's
# simulator_recv_and_params): makespan 17.75, peaks 12 and 21
out=$("$pipe" --schedule 1f1b --stages 2 --microbatches 2 --f 1,2 --b 3,4 --w 0 --send 0.5 \
    --recv 0.25 --param 10,20 2>&1)
if [ $? -eq 0 ] && printf '%s' "$out" | grep -q "makespan 17.75 " &&
    printf '%s' "$out" | grep -q "peak memory 21 (worker: 12 21)"; then
    echo "ok   ladle-pipe: a receive's time and the parameters' memory"
else
    echo "FAIL ladle-pipe --recv/--param: $out"; fails=$((fails + 1))
fi
out=$("$pipe" --stages 2 --recv -1 2>&1)
if [ $? -eq 2 ] && printf '%s' "$out" | grep -q "recv"; then
    echo "ok   ladle-pipe refuses a negative --recv"
else
    echo "FAIL ladle-pipe took --recv -1: $out"; fails=$((fails + 1))
fi
bad=$(mktemp)
printf '0RECV_B0 0F0 0SEND_F0 0B0 0W0\n1F0 1B0 1W0\n' >"$bad"
out=$("$pipe" --load "$bad" 2>&1)
st=$?
rm -f "$bad"
if [ $st -eq 1 ] && printf '%s' "$out" | grep -q "deadlock" && printf '%s' "$out" | grep -q "\[0RECV_B0\]"; then
    echo "ok   ladle-pipe refuses a deadlocking schedule"
else
    echo "FAIL ladle-pipe accepted a deadlock ($st): $out"; fails=$((fails + 1))
fi

echo "$fails failures"
[ "$fails" -eq 0 ]
