#!/bin/sh
# scripts/net-halo.sh [BENCH_DIR]: the spatial layers' halo exchange, with
# and without LADLE_OVERLAP_HALO, where the exchange crosses a network,
# emulated on one machine. Two MPICH ranks (MPICH built on UCX, as Debian's
# is) run in a network namespace of their own and talk TCP over its
# loopback device (UCX_TLS=tcp,self and MPIR_CVAR_NOLOCAL=1: no shared
# memory between them), first as the loopback is, then with the loopback
# shaped to each rate by a token bucket (tc tbf, 9000-byte frames): a link
# whose transfer time the kernel spends, not the ranks. For each link it
# runs bench_dist --only conv-halo (its halo-ovl rows: overlapped / plain,
# below 1 where the overlap gains) and ends with one table of those ratios.
#
# Needs root (ip netns, tc) and iproute2; the namespace is removed on exit.
# Environment: NET_RATES (none 10gbit 1gbit; "none" is the loopback
# unshaped), NET_REPS (bench_dist's --reps, 21), NET_RANKS (2), MPIEXEC
# (mpiexec.mpich).
#
#   make build/bench/bench_dist && scripts/net-halo.sh build/bench
set -u
dir=${1:-build/bench}
rates=${NET_RATES:-none 10gbit 1gbit}
reps=${NET_REPS:-21}
ranks=${NET_RANKS:-2}
mpiexec=${MPIEXEC:-mpiexec.mpich}
bench=$dir/bench_dist

fail() {
    echo "net-halo: $*" >&2
    exit 2
}
# the settings first, then what the machine must have
case $reps in '' | *[!0-9]* | 0) fail "NET_REPS must be a count from 1, not '$reps'" ;; esac
case $ranks in '' | *[!0-9]* | 0 | 1) fail "NET_RANKS must be a count from 2, not '$ranks'" ;; esac
for r in $rates; do
    case $r in none | [0-9]*[kmg]bit) ;; *) fail "a rate is none or a tc rate such as 10gbit, not '$r'" ;; esac
done
[ -x "$bench" ] || fail "no $bench (make build/bench/bench_dist)"
[ "$(id -u)" = 0 ] || fail "needs root for ip netns and tc"
command -v ip >/dev/null && command -v tc >/dev/null || fail "needs iproute2 (ip, tc)"
command -v "$mpiexec" >/dev/null || fail "no $mpiexec"
# the transport settings below are UCX's: another MPICH would keep its
# shared memory or fail to start, and the figures would not be a network's
if command -v mpichversion >/dev/null; then
    mpichversion | grep -q 'Device:.*ucx' || fail "MPICH is not built on UCX ($(mpichversion | grep Device:))"
fi

ns=ladle-net-$$
ip netns add "$ns" || fail "ip netns add failed"
trap 'ip netns del "$ns" 2>/dev/null' EXIT
trap 'exit 2' INT TERM
in_ns() { ip netns exec "$ns" "$@"; }
in_ns ip link set lo up || fail "the namespace's loopback would not come up"

table=""
st=0
for r in $rates; do
    in_ns tc qdisc del dev lo root 2>/dev/null
    if [ "$r" = none ]; then
        in_ns ip link set lo mtu 65536
        link="TCP over the loopback, unshaped"
    else
        # frames of 9000 bytes and a bucket of two: the rate holds per frame;
        # a deep queue, so that TCP sees no loss
        in_ns ip link set lo mtu 9000 &&
            in_ns tc qdisc add dev lo root tbf rate "$r" burst 18kb limit 64mb ||
            fail "tc could not shape the loopback to $r"
        link="TCP over the loopback shaped to $r"
    fi
    echo "== $link, $ranks ranks"
    log=$(mktemp) || fail "mktemp failed"
    if in_ns env UCX_TLS=tcp,self UCX_NET_DEVICES=lo MPIR_CVAR_NOLOCAL=1 \
        OPENBLAS_NUM_THREADS=1 timeout 600 "$mpiexec" -n "$ranks" -bind-to core -genvall \
        "$bench" --only conv-halo --reps "$reps" >"$log" 2>&1; then
        cat "$log"
        table="$table$(awk -v l="$r" '/^halo-ovl/ { printf "%-7s %s\n", l, $0 }' "$log")
"
    else
        cat "$log"
        echo "net-halo: bench_dist failed on the link $r"
        st=1
    fi
    rm -f "$log"
done
echo "== halo-ovl over each link (overlapped ms, plain ms, overlapped / plain)"
printf '%s' "$table"
exit $st
