#!/bin/sh
# A training job killed by the scheduler restarts with one flag: ladle-train
# --checkpoint DIR --resume latest, the same command for the first start and
# every restart. LeNet-5, f64, data parallel on 2 ranks, 3 epochs of 30
# steps on a generated dataset (random 28x28 images, 10 classes).
#
# What it checks:
#   - the reference: the run to its end, uninterrupted, in an existing empty
#     DIR (it starts afresh and says so), keeping all 3 epoch files;
#   - the job: the same command, killed with SIGKILL (every rank at once)
#     in the middle of an epoch once a checkpoint exists, then started again
#     until it finishes: its per-step losses, epoch lines and summary from
#     the checkpoint on equal the reference's, and its last checkpoint is
#     the reference's byte for byte (the weights and the optimizer state,
#     bitwise); DIR holds the newest 2 files (--keep's default) and no .tmp;
#   - the same restart with the same command on 3 ranks (the layout takes 2
#     of them): bitwise the reference's again;
#   - the restart on 1 rank, where 2 data ways do not fit (--data-ways 1):
#     the gradient's sum over the batch is added in another order, so the
#     weights are not bitwise the same; its printed losses (4 decimals) must
#     be within 1e-4 of the reference's and its test accuracies equal
#     (f64: the two runs differ by about 1e-15, far below both); --keep 1
#     leaves one file;
#   - a directory whose newest file has a flipped byte and whose next is
#     torn (half its bytes), beside an unfinished .tmp write: both skipped
#     with a line naming them, the run resumes from the one whole file and
#     ends as the reference, the damaged file replaced.
#
# Needs ps (to find the ranks under the launcher); where it is missing it
# says so and skips (exit 0). Environment: MPIEXEC (mpiexec), BINDIR (bin).
set -u
skip() { echo "skip resume_kill: $*"; exit 0; }
ok() { echo "ok   $*"; }
bad() { echo "FAIL $*"; fails=$((fails + 1)); }
# a check's outcome: STATUS (0 passed) WHAT LOG (its tail shown on failure)
said() {
    if [ "$1" -eq 0 ]; then
        ok "$2"
    else
        bad "$2"
        tail -n 10 "$3" | sed 's/^/     /'
    fi
}
MPIEXEC=${MPIEXEC:-mpiexec}
BINDIR=${BINDIR:-bin}
train=$BINDIR/ladle-train
fails=0

[ -x "$train" ] || { echo "FAIL resume_kill: no $train"; exit 1; }
command -v ps >/dev/null || skip "needs ps to find the ranks to kill"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
trap 'exit 2' INT TERM

# A generated IDX dataset (as test/tool_errors.sh writes one): be32 N
# prints N as four big-endian bytes.
be32() {
    printf "\\$(printf %03o $(($1 >> 24 & 255)))\\$(printf %03o $(($1 >> 16 & 255)))"
    printf "\\$(printf %03o $(($1 >> 8 & 255)))\\$(printf %03o $(($1 & 255)))"
}
images() { # FILE N SIDE
    { printf '\000\000\010\003'; be32 "$2"; be32 "$3"; be32 "$3"; head -c $(($2 * $3 * $3)) /dev/urandom; } >"$1"
}
labels() { # FILE N CLASSES
    { printf '\000\000\010\001'; be32 "$2"
      i=0; while [ $i -lt "$2" ]; do printf "\\$(printf %03o $((i * 7 % $3)))"; i=$((i + 1)); done; } >"$1"
}
mkdir "$tmp/data"
images "$tmp/data/train-images-idx3-ubyte" 1280 28
labels "$tmp/data/train-labels-idx1-ubyte" 1280 10
images "$tmp/data/t10k-images-idx3-ubyte" 200 28
labels "$tmp/data/t10k-labels-idx1-ubyte" 200 10

common="--data $tmp/data --epochs 3 --steps 30 --batch 32 --dtype f64 --seed 7 --progress 1"
args="$common --data-ways 2 --resume latest"
run() { # LOG RANKS ARGS...: one start of the job
    log=$1 n=$2
    shift 2
    timeout 120 $MPIEXEC -n "$n" "$train" "$@" >"$log" 2>&1
}
# the lines to compare from a log: steps' losses and epoch lines, without
# their times and rates; FROM: the first epoch to keep
lines() { # LOG FROM
    awk -v from="$2" '
        /^epoch [0-9]+\/[0-9]+  step / { split($2, e, "/"); if (e[1] >= from) print $1, $2, $3, $4, $5, $6, $7, $8 }
        /^epoch [0-9]+: test accuracy/ { if ($2 + 0 >= from) { sub(/, [0-9.]+ s$/, ""); print } }' "$1"
}
summary() { sed -e 's/ms_per_step [0-9.]*//' -e 's/^ranks [0-9]* //' "$1"; }
files() { (cd "$1" && ls | tr '\n' ' '); }

# ---- the reference, uninterrupted, in an existing empty directory ----
mkdir "$tmp/ref"
if run "$tmp/ref.log" 2 $args --checkpoint "$tmp/ref" --keep 3 --summary "$tmp/ref.sum"; then
    if grep -q "no checkpoint in $tmp/ref yet: starting from the beginning" "$tmp/ref.log" &&
        [ "$(files "$tmp/ref")" = "epoch-000001.ckpt epoch-000002.ckpt epoch-000003.ckpt " ]; then
        ok "an empty DIR starts afresh, saying so; --keep 3 keeps 3 files"
    else
        bad "the reference in an empty DIR: $(files "$tmp/ref")"
        tail -n 5 "$tmp/ref.log" | sed 's/^/     /'
    fi
else
    bad "the reference run"
    tail -n 20 "$tmp/ref.log" | sed 's/^/     /'
    exit 1
fi

# ---- the job, killed in the middle of an epoch ----
# the ladle-train processes below the launcher PID
ranks_of() {
    ps -e -o pid= -o ppid= -o comm= | awk -v root="$1" '
        { pid[NR] = $1; parent[NR] = $2; name[NR] = $3 }
        END {
            below[root] = 1
            for (grew = 1; grew;) {
                grew = 0
                for (i in pid) if (below[parent[i]] && !below[pid[i]]) { below[pid[i]] = 1; grew = 1 }
            }
            for (i in pid) if (below[pid[i]] && name[i] == "ladle-train") printf "%s ", pid[i]
        }'
}
# Wait until the job is at step 2 of epoch E (E-1 saved), stop its ranks
# and see whether epoch E is still unfinished: then kill them all (0);
# otherwise let them go on (1).
kill_in_epoch() { # PID E LOG DIR
    pid=$1 e=$2 log=$3 dir=$4
    prev=$(printf '%s/epoch-%06d.ckpt' "$dir" $((e - 1)))
    for _ in $(seq 1500); do
        grep -q "^epoch $e/3  step 2/" "$log" 2>/dev/null && [ -f "$prev" ] && break
        kill -0 "$pid" 2>/dev/null || return 1
        sleep 0.02
    done
    ranks=$(ranks_of "$pid")
    [ -n "$ranks" ] || return 1
    kill -STOP $ranks
    if grep -q "^epoch $e: test accuracy" "$log" || [ -f "$(printf '%s/epoch-%06d.ckpt' "$dir" "$e")" ]; then
        kill -CONT $ranks
        return 1
    fi
    killed_at=$(grep "^epoch $e/3  step " "$log" | tail -n 1 | cut -d' ' -f1-5)
    kill -KILL $ranks
    return 0
}
# An epoch takes about 80 ms on an idle machine: on a loaded one the
# watcher may see it only once it has ended, so the job is started afresh
# (up to 5 times) until it is caught inside one.
killed=0
for attempt in 1 2 3 4 5; do
    rm -rf "$tmp/job" "$tmp/job.sum"
    $MPIEXEC -n 2 "$train" $args --checkpoint "$tmp/job/" --summary "$tmp/job.sum" \
        >"$tmp/job.1.log" 2>&1 &
    job=$!
    for e in 2 3; do
        if kill_in_epoch $job $e "$tmp/job.1.log" "$tmp/job"; then
            killed=$e
            break
        fi
    done
    wait $job
    status=$?
    [ $killed -gt 0 ] && break
    echo "note: attempt $attempt ended before the watcher caught it inside an epoch"
done
if [ $killed -gt 0 ] && [ $status -ne 0 ] && ! grep -q "^done:" "$tmp/job.1.log"; then
    ok "the job killed with SIGKILL at '$killed_at' (the launcher's status $status)"
else
    bad "could not kill the job in the middle of an epoch (status $status)"
    tail -n 5 "$tmp/job.1.log" | sed 's/^/     /'
    exit 1
fi
from=$((killed - 1))
ckpt=$(printf 'epoch-%06d.ckpt' $from)
cp -r "$tmp/job" "$tmp/job3"
cp -r "$tmp/job" "$tmp/job1"

# ---- the same command again, until it finishes ----
tries=0
until run "$tmp/job.2.log" 2 $args --checkpoint "$tmp/job/" --summary "$tmp/job.sum"; do
    tries=$((tries + 1))
    [ $tries -lt 3 ] || break
done
grep -q "resumed from $tmp/job/$ckpt after epoch $from" "$tmp/job.2.log" && grep -q "^done:" "$tmp/job.2.log"
said $? "restarted with the same command: resumed after epoch $from and finished" "$tmp/job.2.log"
want=$(lines "$tmp/ref.log" $killed)
got=$(lines "$tmp/job.2.log" $killed)
if [ -n "$want" ] && [ "$got" = "$want" ] && [ "$(summary "$tmp/job.sum")" = "$(summary "$tmp/ref.sum")" ]; then
    ok "$(echo "$got" | wc -l) step and epoch lines from the checkpoint on and the summary equal the reference's"
else
    bad "the restarted job's lines differ from the reference's"
    printf '%s\n' "$want" >"$tmp/want"
    printf '%s\n' "$got" >"$tmp/got"
    diff "$tmp/want" "$tmp/got" | head -n 10 | sed 's/^/     /'
fi
if cmp -s "$tmp/job/epoch-000003.ckpt" "$tmp/ref/epoch-000003.ckpt"; then
    ok "the last checkpoint is the reference's, byte for byte"
else
    bad "the last checkpoint differs from the reference's"
fi
if [ "$(files "$tmp/job")" = "epoch-000002.ckpt epoch-000003.ckpt " ]; then
    ok "--keep's default leaves the newest 2 files and no .tmp"
else
    bad "the job's DIR holds: $(files "$tmp/job")"
fi

# ---- the restart on 3 ranks, the same command ----
run "$tmp/job3.log" 3 $args --checkpoint "$tmp/job3/" --summary "$tmp/job3.sum" &&
    [ "$(lines "$tmp/job3.log" $killed)" = "$want" ] &&
    [ "$(summary "$tmp/job3.sum")" = "$(summary "$tmp/ref.sum")" ] &&
    cmp -s "$tmp/job3/epoch-000003.ckpt" "$tmp/ref/epoch-000003.ckpt"
said $? "restarted on 3 ranks with the same command: the reference's lines and last checkpoint" "$tmp/job3.log"

# ---- the restart on 1 rank, one data way ----
# the lines' numbers against the reference's: losses within 1e-4 (one unit
# of the 4th decimal), accuracies equal
close() { # WANT GOT
    printf '%s\n' "$1" >"$tmp/a"
    printf '%s\n' "$2" >"$tmp/b"
    [ "$(wc -l <"$tmp/a")" -eq "$(wc -l <"$tmp/b")" ] || return 1
    paste -d '|' "$tmp/a" "$tmp/b" | awk -F'|' '
        function nums(s, out,   n, i, w, k) { n = split(s, w, /[ (),%\/]+/); k = 0
            for (i = 1; i <= n; i++) if (w[i] ~ /^-?[0-9.]+$/) out[++k] = w[i]; return k }
        { na = nums($1, a); nb = nums($2, b); if (na != nb) bad = 1
          for (i = 1; i <= na; i++) { d = a[i] - b[i]; if (d < 0) d = -d; if (d > 1e-4 + 1e-9) bad = 1 } }
        END { exit bad }'
}
run "$tmp/job1.log" 1 $common --data-ways 1 --resume latest --checkpoint "$tmp/job1/" --keep 1 \
    --summary "$tmp/job1.sum" && close "$want" "$(lines "$tmp/job1.log" $killed)" &&
    close "$(summary "$tmp/ref.sum")" "$(summary "$tmp/job1.sum" | sed 's/layout 1x1x1/layout 2x1x1/')"
said $? "restarted on 1 rank (--data-ways 1): losses within 1e-4, accuracies equal" "$tmp/job1.log"
if [ "$(files "$tmp/job1")" = "epoch-000003.ckpt " ]; then
    ok "--keep 1 leaves one file"
else
    bad "--keep 1 left: $(files "$tmp/job1")"
fi

# ---- a damaged newest file, a torn one, an unfinished write ----
mkdir "$tmp/bad"
cp "$tmp/ref/"epoch-00000[123].ckpt "$tmp/bad/"
size=$(wc -c <"$tmp/bad/epoch-000003.ckpt")
printf 'X' | dd of="$tmp/bad/epoch-000003.ckpt" bs=1 seek=$((size / 2)) conv=notrunc 2>/dev/null
head -c $((size / 2)) "$tmp/ref/epoch-000002.ckpt" >"$tmp/bad/epoch-000002.ckpt"
head -c 100 "$tmp/ref/epoch-000003.ckpt" >"$tmp/bad/epoch-000004.ckpt.tmp"
run "$tmp/bad.log" 2 $args --checkpoint "$tmp/bad" --summary "$tmp/bad.sum" &&
    grep -q "skipping $tmp/bad/epoch-000003.ckpt: .*damaged" "$tmp/bad.log" &&
    grep -q "skipping $tmp/bad/epoch-000002.ckpt: .*truncated or torn" "$tmp/bad.log" &&
    grep -q "skipping $tmp/bad/epoch-000004.ckpt.tmp: a write that never finished" "$tmp/bad.log" &&
    grep -q "resumed from $tmp/bad/epoch-000001.ckpt after epoch 1" "$tmp/bad.log" &&
    [ "$(lines "$tmp/bad.log" 2)" = "$(lines "$tmp/ref.log" 2)" ] &&
    cmp -s "$tmp/bad/epoch-000003.ckpt" "$tmp/ref/epoch-000003.ckpt"
said $? "a damaged and a torn file skipped, named; resumed after epoch 1, ended as the reference" "$tmp/bad.log"
[ $fails -eq 0 ] || exit 1
