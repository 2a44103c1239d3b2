#!/bin/sh
# Install what ladle needs from Debian packages, and only what is missing.
#
#   scripts/install-deps.sh            install missing packages (as root, with apt-get)
#   scripts/install-deps.sh --check    exit 0 if everything is present, 1 otherwise
#   scripts/install-deps.sh valgrind   the same, with extra packages a target needs
#
# Run as another user, it prints the exact command to run instead of
# trying sudo behind the caller's back.
set -eu

# g++ compiles the check that the public header is valid C++.
# zlib reads the gzip-compressed datasets; dataset-fashion-mnist is the
# default training data (ladle-train, make demo); fortunes' English files are
# the character-level text corpus (ladle/text.h, docs/transformers.md).
PACKAGES="make gcc g++ mpich libmpich-dev libopenblas-dev check pkg-config zlib1g-dev dataset-fashion-mnist fortunes"
check_only=0
for arg in "$@"; do
    case "$arg" in
    --check) check_only=1 ;;
    *) PACKAGES="$PACKAGES $arg" ;;
    esac
done

if ! command -v dpkg-query >/dev/null 2>&1; then
    echo "install-deps: not a Debian system; provide MPI, OpenBLAS and Check yourself" >&2
    exit 0
fi

missing=""
for p in $PACKAGES; do
    if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
        missing="$missing $p"
    fi
done

if [ -z "$missing" ]; then
    exit 0
fi
if [ "$check_only" = 1 ]; then
    echo "missing packages:$missing"
    exit 1
fi

if [ "$(id -u)" -ne 0 ]; then
    echo "ladle needs these Debian packages:$missing" >&2
    echo "run as root:  apt-get update && apt-get install -y --no-install-recommends$missing" >&2
    exit 1
fi

# What mpicc, mpiexec and <mpi.h> mean before the install: a package such as
# python3-mpi4py pulls in Open MPI, whose higher priority would take these
# names over from the MPI the user chose. They are put back afterwards.
MPI_GROUPS="mpi mpirun mpi-$(dpkg-architecture -qDEB_HOST_MULTIARCH 2>/dev/null || echo x86_64-linux-gnu)"
alt_value() { update-alternatives --query "$1" 2>/dev/null | sed -n 's/^Value: //p'; }
before=""
for g in $MPI_GROUPS; do
    before="$before $g=$(alt_value "$g")"
done

echo "installing:$missing"
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
# shellcheck disable=SC2086
apt-get install -y -qq --no-install-recommends $missing

for pair in $before; do
    g=${pair%%=*}
    old=${pair#*=}
    now=$(alt_value "$g")
    if [ -n "$old" ] && [ "$old" != "$now" ]; then
        update-alternatives --quiet --set "$g" "$old"
        echo "install-deps: the install moved the system's '$g' alternative to $now;" \
            "put it back to $old (update-alternatives --auto $g gives the packages' choice)"
    fi
done
