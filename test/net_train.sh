#!/bin/sh
# Training across two "nodes": LeNet-5, data parallel on 2 ranks, each rank
# in a network namespace of its own, the two joined by a veth pair and
# talking TCP (UCX_TLS=tcp,self; MPIR_CVAR_NOLOCAL=1, since both namespaces
# share the host name and /dev/shm, which MPICH would otherwise use). Hydra
# starts one proxy per "host" through a launcher that enters the host's
# namespace instead of ssh, the way a cluster's launcher enters a node.
#
# What it checks:
#   - the run over the link ends where the same run ends on one node
#     (the summary's accuracy and losses, f64), so the multi-node path is
#     the same computation;
#   - a checkpoint written over the link (rank 0 writes it) is resumed by
#     a plain one-node run, whose remaining epoch ends as the uninterrupted
#     run's does.
#
# Needs root (ip netns), iproute2, MPICH on UCX and the dataset; where any
# is missing it says so and skips (exit 0). Environment: MPIEXEC
# (mpiexec.mpich), BINDIR (bin), LADLE_DATA.
set -u
MPIEXEC=${MPIEXEC:-mpiexec.mpich}
BINDIR=${BINDIR:-bin}
data=${LADLE_DATA:-/usr/share/datasets/fashion-mnist}
train=$BINDIR/ladle-train
fails=0
ok() { echo "ok   $*"; }
bad() { echo "FAIL $*"; fails=$((fails + 1)); }
skip() {
    echo "skip net_train: $*"
    exit 0
}

[ -x "$train" ] || { echo "FAIL net_train: no $train"; exit 1; }
[ "$(id -u)" = 0 ] || skip "needs root for ip netns"
command -v ip >/dev/null || skip "needs iproute2 (ip)"
[ -f "$data/train-images-idx3-ubyte.gz" ] || skip "no dataset at $data"
mpi=$(command -v "${MPIEXEC%% *}") || skip "no ${MPIEXEC%% *}"
# the launcher flags below are Hydra's (MPICH's mpiexec)
"$mpi" --version 2>/dev/null | grep -q HYDRA || skip "$MPIEXEC is not MPICH's Hydra"
# the transport settings are UCX's: another MPICH would keep its shared
# memory, and the run would not cross the link
if command -v mpichversion >/dev/null; then
    mpichversion | grep -q 'Device:.*ucx' || skip "MPICH is not built on UCX"
fi

tmp=$(mktemp -d)
a=ladle-nt-a-$$ b=ladle-nt-b-$$
cleanup() {
    ip netns del "$a" 2>/dev/null
    ip netns del "$b" 2>/dev/null
    rm -rf "$tmp"
}
trap cleanup EXIT
trap 'exit 2' INT TERM
# a machine (or container) that may not make namespaces skips, as one
# without root does
ip netns add "$a" 2>"$tmp/err" && ip netns add "$b" 2>>"$tmp/err" ||
    skip "cannot make network namespaces ($(head -n 1 "$tmp/err"))"
ip link add nt$$a type veth peer name nt$$b 2>"$tmp/err" ||
    skip "cannot make a veth pair ($(head -n 1 "$tmp/err"))"
ip link set nt$$a netns "$a" && ip link set nt$$b netns "$b" &&
    ip -n "$a" addr add 10.77.0.1/24 dev nt$$a && ip -n "$b" addr add 10.77.0.2/24 dev nt$$b &&
    ip -n "$a" link set lo up && ip -n "$b" link set lo up &&
    ip -n "$a" link set nt$$a up && ip -n "$b" link set nt$$b up ||
    { echo "FAIL net_train: the link would not come up"; exit 1; }

# the launcher Hydra calls in place of ssh: [options] HOST COMMAND
cat >"$tmp/enter" <<EOF
#!/bin/sh
while [ \$# -gt 0 ]; do case \$1 in -*) shift ;; *) break ;; esac; done
case \$1 in
10.77.0.1) ns=$a ;;
10.77.0.2) ns=$b ;;
*) echo "net_train: no namespace for host \$1" >&2; exit 1 ;;
esac
shift
exec ip netns exec \$ns sh -c "\$*"
EOF
chmod +x "$tmp/enter"

args="--quiet --steps 30 --batch 32 --dtype f64 --seed 4 --test-limit 1000 --data-ways 2"
# the link run calls Hydra itself (with its own launcher flags), the node run MPIEXEC
over_link() { # ARGS...: 2 ranks, one in each namespace; mpiexec runs in the first
    timeout 600 ip netns exec "$a" "$mpi" -iface nt$$a -launcher ssh \
        -launcher-exec "$tmp/enter" -hosts 10.77.0.1,10.77.0.2 -n 2 -ppn 1 \
        env UCX_TLS=tcp,self UCX_NET_DEVICES=nt$$a,nt$$b UCX_LOG_LEVEL=error \
        MPIR_CVAR_NOLOCAL=1 "$train" $args "$@" >>"$tmp/log" 2>&1
}
one_node() { # ARGS...
    timeout 600 $MPIEXEC -n 2 "$train" $args "$@" >>"$tmp/log" 2>&1
}
# the summary line without its timing
tail_of() { sed -e 's/ms_per_step [0-9.]*//' "$1"; }

if over_link --epochs 1 --summary "$tmp/link"; then
    # LeNet-5's 61706 gradients in f64, summed 30 times: at least 14 MB
    # cross the link each way (less would mean the ranks met another way)
    bytes=$(ip netns exec "$a" sh -c "cat /sys/class/net/nt$$a/statistics/tx_bytes")
    if [ "${bytes:-0}" -gt 14000000 ]; then
        ok "ladle-train over TCP between two namespaces ($bytes bytes sent over the link)"
    else
        bad "ladle-train over the link sent ${bytes:-no} bytes over it"
    fi
else
    bad "ladle-train over TCP between two namespaces"
    tail -n 20 "$tmp/log" | sed 's/^/     /'
fi
one_node --epochs 1 --summary "$tmp/node" || bad "ladle-train on one node"
if [ -s "$tmp/link" ] && [ "$(tail_of "$tmp/link")" = "$(tail_of "$tmp/node")" ]; then
    ok "the link's run ends as the node's: $(tail_of "$tmp/link" | cut -c1-80)"
else
    bad "link '$(tail_of "$tmp/link" 2>/dev/null)' node '$(tail_of "$tmp/node" 2>/dev/null)'"
fi

# a checkpoint written over the link, resumed on one node
one_node --epochs 2 --summary "$tmp/whole" || bad "ladle-train, two epochs, one node"
if over_link --epochs 2 --stop-after 1 --checkpoint "$tmp/ckpt" &&
    one_node --epochs 2 --checkpoint "$tmp/ckpt" --resume --summary "$tmp/resumed"; then
    if [ "$(tail_of "$tmp/resumed")" = "$(tail_of "$tmp/whole")" ]; then
        ok "a checkpoint from the link resumes on one node and ends as the whole run"
    else
        bad "resumed '$(tail_of "$tmp/resumed")' whole '$(tail_of "$tmp/whole")'"
    fi
else
    bad "checkpoint over the link, resume on one node"
    tail -n 20 "$tmp/log" | sed 's/^/     /'
fi
[ $fails -eq 0 ] || exit 1
