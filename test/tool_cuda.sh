#!/bin/sh
# The tools on the CUDA device, against the same binary on the CPU: the
# dot-product test of every primitive on device memory (ladle-adjoint
# --device cuda), and LeNet-5 trained a few steps on the GPU (ladle-train
# --device cuda) ending where the CPU's run ends, in the layout and the
# pipeline modes, and the GPT a few steps on both (ladle-gpt --device
# cuda). test/run.sh runs it in the cuda pass (over the emulator in make
# check; scripts/device-check.sh on a GPU).
set -u
MPIEXEC=${MPIEXEC:-mpiexec}
BINDIR=${BINDIR:-bin}
fails=0
ok() { echo "ok   $*"; }
bad() { echo "FAIL $*"; fails=$((fails + 1)); }

adj() { # NRANKS ARGS...: exit 0 and the mismatch line, on device memory
    n=$1; shift
    out=$(timeout 300 $MPIEXEC -n "$n" "$BINDIR/ladle-adjoint" "$@" --device cuda 2>&1)
    st=$?
    if [ $st -eq 0 ] && printf '%s\n' "$out" | grep -q "on cuda:" &&
        printf '%s\n' "$out" | grep -Eq '^adjoint mismatch: [0-9.e+-]+$'; then
        ok "-n $n ladle-adjoint $* --device cuda: $(printf '%s\n' "$out" | tail -n 1)"
    else
        bad "[$st] -n $n ladle-adjoint $* --device cuda"
        printf '%s\n' "$out" | tail -n 8 | sed 's/^/     /'
    fi
}
adj 3 broadcast --px 1x3@0-2 --py 1x3@0-2 --shape 7x11 --dtype f64
adj 3 sum-reduce --px 3x1 --py 1x1@1 --shape 5x6 --dtype f32
adj 4 all-sum-reduce --px 2x2 --axes 1 --shape 5x5
adj 3 repartition --px 3x1 --py 1x3 --shape 17x13 --x-split 7,5,5/13
adj 3 halo-exchange --px 1x1x3 --shape 2x3x19 --kernel 1,1,5 --stride 1,1,2 --padding 0,0,2
# MPI handed device memory directly (a device-aware MPI's path): only where
# the MPI can read it, which the emulator's "device memory" is
# (TOOL_CUDA_DIRECT=1, set by make check's emulated pass)
if [ "${TOOL_CUDA_DIRECT:-0}" = 1 ]; then
    export LADLE_CUDA_MPI=direct
    adj 3 broadcast --px 1x3@0-2 --py 1x3@0-2 --shape 7x11 --dtype f64
    adj 3 sum-reduce --px 3x1 --py 1x1@1 --shape 5x6 --dtype f32
    adj 4 all-sum-reduce --px 2x2 --axes 1 --shape 5x5
    adj 3 repartition --px 3x1 --py 1x3 --shape 17x13 --x-split 7,5,5/13
    adj 3 halo-exchange --px 1x1x3 --shape 2x3x19 --kernel 1,1,5 --stride 1,1,2 --padding 0,0,2
    unset LADLE_CUDA_MPI
fi

# LeNet-5, f64, a few steps: the GPU's run ends as the CPU's (the same
# accuracy count on the first 2000 test images and the loss to the
# summary's four decimals)
train="$BINDIR/ladle-train"
data=${LADLE_DATA:-/usr/share/datasets/fashion-mnist}
if [ -f "$data/train-images-idx3-ubyte.gz" ]; then
    tmp=$(mktemp -d)
    run() { # DEVICE NRANKS SUMMARY ARGS...
        dev=$1 n=$2 sum=$3
        shift 3
        timeout 600 $MPIEXEC -n "$n" "$train" --quiet --steps 20 --batch 32 --dtype f64 \
            --seed 4 --epochs 1 --test-limit 2000 --device "$dev" --summary "$sum" "$@" \
            >>"$tmp/log" 2>&1
    }
    tail_of() { sed -e 's/ms_per_step [0-9.]*//' "$1"; }
    for layout in "2:--data-ways 2" "4:--data-ways 2 --spatial 2x1 --fc-ways 2 --bn"; do
        n=${layout%%:*} args=${layout#*:}
        : >"$tmp/log"
        # shellcheck disable=SC2086
        run cpu "$n" "$tmp/cpu" $args && run cuda "$n" "$tmp/cuda" $args
        st=$?
        if [ $st -eq 0 ] && [ "${TOOL_CUDA_DIRECT:-0}" = 1 ]; then
            # shellcheck disable=SC2086
            LADLE_CUDA_MPI=direct run cuda "$n" "$tmp/direct" $args
            st=$?
            [ "$(tail_of "$tmp/cpu")" = "$(tail_of "$tmp/direct")" ] || st=1
        fi
        if [ $st -eq 0 ] && [ -s "$tmp/cpu" ] && [ "$(tail_of "$tmp/cpu")" = "$(tail_of "$tmp/cuda")" ]; then
            ok "ladle-train $args: cuda ends as cpu ($(sed 's/.*\(accuracy.*\)ms_per.*\(last_loss.*\)/\1\2/' "$tmp/cuda"))"
        else
            bad "ladle-train $args: cpu '$(cat "$tmp/cpu" 2>/dev/null)' cuda '$(cat "$tmp/cuda" 2>/dev/null)'"
            sed 's/^/     /' "$tmp/log" | tail -n 20
        fi
        rm -f "$tmp/cpu" "$tmp/cuda" "$tmp/direct"
    done
    # the pipeline mode: 1F1B over 2 ranks, the epoch's line as the CPU's
    line() { # DEVICE
        timeout 600 $MPIEXEC -n 2 "$train" --pipeline 1f1b --microbatches 2 --steps 10 \
            --batch 32 --dtype f64 --seed 4 --epochs 1 --test-limit 2000 --quiet \
            --device "$1" 2>&1 |
            grep "^epoch 1:"
    }
    a=$(line cpu) b=$(line cuda)
    if [ -n "$a" ] && [ "$a" = "$b" ]; then
        ok "ladle-train --pipeline 1f1b: cuda ends as cpu ($b)"
    else
        bad "ladle-train --pipeline 1f1b: cpu '$a', cuda '$b'"
    fi
    rm -rf "$tmp"
else
    echo "skip ladle-train: no dataset at $data"
fi
# the GPT (ladle-gpt --device cuda), a few steps on the fortunes corpus:
# the GPU's validation and last training loss as the CPU's, data parallel
# and tensor parallel (its vocabulary-parallel loss stages through the
# host). Kernels sum in other orders than the CPU's: f64 within 1e-6 (one
# unit of the summary's sixth decimal: the runs differ near 1e-14), f32
# within 2e-4 nats (a loss near 5, a few f32 roundings of its row sums a
# step, 6 steps of AdamW)
gpt="$BINDIR/ladle-gpt"
corpus=${LADLE_FORTUNES:-/usr/share/games/fortunes}
if [ -d "$corpus" ] || [ -f "$corpus" ]; then
    tmp=$(mktemp -d)
    gpt_run() { # DEVICE NRANKS SUMMARY ARGS...
        dev=$1 n=$2 sum=$3
        shift 3
        timeout 600 $MPIEXEC -n "$n" "$gpt" --corpus "$corpus" --layers 1 --width 16 \
            --heads 2 --context 16 --batch 4 --steps 6 --eval-every 6 --eval-limit 16 \
            --sample 0 --quiet --device "$dev" --summary "$sum" "$@" >>"$tmp/log" 2>&1
    }
    # FILE FILE TOL: val_loss and last_loss within TOL
    near() { awk -v tol="$3" 'NR == FNR { for (i = 1; i < NF; i++) a[$i] = $(i + 1); next }
        { for (i = 1; i < NF; i++) b[$i] = $(i + 1) }
        END { d1 = a["val_loss"] - b["val_loss"]; d2 = a["last_loss"] - b["last_loss"]
              if (d1 < 0) d1 = -d1; if (d2 < 0) d2 = -d2
              exit !(a["val_loss"] != "" && d1 <= tol && d2 <= tol) }' "$1" "$2"; }
    for case in "1:--f64:1e-6" "2:--f64:1e-6" "2:--f64 --tensor-ways 2:1e-6" \
        "2:--tensor-ways 2:2e-4"; do
        n=${case%%:*} rest=${case#*:} args=${rest%:*} tol=${rest##*:}
        : >"$tmp/log"
        # shellcheck disable=SC2086
        if gpt_run cpu "$n" "$tmp/cpu" $args && gpt_run cuda "$n" "$tmp/cuda" $args &&
            near "$tmp/cpu" "$tmp/cuda" "$tol"; then
            ok "-n $n ladle-gpt $args: cuda ends as cpu within $tol ($(cut -d' ' -f3,4 "$tmp/cuda"))"
        else
            bad "-n $n ladle-gpt $args: cpu '$(cat "$tmp/cpu" 2>/dev/null)' cuda '$(cat "$tmp/cuda" 2>/dev/null)'"
            sed 's/^/     /' "$tmp/log" | tail -n 20
        fi
        rm -f "$tmp/cpu" "$tmp/cuda"
    done
    rm -rf "$tmp"
else
    echo "skip ladle-gpt: no corpus at $corpus"
fi
[ $fails -eq 0 ] && echo "tool_cuda: all passed" || echo "tool_cuda: $fails failed"
[ $fails -eq 0 ]
