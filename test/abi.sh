#!/bin/sh
# The C ABI as a user meets it (make check runs this after installing into a
# temporary prefix):
#  - the shared library's names: libladle.so.X.Y.Z, soname libladle.so.X,
#    the links; its exported symbols exactly the declared ones
#  - an installed tool runs without LD_LIBRARY_PATH (RUNPATH $ORIGIN/../lib)
#  - a program built with pkg-config (ladle.pc brings the MPI's flags), and,
#    where cmake is installed, with find_package(ladle), runs on 1 and 2 ranks
#  - a program compiled and run with another MPI than libladle's (where that
#    MPI's wrapper is installed) gets LADLE_ERR_MPI, not a crash
#
#   test/abi.sh PREFIX LIBDIR     (MPICC, MPIEXEC: the build's pair)
set -u
prefix=${1:?usage: test/abi.sh PREFIX LIBDIR}
libdir=${2:?usage: test/abi.sh PREFIX LIBDIR}
MPIEXEC=${MPIEXEC:-mpiexec}
TIMEOUT=${TEST_TIMEOUT:-300}
flags=""
if $MPIEXEC --version 2>&1 | grep -qiE "open ?(mpi|rte)"; then
    flags="--oversubscribe"
fi
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OPENBLAS_NUM_THREADS=1
unset LD_LIBRARY_PATH
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
pass=0
fail=0
failed=""
result() { # NAME STATUS LOG
    if [ "$2" = 0 ]; then
        pass=$((pass + 1))
        printf 'PASS %s\n' "$1"
    elif [ "$2" = skip ]; then
        printf 'SKIP %s\n' "$1"
    else
        fail=$((fail + 1))
        failed="$failed $1"
        printf 'FAIL %s\n' "$1"
        [ -f "$3" ] && sed 's/^/    | /' "$3" | tail -30
    fi
}

version=$(sed -n 's/.*LADLE_VERSION_STRING "\(.*\)"/\1/p' include/ladle/core.h)
# the soname's ABI number: MAJOR from 1.0 on, MAJOR.MINOR before (Makefile)
major=${version%%.*}
abi=$major
[ "$major" = 0 ] && { rest=${version#*.}; abi=0.${rest%%.*}; }
log=$work/names.log
{
    lib=$prefix/lib
    [ -f "$lib/libladle.so.$version" ] && [ ! -L "$lib/libladle.so.$version" ] &&
        [ "$(readlink "$lib/libladle.so.$abi")" = "libladle.so.$version" ] &&
        [ "$(readlink "$lib/libladle.so")" = "libladle.so.$abi" ] &&
        readelf -d "$lib/libladle.so.$version" | grep -q "SONAME.*\[libladle.so.$abi\]"
} >"$log" 2>&1
st=$?
[ $st = 0 ] || ls -l "$prefix/lib" >>"$log" 2>&1
result "library names (libladle.so.$version, soname libladle.so.$abi)" $st "$log"

log=$work/symbols.log
scripts/check-symbols.sh "$libdir/libladle.so" include/ladle.h include/ladle/*.h >"$log" 2>&1
result "exported symbols = LADLE_API declarations" $? "$log"

log=$work/tool.log
{
    readelf -d "$prefix/bin/ladle-adjoint" | grep -q 'RUNPATH.*\$ORIGIN/\.\./lib' &&
        timeout "$TIMEOUT" $MPIEXEC $flags -n 2 "$prefix/bin/ladle-adjoint" broadcast
} >"$log" 2>&1
result "installed tool without LD_LIBRARY_PATH (RUNPATH)" $? "$log"

# one program, built the two ways a user would, run on 1 and 2 ranks
run_consumer() { # NAME PROGRAM LOG
    for n in 1 2; do
        timeout "$TIMEOUT" $MPIEXEC $flags -n $n "$2" >>"$3" 2>&1 || return 1
    done
}
log=$work/pkgconfig.log
export PKG_CONFIG_PATH="$prefix/lib/pkgconfig${PKG_CONFIG_PATH:+:$PKG_CONFIG_PATH}"
{
    echo "ladle.pc: mpi=$(pkg-config --variable=mpi ladle), $(pkg-config --cflags --libs ladle)"
    [ -n "$(pkg-config --variable=mpi ladle)" ] &&
        cc -o "$work/consumer-pc" test/abi_consumer.c $(pkg-config --cflags --libs ladle) \
            -Wl,-rpath,"$prefix/lib"
} >"$log" 2>&1 && run_consumer pkgconfig "$work/consumer-pc" "$log"
result "a program built with pkg-config (ladle.pc) at 1 and 2 ranks" $? "$log"

log=$work/cmake.log
if command -v cmake >/dev/null 2>&1; then
    mkdir -p "$work/cm/src"
    cp test/abi_consumer.cmake "$work/cm/src/CMakeLists.txt"
    cp test/abi_consumer.c "$work/cm/src/consumer.c"
    {
        cmake -S "$work/cm/src" -B "$work/cm/build" -DCMAKE_PREFIX_PATH="$prefix" \
            -DCMAKE_BUILD_TYPE=Release &&
            cmake --build "$work/cm/build"
    } >"$log" 2>&1 && run_consumer cmake "$work/cm/build/consumer" "$log"
    result "a program built with CMake (find_package(ladle)) at 1 and 2 ranks" $? "$log"
    # before 1.0 the soname changes with the minor version: asking for an
    # older minor (another soname) must be refused by the version file
    if [ "$major" = 0 ] && [ "$abi" != 0.0 ]; then
        log=$work/cmake-old.log
        mkdir -p "$work/cm/old"
        sed "s/find_package(ladle [0-9.]* REQUIRED)/find_package(ladle 0.$((${abi#0.} - 1)) REQUIRED)/" \
            test/abi_consumer.cmake >"$work/cm/old/CMakeLists.txt"
        cp test/abi_consumer.c "$work/cm/old/consumer.c"
        if cmake -S "$work/cm/old" -B "$work/cm/build-old" -DCMAKE_PREFIX_PATH="$prefix" \
            >"$log" 2>&1; then st=1; else grep -q "compatible" "$log"; st=$?; fi
        result "find_package(ladle 0.$((${abi#0.} - 1))) refused by $version (another soname)" $st "$log"
    fi
else
    result "a program built with CMake (cmake is not installed)" skip ""
fi

# the other family's wrapper: Open MPI's for an MPICH build, and back
log=$work/foreign.log
mpi=$(pkg-config --variable=mpi ladle)
case "$mpi" in
"Open MPI"*) other=mpicc.mpich ;;
*) other=mpicc.openmpi ;;
esac
if command -v $other >/dev/null 2>&1; then
    {
        $other -Iinclude -o "$work/foreign" test/abi_foreign.c -L"$libdir" -lladle \
            -Wl,-rpath,"$(cd "$libdir" && pwd)" &&
            timeout "$TIMEOUT" "$work/foreign"
    } >"$log" 2>&1
    result "a program of another MPI ($other) against libladle ($mpi): LADLE_ERR_MPI" $? "$log"
else
    result "a program of another MPI ($other is not installed)" skip ""
fi

echo "abi: $pass passed, $fail failed${failed:+:$failed}"
[ $fail = 0 ]
