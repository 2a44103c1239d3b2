#!/bin/sh
# Hostile but fair input to every tool, as a new user would give it: each
# row is a tool, its arguments, the exit status it must give and a piece of
# the line it must print. The MPI tools run each row at 1, 2 and 3 ranks
# and must give the same outcome at every count. Exit status: 0 did what
# was asked, 1 failed while working, 2 refused the request.
set -u
MPIEXEC=${MPIEXEC:-mpiexec}
BINDIR=${BINDIR:-bin}
BENCHDIR=${BENCHDIR:-build/bench}
RANK_COUNTS=${TOOL_RANKS:-"1 2 3"}
fails=0
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# check NAME WANT_CODE WANT_TEXT CODE OUTPUT
check() {
    if [ "$4" -eq "$2" ] && printf '%s' "$5" | grep -qF -- "$3"; then
        echo "ok   [$4] $1"
    else
        echo "FAIL [got $4, want $2 and '$3'] $1"
        printf '%s\n' "$5" | tail -n 8 | sed 's/^/     /'
        fails=$((fails + 1))
    fi
}

# mpi CODE TEXT TOOL ARGS...: the same outcome at every rank count
mpi() {
    want=$1 text=$2 tool=$3
    shift 3
    for n in $RANK_COUNTS; do
        out=$(timeout 300 $MPIEXEC -n "$n" "$BINDIR/$tool" "$@" 2>&1)
        check "-n $n $tool $*" "$want" "$text" $? "$out"
    done
}

# bench CODE TEXT RANKS PROGRAM ARGS...: a benchmark program of BENCHDIR
# at each of RANKS
bench() {
    want=$1 text=$2 ranks=$3 prog=$4
    shift 4
    for n in $ranks; do
        if [ ! -x "$BENCHDIR/$prog" ]; then
            check "$prog (not built in $BENCHDIR)" 0 x 1 ""
            continue
        fi
        out=$(timeout 300 $MPIEXEC -n "$n" "$BENCHDIR/$prog" "$@" 2>&1)
        check "-n $n $prog $*" "$want" "$text" $? "$out"
    done
}

# plain CODE TEXT TOOL ARGS...: a tool that needs no launcher
plain() {
    want=$1 text=$2 tool=$3
    shift 3
    out=$(timeout 60 "$BINDIR/$tool" "$@" 2>&1)
    check "$tool $*" "$want" "$text" $? "$out"
}

# Small IDX datasets, written byte by byte (plain files; ladle reads .gz or
# not): be32 N prints N as four big-endian bytes.
be32() {
    printf "\\$(printf %03o $(($1 >> 24 & 255)))\\$(printf %03o $(($1 >> 16 & 255)))"
    printf "\\$(printf %03o $(($1 >> 8 & 255)))\\$(printf %03o $(($1 & 255)))"
}
images() { # FILE N ROWS COLS
    { printf '\000\000\010\003'; be32 "$2"; be32 "$3"; be32 "$4"; head -c $(($2 * $3 * $4)) /dev/urandom; } >"$1"
}
labels() { # FILE N CLASSES [FIRST]
    { printf '\000\000\010\001'; be32 "$2"
      i=0; while [ $i -lt "$2" ]; do printf "\\$(printf %03o $(( ${4:-0} + i % $3 )))"; i=$((i + 1)); done; } >"$1"
}
dataset() { # DIR ROWS CLASSES NTRAIN NTEST [TEST_FIRST_LABEL]
    mkdir -p "$1"
    images "$1/train-images-idx3-ubyte" "$4" "$2" "$2"
    labels "$1/train-labels-idx1-ubyte" "$4" "$3"
    images "$1/t10k-images-idx3-ubyte" "$5" "$2" "$2"
    labels "$1/t10k-labels-idx1-ubyte" "$5" "$3" "${6:-0}"
}

dataset "$tmp/d32" 32 10 96 20
dataset "$tmp/empty" 28 10 0 20
dataset "$tmp/oneclass" 28 1 64 20
dataset "$tmp/beyond" 28 10 64 20 5
dataset "$tmp/small" 10 10 64 20
mkdir -p "$tmp/torn"
cp "$tmp/d32/"* "$tmp/torn/"
head -c 1000 "$tmp/d32/train-images-idx3-ubyte" >"$tmp/torn/train-images-idx3-ubyte"
fm=${LADLE_DATA:-/usr/share/datasets/fashion-mnist}
short="--quiet --epochs 1 --steps 3 --batch 16"

# ---- ladle-train: numbers -------------------------------------------------
mpi 2 "--epochs: '1.5' is not a whole number (expected 1 to 1000000)" ladle-train --epochs 1.5
mpi 2 "--epochs: '1e30' is not a whole number" ladle-train --epochs 1e30
mpi 2 "--epochs: 0 is out of range" ladle-train --epochs 0
mpi 2 "--stages: '4abc' is not a whole number" ladle-train --pipeline 1f1b --stages 4abc
mpi 2 "--seed: 'abc' is not a whole number" ladle-train --seed abc
mpi 2 "--seed: 18446744073709551616 is out of range" ladle-train --seed 18446744073709551616
mpi 2 "--data-ways: 4294967297 is out of range" ladle-train --data-ways 4294967297
mpi 2 "--spatial: the extent 4294967297 in '4294967297x1' is out of range" ladle-train --spatial 4294967297x1
mpi 2 "--spatial: '1' needs two extents" ladle-train --spatial 1
mpi 2 "--batch: -5 is out of range" ladle-train --batch -5
mpi 2 "--lr: -1 is out of range (expected a number in (0, inf))" ladle-train --lr -1
mpi 2 "--lr: 'nan' is not a number" ladle-train --lr nan
mpi 2 "--lr: inf is out of range" ladle-train --lr inf
mpi 2 "--momentum: 1 is out of range (expected a number in [0, 1))" ladle-train --momentum 1
mpi 2 "--dtype: 'f16' is not one of f32, f64" ladle-train --dtype f16
mpi 2 "--device: 'tpu' is not one of cpu, cuda, guarded" ladle-train --device tpu
mpi 2 "--device does not apply to ladle-bn-study" ladle-bn-study --device cpu
# a build without the CUDA backend (this suite's) says so, on every rank count
mpi 2 "built without the cuda backend" ladle-train --device cuda --epochs 1 --steps 1
mpi 2 "built without the cuda backend" ladle-train --pipeline 1f1b --device cuda --epochs 1 --steps 1
mpi 2 "--bn-sync: 'all' is not one of global, local, group" ladle-train --bn --bn-sync all
mpi 2 "--replicas: 'x' in '1,x' is not a whole number" ladle-train --pipeline hybrid --replicas 1,x
# ---- ladle-train: what it does not know, or would ignore -----------------
mpi 2 "unknown option '--frobnicate'" ladle-train --frobnicate
mpi 2 "unexpected argument 'lenet'" ladle-train lenet
mpi 2 "--epochs needs a value" ladle-train --epochs
mpi 2 "--timeline needs --pipeline" ladle-train --timeline "$tmp/t.svg"
mpi 2 "--checkpoint does not apply to --pipeline" ladle-train --pipeline 1f1b --checkpoint "$tmp/c"
mpi 2 "--pipeline: 'fastest' is not one of" ladle-train --pipeline fastest
mpi 2 "--chunks needs --pipeline interleaved" ladle-train --pipeline 1f1b --chunks 2
mpi 2 "does not split into 3 microbatches" ladle-train --pipeline gpipe --microbatches 3
mpi 2 "--resume needs --checkpoint" ladle-train --resume
mpi 2 "--bn-sync and --bn-group need --bn" ladle-train --bn-group 1
mpi 2 "--bn-group needs --bn-sync group" ladle-train --bn --bn-group 1
mpi 2 "--stop-after 3 must come before the last epoch" ladle-train --epochs 3 --stop-after 3
mpi 2 "--momentum is SGD's" ladle-train --adam --momentum 0.5
mpi 2 "--crop-pad: -1 is out of range" ladle-train --crop-pad -1
mpi 2 "--crop-pad: 4294967298 is out of range" ladle-train --crop-pad 4294967298
mpi 2 "--crop-pad: '2x' is not a whole number" ladle-train --crop-pad 2x
mpi 2 "--augment does not apply to --pipeline" ladle-train --pipeline 1f1b --augment
mpi 2 "--flip does not apply to ladle-bn-study" ladle-bn-study --flip
mpi 2 "--data-ways: 4 is out of range (expected 1 to" ladle-train --data-ways 4
RANK_COUNTS="2 3" mpi 2 "the layout 2 x 2x1 needs 4 ranks" ladle-train --data-ways 2 --spatial 2x1
mpi 2 "--model: 'vgg' is not one of lenet, resnet20, resnet18, resnet8" ladle-train --model vgg
mpi 2 "--fc-ways splits LeNet-5's linear layers" ladle-train --model resnet8 --fc-ways 1
mpi 2 "--channel-ways needs a ResNet" ladle-train --channel-ways 1
mpi 2 "--model does not apply to --pipeline" ladle-train --pipeline 1f1b --model resnet8
RANK_COUNTS="2 3" mpi 2 "--channel-ways does not mix with --data-ways" ladle-train --model resnet8 --channel-ways 2 --data-ways 2
RANK_COUNTS="2 3" mpi 2 "the layout 2 x 1x1 (channels x spatial) needs 4 ranks" ladle-train --model resnet8 --channel-ways 2
mpi 0 "usage: mpiexec -n N ladle-train" ladle-train --help
mpi 0 "ladle-train (ladle " ladle-train --version
# ---- ladle-train: outputs checked before any work ------------------------
mpi 2 "--summary: cannot write $tmp/missing/s.txt: No such file or directory" ladle-train --summary "$tmp/missing/s.txt"
mpi 2 "cannot create $tmp/missing/ck.tmp: No such file or directory" ladle-train --checkpoint "$tmp/missing/ck"
# a checkpoint directory: made when missing (one level), written to, or refused
mpi 2 "cannot create the directory $tmp/missing/dir/: No such file or directory" ladle-train --checkpoint "$tmp/missing/dir/"
mpi 2 "--checkpoint $tmp/d32/train-labels-idx1-ubyte/: not a directory" ladle-train --checkpoint "$tmp/d32/train-labels-idx1-ubyte/"
# a directory that cannot be written (root writes through the mode bits: /proc then)
mkdir "$tmp/ro" && chmod 555 "$tmp/ro"
ro="$tmp/ro"
[ -w "$ro" ] && ro=/proc
mpi 2 "cannot create $ro/epoch-000001.ckpt.tmp" ladle-train --checkpoint "$ro"
mpi 2 "--keep: 0 is out of range (expected 1 to" ladle-train --keep 0 --checkpoint "$tmp/kd/"
mpi 2 "--keep: 'two' is not a whole number" ladle-train --keep two --checkpoint "$tmp/kd/"
mpi 2 "--keep needs --checkpoint DIR" ladle-train --keep 3
mpi 2 "--resume latest needs --checkpoint DIR" ladle-train --resume latest
mpi 2 "--resume needs a non-empty FILE, 'latest', or no value" ladle-train --resume "" --checkpoint "$tmp/kd/"
long=$(printf 'x%.0s' $(seq 5000)) # a name longer than a path buffer is refused, not cut short
mpi 2 "--checkpoint: the name is $((${#tmp} + 5001)) bytes long, above 4095" ladle-train --checkpoint "$tmp/$long"
mpi 2 "--resume: the name is 5000 bytes long, above 4095" ladle-train --resume "$long" --checkpoint "$tmp/kd/"
mpi 2 "--resume does not apply to --pipeline" ladle-train --pipeline 1f1b --resume latest
mpi 2 "--keep does not apply to --pipeline" ladle-train --pipeline 1f1b --keep 2
mpi 2 "--timeline: cannot write" ladle-train --pipeline 1f1b --timeline "$tmp/missing/t.svg"
# ---- ladle-train: the data, checked against the model --------------------
mpi 2 "No such file or directory" ladle-train --data "$tmp/none"
mpi 2 "is not a directory" ladle-train --data "$tmp/d32/t10k-images-idx3-ubyte"
mpi 2 "shorter than its header says" ladle-train --data "$tmp/torn"
mpi 2 "both sets must hold some" ladle-train --data "$tmp/empty"
mpi 2 "a classifier needs 2 or more" ladle-train --data "$tmp/oneclass"
mpi 2 "the test labels reach 14, beyond the 10 classes" ladle-train --data "$tmp/beyond"
mpi 2 "square images of at least 12x12" ladle-train --data "$tmp/small"
mpi 2 "a batch of 200 is larger than the 96 training samples" ladle-train --data "$tmp/d32" --batch 200
mpi 2 "--crop-pad 33 is more than the images' side (32)" ladle-train --data "$tmp/d32" --crop-pad 33
# a dataset of 32 x 32 images: LeNet-5 is built for them, and says so
mpi 0 "96 images of 32x32, 10 classes" ladle-train --data "$tmp/d32" $short
mpi 0 "over 3 steps" ladle-train --data "$tmp/d32" $short --pipeline 1f1b --microbatches 2
# augmented training runs on any layout (the whole training image kept per rank)
mpi 0 "96 images of 32x32" ladle-train --data "$tmp/d32" $short --augment
RANK_COUNTS="2 3" mpi 0 "96 images of 32x32" ladle-train --data "$tmp/d32" $short --spatial 2x1 --crop-pad 3 --flip
# ---- ladle-train: runs that cannot earn their "done" ---------------------
mpi 1 "training diverged" ladle-train --data "$tmp/d32" --quiet --epochs 1 --batch 16 --adam --lr 1e4
mpi 1 "training diverged" ladle-train --data "$tmp/d32" --quiet --epochs 1 --batch 16 --dtype f64 --lr 1e5
mpi 1 "training diverged" ladle-train --data "$tmp/d32" --quiet --epochs 1 --batch 16 --bn --lr 1e8
mpi 1 "training diverged" ladle-train --data "$tmp/d32" --quiet --epochs 1 --batch 16 --pipeline gpipe --microbatches 2 --lr 1e5 --adam
mpi 1 "writing /dev/full failed: No space left on device" ladle-train --data "$tmp/d32" $short --summary /dev/full
mpi 1 "No space left on device" ladle-train --data "$tmp/d32" $short --pipeline 1f1b --microbatches 2 --timeline /dev/full
# resuming: the checkpoint must be of this run, and leave something to do
ck="$tmp/ck"
out=$(timeout 300 $MPIEXEC -n 2 "$BINDIR/ladle-train" --data "$tmp/d32" $short --epochs 2 --stop-after 1 --seed 3 --checkpoint "$ck" 2>&1)
check "a checkpoint after epoch 1 of 2" 0 "stopping after epoch 1" $? "$out"
mpi 2 "was written by another run: --seed 3 (this run: --seed 4)" ladle-train --data "$tmp/d32" $short --epochs 2 --seed 4 --checkpoint "$ck" --resume
mpi 2 "--batch 16 (this run: --batch 32)" ladle-train --data "$tmp/d32" --quiet --steps 3 --batch 32 --epochs 2 --seed 3 --checkpoint "$ck" --resume
mpi 2 "has finished epoch 1, and 1 was asked for: nothing to train" ladle-train --data "$tmp/d32" $short --seed 3 --checkpoint "$ck" --resume
mpi 2 "images of 32x32 (this run: images of 28x28), 96 training samples (this run: 60000 training samples)" ladle-train --data "$fm" $short --epochs 2 --seed 3 --checkpoint "$ck" --resume
mpi 2 "no batch norm (this run: --bn)" ladle-train --data "$tmp/d32" $short --epochs 2 --seed 3 --bn --checkpoint "$ck" --resume
mpi 2 "SGD (this run: --adam)" ladle-train --data "$tmp/d32" $short --epochs 2 --seed 3 --adam --checkpoint "$ck" --resume
mpi 2 "$tmp/ is a directory: use --resume latest" ladle-train --data "$tmp/d32" $short --epochs 2 --seed 3 --checkpoint "$tmp/" --resume
# --resume's value is optional: a bare --resume before another option stays bare
mpi 2 "was written by another run: --seed 3 (this run: --seed 4)" ladle-train --data "$tmp/d32" $short --epochs 2 --checkpoint "$ck" --resume --seed 4
mpi 2 "--resume latest needs --checkpoint DIR; $ck is a file" ladle-train --data "$tmp/d32" $short --epochs 2 --seed 3 --checkpoint "$ck" --resume latest
mpi 2 "--keep needs --checkpoint DIR; $ck is a file" ladle-train --data "$tmp/d32" $short --epochs 2 --seed 3 --checkpoint "$ck" --keep 2
mpi 2 "cannot open $tmp/none.ckpt" ladle-train --data "$tmp/d32" $short --epochs 2 --seed 3 --resume "$tmp/none.ckpt"
mpi 2 "$tmp/d32 is a directory, not a file" ladle-train --data "$tmp/d32" $short --epochs 2 --seed 3 --resume "$tmp/d32"
# --resume FILE resumes from a file of its own, saving nowhere or elsewhere
mpi 0 "resumed from $ck after epoch 1" ladle-train --data "$tmp/d32" $short --epochs 2 --seed 3 --resume "$ck"
# --resume latest: a checkpoint of another run in the directory is refused as
# one named by --checkpoint PATH, and one that has finished leaves nothing
mkdir "$tmp/other"
cp "$ck" "$tmp/other/epoch-000001.ckpt"
mpi 2 "$tmp/other/epoch-000001.ckpt was written by another run: --seed 3 (this run: --seed 4)" ladle-train --data "$tmp/d32" $short --epochs 2 --seed 4 --checkpoint "$tmp/other" --resume latest
mpi 2 "$tmp/other/epoch-000001.ckpt has finished epoch 1, and 1 was asked for" ladle-train --data "$tmp/d32" $short --seed 3 --checkpoint "$tmp/other" --resume latest
mpi 2 "--model lenet (this run: --model resnet8)" ladle-train --data "$tmp/d32" $short --epochs 2 --seed 3 --model resnet8 --checkpoint "$ck" --resume
# a ResNet on 32 x 32 images, and one that diverges
mpi 0 "ResNet-8 on $tmp/d32 (96 images of 32x32" ladle-train --data "$tmp/d32" $short --model resnet8
mpi 1 "training diverged" ladle-train --data "$tmp/d32" --quiet --epochs 1 --batch 16 --model resnet8 --lr 1e6

# ---- ladle-bn-study --------------------------------------------------------
RANK_COUNTS="2" mpi 2 "--spatial does not apply to ladle-bn-study" ladle-bn-study --spatial 2x1
RANK_COUNTS="2" mpi 2 "--checkpoint does not apply to ladle-bn-study" ladle-bn-study --checkpoint "$tmp/x"
RANK_COUNTS="2" mpi 2 "--bn-sync does not apply to ladle-bn-study" ladle-bn-study --bn-sync local
RANK_COUNTS="2" mpi 2 "--batch: the study's batches are --per-rank sizes" ladle-bn-study --batch 64
RANK_COUNTS="2" mpi 2 "--svg: cannot write" ladle-bn-study --svg "$tmp/missing/b.svg"
RANK_COUNTS="2" mpi 2 "--csv: $tmp is a directory" ladle-bn-study --csv "$tmp"
RANK_COUNTS="2" mpi 2 "--svg needs a value" ladle-bn-study --svg
RANK_COUNTS="2" mpi 2 "--modes: 'all' is not one of local, group2, group4, global" ladle-bn-study --modes local,all
RANK_COUNTS="2 3" mpi 2 "--modes: group2 needs a rank count that 2 divides, larger than 2" ladle-bn-study --modes local,group2
RANK_COUNTS="2" mpi 2 "--per-rank: 0 in '2,0' is out of range" ladle-bn-study --per-rank 2,0
RANK_COUNTS="2" mpi 2 "--seeds: 65 is out of range" ladle-bn-study --seeds 65
RANK_COUNTS="2" mpi 2 "--per-rank 1073741824 over 2 ranks makes a batch beyond" ladle-bn-study --per-rank 1073741824
RANK_COUNTS="1" mpi 2 "needs 2 or more ranks" ladle-bn-study --epochs 1
printf 'ranks,per_rank\n2,banana\n' >"$tmp/bad.csv"
RANK_COUNTS="2" mpi 2 "bad.csv, line 1: not a row of this tool's" ladle-bn-study --csv "$tmp/bad.csv"
RANK_COUNTS="2" mpi 0 "ladle-bn-study (ladle " ladle-bn-study --version
RANK_COUNTS="2" mpi 1 "No space left on device" ladle-bn-study --data "$tmp/d32" --epochs 1 --steps 2 --per-rank 8 --seeds 1 --svg /dev/full

# ---- ladle-gpt -------------------------------------------------------------
RANK_COUNTS="1" mpi 2 "--heads 3 must divide --width 128" ladle-gpt --heads 3
RANK_COUNTS="1" mpi 2 "--layers: 0 is out of range" ladle-gpt --layers 0
RANK_COUNTS="1" mpi 2 "--context: 'x' is not a whole number" ladle-gpt --context x
RANK_COUNTS="1" mpi 2 "--dropout: 1 is out of range" ladle-gpt --dropout 1
RANK_COUNTS="1" mpi 2 "--f32-tiles is for f32 models" ladle-gpt --f64 --f32-tiles
RANK_COUNTS="1" mpi 2 "--lr: 'nan' is not a number" ladle-gpt --lr nan
RANK_COUNTS="1" mpi 2 "--resume needs --checkpoint" ladle-gpt --resume
RANK_COUNTS="1" mpi 2 "--device: 'tpu' is not one of cpu, cuda, guarded" ladle-gpt --device tpu
RANK_COUNTS="1" mpi 2 "--device needs a value" ladle-gpt --device
RANK_COUNTS="1 2" mpi 2 "ladle-gpt: --device cuda: " ladle-gpt --device cuda
RANK_COUNTS="1 2" mpi 0 "ladle-gpt (ladle " ladle-gpt --version
RANK_COUNTS="1" mpi 2 "--stop-after needs --checkpoint" ladle-gpt --stop-after 3
RANK_COUNTS="1" mpi 2 "--min-lr 0.5 is above --lr 0.1" ladle-gpt --lr 0.1 --min-lr 0.5
RANK_COUNTS="1" mpi 2 "unknown option --frobnicate" ladle-gpt --frobnicate
RANK_COUNTS="1" mpi 2 "--summary: cannot write" ladle-gpt --summary "$tmp/missing/s"
RANK_COUNTS="3" mpi 2 "cannot split the batch" ladle-gpt --batch 4 --steps 1
RANK_COUNTS="2" mpi 2 "with --tensor-ways 3: cannot split the ranks" ladle-gpt --tensor-ways 3 --steps 1
RANK_COUNTS="2" mpi 2 "cannot split the context and the heads" ladle-gpt --tensor-ways 2 --context 7 --steps 1
RANK_COUNTS="1" mpi 2 "--tensor-ways: 0 is out of range" ladle-gpt --tensor-ways 0
RANK_COUNTS="1" mpi 1 "the corpus: " ladle-gpt --corpus "$tmp/no-such-corpus"
printf 'text\n%%\nmore\0\n' >"$tmp/nul-corpus"
RANK_COUNTS="1" mpi 1 "NUL byte at offset 11" ladle-gpt --corpus "$tmp/nul-corpus"
printf 'ab\n%%\ncd\n%%\n' >"$tmp/tiny-corpus"
RANK_COUNTS="1" mpi 1 "fewer than a window" ladle-gpt --corpus "$tmp/tiny-corpus" --val-every 2

# ---- ladle-adjoint ---------------------------------------------------------
mpi 2 "--px: the extent 4294967297 in '4294967297' is out of range" ladle-adjoint repartition --px 4294967297 --shape 4
mpi 2 "--px: rank 4294967296 in '4294967296' does not exist" ladle-adjoint broadcast --px 1@4294967296 --shape 3
mpi 2 "--seed: 'abc' is not a whole number" ladle-adjoint broadcast --seed abc --shape 3
mpi 2 "--tolerance: 'x' is not a number" ladle-adjoint broadcast --tolerance x --shape 3
mpi 2 "--shape: '3x' is not a shape" ladle-adjoint broadcast --shape 3x
mpi 2 "--device: 'gpu' is not one of cpu, cuda, guarded" ladle-adjoint broadcast --shape 3 --device gpu
mpi 2 "built without the cuda backend" ladle-adjoint broadcast --shape 3 --device cuda
mpi 2 "--kernel: 0 in '1,0' is out of range" ladle-adjoint halo-exchange --shape 4x4 --kernel 1,0
mpi 2 "--periodic: 8 in '1,8' is out of range" ladle-adjoint halo-exchange --shape 4x4 --periodic 1,8
mpi 2 "periodic is 0x4" ladle-adjoint halo-exchange --px 1x1 --shape 4x4 --kernel 1,3 --padding 0,1 --periodic 2
mpi 2 "--periodic does not apply to repartition" ladle-adjoint repartition --shape 4 --periodic 0
mpi 2 "--x-split '1' gives 1 dimension of sizes; the partition has 2" ladle-adjoint repartition --px 1x1 --py 1x1 --shape 1x1 --x-split 1
mpi 2 "--x-split '1/1/1' has more than the partition's 2 dimensions" ladle-adjoint repartition --px 1x1 --py 1x1 --shape 1x1 --x-split 1/1/1
mpi 2 "--counts gives 2 shares for groups of 1 members" ladle-adjoint all-gather --shape 7 --counts 5,2
mpi 2 "--counts: -1 in '-1' is out of range" ladle-adjoint reduce-scatter --shape 7 --counts -1
mpi 2 "counts[0] = 8 is too large" ladle-adjoint reduce-scatter --shape 7 --counts 8
mpi 2 "the counts sum to 6, not to dim 0's extent 7" ladle-adjoint all-gather --shape 7 --counts 6
mpi 2 "dim 1 is outside the tensor's 0..0" ladle-adjoint all-gather --shape 7 --dim 1
mpi 2 "axis 1 is outside the partition's 0..0" ladle-adjoint reduce-scatter --shape 7 --axis 1
mpi 2 "--axis does not apply to broadcast" ladle-adjoint broadcast --shape 3 --axis 0
mpi 2 "--axes does not apply to all-gather" ladle-adjoint all-gather --shape 3 --axes 0
mpi 2 "--py does not apply to all-sum-reduce" ladle-adjoint all-sum-reduce --py 1 --shape 3
# --py refused after --px made its partition (under make check-tool-leaks a
# leak of that partition fails these)
mpi 2 "--py: the extent 5 in '5x5' is out of range" ladle-adjoint broadcast --py 5x5
mpi 2 "--py: rank 9 in '9' does not exist" ladle-adjoint sum-reduce --px 1 --py 1@9 --shape 3
mpi 2 "--axes does not apply to broadcast" ladle-adjoint broadcast --axes 0 --shape 3
mpi 2 "the primitive: 'frobnicate' is not one of" ladle-adjoint frobnicate --shape 3
mpi 2 "unexpected argument 'again'" ladle-adjoint broadcast again
mpi 2 "unknown option '--shapes'" ladle-adjoint broadcast --shapes 3
mpi 0 "ladle-adjoint (ladle " ladle-adjoint --version

# ---- ladle-tour ------------------------------------------------------------
mpi 2 "unexpected argument '--quick'" ladle-tour --quick
mpi 0 "usage: mpiexec -n 6 ladle-tour" ladle-tour --help
mpi 0 "ladle-tour (ladle " ladle-tour --version

# ---- ladle-pipe (no launcher) ----------------------------------------------
plain 2 "--stages: '4abc' is not a whole number (expected 1 to 64)" ladle-pipe --stages 4abc
plain 2 "--microbatches: '1e3' is not a whole number" ladle-pipe --microbatches 1e3
plain 2 "--microbatches: 99999999999 is out of range" ladle-pipe --microbatches 99999999999
plain 2 "--f '1,2,3' gives 3 values for 4 stages" ladle-pipe --f 1,2,3
plain 2 "--b: -1 is out of range" ladle-pipe --b -1
plain 2 "--replicas needs --schedule hybrid" ladle-pipe --replicas 1,3
plain 2 "--stages does not apply to --load" ladle-pipe --load "$tmp/x" --stages 3
plain 2 "--svg: cannot write $tmp/missing/p.svg: No such file or directory" ladle-pipe --svg "$tmp/missing/p.svg"
plain 2 "--trace: $tmp is a directory" ladle-pipe --trace "$tmp"
plain 2 "No space left on device" ladle-pipe --svg /dev/full
plain 2 "unknown option '--frob'" ladle-pipe --frob 1
plain 2 "unexpected argument 'x'" ladle-pipe x
plain 0 "ladle-pipe (ladle " ladle-pipe --version

# ---- the benchmarks' options (bench/common.h) ------------------------------
bench 2 "--reps 0: wants a whole number in range [1, 1000]" "1 2" bench_layers --reps 0
bench 2 "--reps 5x: wants a whole number" "1" bench_layers --reps 5x
bench 2 "--threads -1: wants a whole number in range [1, 256]" "1" bench_layers --threads -1
bench 2 "--only gleu: is not one of the choices" "1" bench_layers --only gleu
bench 2 "--dtype f16: is not one of the choices (f32,f64)" "1" bench_layers --dtype f16
bench 2 "--rep 3: unknown option" "1" bench_layers --rep 3
bench 2 "--reps: needs a value" "1" bench_layers --only relu --reps
bench 0 "relu     32x64x32x32" "1" bench_layers --only relu --reps 1
bench 2 "--only halo,repartition: is not one of the choices" "1 2 3" bench_primitives --only halo,repartition
bench 2 "--min-kib 8 is above --max-kib 4" "2" bench_primitives --min-kib 8 --max-kib 4
bench 2 "--max-kib 99999999: wants a whole number" "2" bench_primitives --max-kib 99999999
bench 0 "broadcast" "2" bench_primitives --only broadcast --max-kib 1 --reps 1
bench 2 "--only xyz: is not one of the choices (conv-halo,dp-sync,vocab-loss,lenet,resnet)" "1 2" bench_dist --only xyz
bench 2 "--hidden 2: wants a whole number in range [3, 16384]" "1 2" bench_pipe --hidden 2
bench 2 "--steps 1e3: wants a whole number" "2" bench_pipe --steps 1e3
bench 2 "--svg-dir $tmp/missing: not a directory" "2" bench_pipe --svg-dir "$tmp/missing"
bench 1 "bench_pipe: cannot write /proc/pipeline_gpipe_measured.svg" "2" bench_pipe --svg-dir /proc --steps 1 --microbatches 4 --hidden 24
mkdir -p "$tmp/svg"
bench 0 "hybrid " "2" bench_pipe --svg-dir "$tmp/svg" --steps 1 --microbatches 4 --hidden 24
[ -s "$tmp/svg/pipeline_hybrid_measured.svg" ] && [ -s "$tmp/svg/pipeline_1f1b_simulated.svg" ]
check "bench_pipe --svg-dir wrote its pictures" 0 x $? x
bench 2 "--calls 5: wants a whole number in range [10, 100000000]" "1" bench_overhead --calls 5
bench 2 "--layers 0: wants a whole number in range [1, 1048576]" "1" bench_gpt --layers 0
bench 2 "--layer 2: unknown option" "1" bench_gpt --layer 2
bench 2 "--f32-tiles 2: wants a whole number in range [0, 1]" "1" bench_gpt --f32-tiles 2
bench 2 "usage: mpiexec -n 2 cma_pull" "1 2" cma_pull 0
bench 2 "usage: mpiexec -n 2 cma_pull" "3" cma_pull
# scripts/net-halo.sh refuses bad settings before it needs root or touches a network
for row in "NET_RATES=fast|a rate is none or a tc rate" "NET_RATES=10|a rate is none or a tc rate" \
    "NET_REPS=0|NET_REPS must be a count from 1" "NET_REPS=-3|NET_REPS must be a count from 1" \
    "NET_RANKS=1|NET_RANKS must be a count from 2"; do
    setting=${row%%|*}
    out=$(env "$setting" sh scripts/net-halo.sh "$BENCHDIR" 2>&1)
    check "$setting scripts/net-halo.sh" 2 "${row#*|}" $? "$out"
done
out=$(sh scripts/net-halo.sh "$tmp/none" 2>&1)
check "scripts/net-halo.sh without bench_dist" 2 "no $tmp/none/bench_dist" $? "$out"

echo "$fails failures"
[ "$fails" -eq 0 ]
