#!/bin/sh
# Prepare what scripts/device-check.sh carries to the GPU machine, which
# reaches no package registry: Debian's packages of what ladle builds and
# runs with that the machine's image may lack, downloaded here (a Debian 12
# machine with apt) into .device/debs/ (ignored by git: /.device/ in
# .gitignore), where the device tool's `carry` takes them along. There the
# script unpacks only those it needs with dpkg -x into a private prefix.
#
#   scripts/device-prep.sh [DIR]     (default .device/debs; run from anywhere)
#
# What is carried, by what it serves (the runtime libraries only where a
# package needs them; device-check.sh unpacks one only when the machine's
# loader does not know its soname):
#   MPICH      mpich (hydra's mpiexec and its proxy, the mpicc script),
#              libmpich12, libmpich-dev (headers), and what they load:
#              libhwloc15, libudev1, libslurm38 (hydra links it), libucx0
#              (MPICH's ch4 device), libnuma1, libgfortran5, libquadmath0.
#              UCX's InfiniBand modules would need libibverbs1 and
#              librdmacm1: left out, UCX skips a module it cannot load and
#              one node needs only its shared-memory and TCP transports.
#   OpenBLAS   libopenblas0-pthread, libopenblas-pthread-dev (cblas.h)
#   Check      check, libsubunit0, libsubunit-dev
#   zlib       zlib1g, zlib1g-dev (the image has libz.so.1, maybe no header)
#   make       make (the CUDA image has gcc and g++, since nvcc needs them,
#              but nothing says it has make)
# gcc, g++ and libc6-dev are not carried (about 60 MB, and nvcc's host
# compiler must be the image's own).
#
# The -dev packages are repacked without their static libraries (ladle links
# the shared ones), Fortran modules and documentation: libmpich-dev and
# libopenblas-pthread-dev are 9 MB and 5 MB as Debian ships them, almost all
# libmpich.a and libopenblas.a. The total is printed at the end (about 18 MB).
set -eu
cd "$(dirname "$0")/.."
dest=${1:-.device/debs}

RUNTIME="libmpich12 libhwloc15 libudev1 libslurm38 libucx0 libnuma1 libgfortran5 libquadmath0
libopenblas0-pthread libsubunit0 zlib1g"
TOOLS="mpich check make"
SLIM="libmpich-dev libopenblas-pthread-dev libsubunit-dev zlib1g-dev"

command -v apt-get >/dev/null && command -v dpkg-deb >/dev/null ||
    { echo "device-prep: needs Debian's apt-get and dpkg-deb" >&2; exit 1; }
. /etc/os-release
[ "${VERSION_CODENAME:-}" = bookworm ] ||
    echo "device-prep: warning: built for Debian 12 (bookworm), this is ${PRETTY_NAME:-unknown}" >&2

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
rm -rf "$dest"
mkdir -p "$dest"
# shellcheck disable=SC2086
(cd "$tmp" && apt-get download -q $RUNTIME $TOOLS $SLIM) >"$tmp/apt.log" 2>&1 ||
    { cat "$tmp/apt.log" >&2; echo "device-prep: apt-get download failed (apt-get update first?)" >&2; exit 1; }
# named by package alone (versions in the MANIFEST): Debian's file names
# carry an escaped epoch ('%3a') that a transfer need not keep
for p in $RUNTIME $TOOLS; do
    mv "$tmp/${p}_"*.deb "$dest/$p.deb"
done

# A -dev package without what ladle's build does not read: static
# libraries, Fortran modules, documentation. The md5sums list would be
# stale: dropped (dpkg -x does not read it).
slim() { # PACKAGE
    root="$tmp/root-$1"
    dpkg-deb -R "$tmp/${1}_"*.deb "$root"
    find "$root" \( -name '*.a' -o -name '*.mod' \) -delete
    rm -rf "$root/usr/share/doc" "$root/usr/share/man" "$root/DEBIAN/md5sums"
    find "$root" -depth -type d -empty -delete
    dpkg-deb --root-owner-group -Zxz -b "$root" "$dest/$1+slim.deb" >/dev/null
}
for p in $SLIM; do
    slim "$p"
done

# the manifest: package, version, file (device-check.sh logs it)
for f in "$dest"/*.deb; do
    printf '%s %s %s\n' "$(dpkg-deb -f "$f" Package)" "$(dpkg-deb -f "$f" Version)" \
        "$(basename "$f")"
done >"$dest/MANIFEST"

echo "device-prep: $dest"
for f in "$dest"/*.deb; do
    printf '  %-55s %8d KiB\n' "$(basename "$f")" $(( $(wc -c <"$f") / 1024 ))
done
echo "  total $(du -sk "$dest" | cut -f1) KiB"
echo "the device run, from this checkout's root:"
echo "  run(command='bash scripts/device-check.sh \"\$OUT\"', carry=[\"$(dirname "$dest")\"], timeout_s=540)"
