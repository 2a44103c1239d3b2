#!/bin/bash
# scripts/device-check.sh OUTDIR: ladle's CUDA backend on a real GPU, in one
# run that ends within DEVICE_BUDGET seconds (450: under 8 minutes, so that
# a rerun fits a lease): it looks at the machine, finds MPI, OpenBLAS,
# Check, zlib and make there or unpacks the ones carried by
# scripts/device-prep.sh, builds with nvcc (make CUDA=1), runs the CUDA
# test suite on the GPU, a short ladle-train run on it, and the benchmarks
# (bench/bench_gpu.c at 1, 2 and 4 ranks, PyTorch's LeNet-5 beside it, and
# the bf16 GEMM against cublasSgemm: bench_layers --only gemm_bf16),
# and on its CPU cores the pipeline schedules (bench_pipe at 2, 4 and 8
# ranks, one per core; DEVICE_STEPS=pipe runs that alone after the build)
# and the spatial layers' halo, with and without the overlap, on small tiles
# (bench_dist --only conv-halo at 4, 8 and 16 ranks, one per core).
#
# The device tool's call, from the repository's root (scripts/device-prep.sh
# run here first, on Debian 12, to fill .device/debs):
#
#   run(command='bash scripts/device-check.sh "$OUT"', carry=[".device"], timeout_s=540)
#
# and a rerun of some steps on the machine while it is still warm (the
# build is kept, make only relinks what changed):
#
#   run(command='DEVICE_STEPS="bench" DEVICE_BUDGET=240 bash scripts/device-check.sh "$OUT"',
#       carry=[".device"], timeout_s=300)
#
# The tool sends the checkout the session started in: .device/debs must be
# there (scripts/device-prep.sh run in that checkout), and so must this
# script. timeout_s leaves the script's budget 90 s for the kill of a step
# that overruns and the copying back.
#
# OUTDIR gets at most 8 files: summary.txt first (the verdict of every
# step, then the benchmarks' ratio tables), probe.txt (what the machine
# has), build.log (what was used from where, the build, the libraries
# linked), tests.log, train.log, bench.txt, pipe.txt, halo.txt. The last lines printed are
# summary.txt. Exit status 0 only when every step ran and passed: a step
# skipped for lack of time, or a benchmark row the backend cannot run yet,
# is no success.
#
# Environment: DEVICE_STEPS (tests train bench pipe halo: those of the five to run;
# the machine is always probed and the build always made), DEVICE_TESTS (the
# tests step's programs, a subset of CUDA_SUITE and tool_cuda; all when
# unset: the kernels of norm.cu, vocab.cu, planes.cu and attention.cu, not
# yet run on a GPU, alone are DEVICE_STEPS=tests DEVICE_TESTS="test_cuda_norm
# test_cuda_loss test_cuda_planes test_cuda_attn test_layernorm test_embedding
# test_loss test_interp test_pool test_attention test_gpt"), DEVICE_BUDGET
# (seconds), DEVICE_DEBS (.device/debs), DEVICE_PREFIX (where the packages
# are unpacked, /tmp/ladle-device), DEVICE_USE=carried (the carried packages
# even where the machine has its own: the rehearsal), DEVICE_JOBS (make's
# jobs: the cores), DEVICE_BUILD_S (the build's cap, 240 s). For a
# rehearsal where there is no GPU: DEVICE_CUDA=emu builds ladle over the
# CUDA emulator instead (make CUDA=emu) and runs everything on it, and
# DEVICE_BENCH_ARGS=--quick shrinks the benchmarks to what it can run.
set -u
out=${1:?usage: scripts/device-check.sh OUTDIR}
cd "$(dirname "$0")/.." || exit 2
repo=$(pwd)
mkdir -p "$out" || exit 2
out=$(cd "$out" && pwd)
steps=${DEVICE_STEPS:-tests train bench pipe halo}
budget=${DEVICE_BUDGET:-450}
debs=${DEVICE_DEBS:-$repo/.device/debs}
prefix=${DEVICE_PREFIX:-/tmp/ladle-device}
jobs=${DEVICE_JOBS:-$(nproc)}
cuda=${DEVICE_CUDA:-1}
bdir=build/cuda where=""
[ "$cuda" = 1 ] || bdir=build/cudaemu where="emulated "
start=$(date +%s)
deadline=$((start + budget))
work=$(mktemp -d)
summary="$out/summary.txt"
results="$work/results"
: >"$results"
export CK_FORK=no OPENBLAS_NUM_THREADS=1 PYTHONUNBUFFERED=1
# the commands run as root there; Open MPI, if it is the MPI in use, refuses
# root unless told
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
# the machine's own library path (the driver's, say), for PyTorch
machine_ld=${LD_LIBRARY_PATH:-}

elapsed() { echo $(($(date +%s) - start)); }
left() { echo $((deadline - $(date +%s))); }
say() { echo "[$(printf '%3d' "$(elapsed)")s] $*"; }

# record NAME STATUS SECONDS DETAIL: one line of the verdict table
record() {
    printf '%-9s %-10s %5s  %s\n' "$1" "$2" "$3" "$4" >>"$results"
    say "$1: $2 ($3 s) $4"
    write_summary
}

# The verdict: PASS only when every step that should have run passed.
write_summary() {
    local n fails part skips verdict
    n=$(wc -l <"$results")
    fails=$(awk '$2 == "FAIL" {c++} END {print c + 0}' "$results")
    part=$(awk '$2 == "INCOMPLETE" {c++} END {print c + 0}' "$results")
    skips=$(awk '$2 == "SKIP" {c++} END {print c + 0}' "$results")
    if [ "$fails" -gt 0 ]; then
        verdict=FAIL
    elif [ "$part" -gt 0 ] || [ "$skips" -gt 0 ] || [ "${finished:-0}" != 1 ]; then
        verdict=INCOMPLETE
    else
        verdict=PASS
    fi
    {
        echo "RESULT: $verdict ($n steps: $((n - fails - part - skips)) passed, $fails failed," \
            "$part incomplete, $skips skipped) in $(elapsed) s of a $budget s budget"
        [ "${finished:-0}" = 1 ] || echo "(the run did not reach its end: this is what it had done)"
        echo "ladle device check, $(date -u '+%Y-%m-%d %H:%M UTC'), $(cat "$work/rev" 2>/dev/null);" \
            "steps asked: probe deps build $steps"
        echo "GPU: $(cat "$work/gpu" 2>/dev/null || echo 'not looked at')"
        echo
        printf '%-9s %-10s %5s  %s\n' step result s detail
        cat "$results"
        [ ! -s "$work/ratios" ] || { echo; cat "$work/ratios"; }
        [ ! -s "$work/failed" ] || { echo; cat "$work/failed"; }
        echo
        echo "files: $(cd "$out" && ls | tr '\n' ' ')"
    } >"$summary"
    echo "$verdict" >"$work/verdict"
}

# budget SECONDS RESERVE: the seconds a step may take (its own cap, less
# what the later steps need); 0 when too little is left
budget_for() {
    local cap=$1 reserve=$2 l
    l=$(($(left) - reserve))
    [ "$l" -lt "$cap" ] && cap=$l
    [ "$cap" -ge 15 ] && echo "$cap" || echo 0
}

wanted() { case " $steps " in *" $1 "*) return 0 ;; esac; return 1; }

# reserve_after STEP: the seconds the asked-for steps after STEP need at
# the least (the tests 60, the training run 20, the benchmarks 80, the
# pipeline schedules 40, the halo rows 20)
reserve_after() {
    local r=0 after=0 s
    for s in build tests train bench pipe halo; do
        if [ $after = 1 ] && wanted "$s"; then
            case $s in tests) r=$((r + 60)) ;; train) r=$((r + 20)) ;; bench) r=$((r + 80)) ;;
            pipe) r=$((r + 40)) ;; halo) r=$((r + 20)) ;; esac
        fi
        [ "$s" != "$1" ] || after=1
    done
    echo $r
}

finish() {
    finished=1
    write_summary
    echo "======== $summary"
    cat "$summary"
    rm -rf "$work"
    [ "$(cat "$out/summary.txt" | head -1 | cut -d' ' -f2)" = PASS ]
    exit $?
}
# sessions of test groups still to end (a signal may come while they run)
sessions=""
end_sessions() {
    local s f st fields
    for s in $sessions; do
        # pkill -s, read off /proc (procps may not be there)
        for f in /proc/[0-9]*/stat; do
            st=$(cat "$f" 2>/dev/null) || continue
            read -r -a fields <<<"${st##*) }" # state ppid pgrp session ...
            [ "${fields[3]:-}" = "$s" ] && kill -KILL "${f//[^0-9]/}" 2>/dev/null
        done
    done
    sessions=""
}
trap 'say "stopped by a signal"; end_sessions; write_summary; cat "$summary"; rm -rf "$work"; exit 1' TERM INT

# ---------------------------------------------------------------- probe
# What the machine has, before anything is changed: probe.txt.
probe() {
    local t
    echo "== date, host"
    date -u
    uname -a
    grep -E '^(PRETTY_NAME|VERSION_ID)=' /etc/os-release
    echo "cores: $(nproc)"
    free -g | head -2
    df -h "$repo" /tmp | tail -n +2
    echo "== GPU"
    timeout 20 nvidia-smi -L 2>&1
    timeout 20 nvidia-smi --format=csv --query-gpu=name,driver_version,memory.total,memory.used,clocks.sm,clocks.max.sm,clocks.mem,temperature.gpu,power.draw,utilization.gpu,compute_mode 2>&1
    echo "== compilers and tools"
    for t in nvcc gcc g++ cc make cmake ninja python3 git cuobjdump compute-sanitizer ncu \
        cuda-gdb gdb valgrind; do
        printf '%-18s %s\n' "$t" "$(command -v "$t" || echo -)"
    done
    timeout 10 nvcc --version 2>&1 | tail -2
    timeout 10 gcc --version 2>&1 | head -1
    timeout 10 make --version 2>&1 | head -1
    ls -d /usr/local/cuda* 2>&1
    echo "== python, torch"
    timeout 60 python3 -c 'import sys, torch
print(sys.version.split()[0], sys.executable)
print("torch", torch.__version__, "cuda", torch.version.cuda, "available", torch.cuda.is_available(),
      torch.cuda.get_device_name(0) if torch.cuda.is_available() else "")' 2>&1 | tail -5
    echo "== mpi4py (which MPI it was built with and loads)"
    timeout 20 python3 -c 'import mpi4py; print(mpi4py.__version__, mpi4py.__file__); print(mpi4py.get_config())' 2>&1 | tail -4
    OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 timeout 30 python3 -c \
        'from mpi4py import MPI; print(MPI.Get_library_version().strip())' 2>&1 | head -3
    t=$(timeout 20 python3 -c 'import mpi4py, glob, os; print(" ".join(glob.glob(os.path.dirname(mpi4py.__file__) + "/MPI*.so")))' 2>/dev/null)
    [ -z "$t" ] || ldd $t 2>&1 | grep -iE 'mpi|not found'
    echo "== MPI commands"
    for t in mpicc mpicc.mpich mpicc.openmpi mpiexec mpirun mpiexec.mpich mpiexec.hydra \
        mpiexec.openmpi ompi_info mpichversion; do
        command -v "$t" >/dev/null && printf '%-16s %s\n' "$t" "$(readlink -f "$(command -v "$t")")"
    done
    timeout 10 mpiexec --version 2>&1 | head -2
    echo "== libraries the loader knows"
    ldconfig -p 2>/dev/null | grep -E 'libmpi|libopenblas|libblas\.so|libcheck|libsubunit|libz\.so|libgfortran|libquadmath|libhwloc|libucp|libnuma|libudev|libslurm|libcublas\.|libcudart\.' | sed 's/^\s*//'
    echo "== headers"
    find /usr/include /usr/local/include /usr/lib/x86_64-linux-gnu -maxdepth 5 \
        \( -name mpi.h -o -name cblas.h -o -name check.h -o -name zlib.h \) 2>/dev/null | head -20
}

probe_step() {
    local t0=$SECONDS gpu
    say "probe: what the machine has"
    probe >"$out/probe.txt" 2>&1
    # -a: the probe's output may hold a byte that makes grep call it binary
    gpu=$(grep -a -m1 '^GPU 0:' "$out/probe.txt" | sed 's/ (UUID.*//')
    if [ -n "$gpu" ]; then
        echo "${gpu#GPU 0: }, driver $(timeout 10 nvidia-smi --query-gpu=driver_version --format=csv,noheader 2>/dev/null)" >"$work/gpu"
    else
        echo "none seen (nvidia-smi: $(command -v nvidia-smi >/dev/null && echo 'lists none' || echo 'not there'))" >"$work/gpu"
    fi
    (git -C "$repo" describe --always --dirty 2>/dev/null || echo "git revision unknown") >"$work/rev"
    record probe PASS $((SECONDS - t0)) "GPU: $(cat "$work/gpu"); $(grep -a -m1 '^torch ' "$out/probe.txt" || echo 'no torch')"
}

# ---------------------------------------------------------------- deps
# Each of MPI, OpenBLAS, Check, zlib and make from the machine when it
# works there, else from the carried packages unpacked into $prefix (never
# into /). The choices go to build.log and the summary.

unpack() { # PACKAGE...: dpkg -x into the prefix (once each)
    local p
    for p in "$@"; do
        [ -e "$work/unpacked.$p" ] && continue
        local f
        f=$(ls "$debs/$p.deb" "$debs/$p+slim.deb" 2>/dev/null | head -1)
        if [ -z "$f" ]; then
            echo "deps: $p is not among the carried packages ($debs)"
            return 1
        fi
        dpkg-deb -x "$f" "$prefix" || { echo "deps: dpkg -x $f failed"; return 1; }
        echo "deps: unpacked $(basename "$f") ($(grep "^$p " "$debs/MANIFEST" | cut -d' ' -f2))"
        touch "$work/unpacked.$p"
    done
}

# a runtime library's package, only when the loader does not know its soname
unpack_if_missing() { # SONAME PACKAGE
    if [ "${DEVICE_USE:-}" != carried ] && ldconfig -p 2>/dev/null | grep -q "^\s*$1 "; then
        return 0
    fi
    unpack "$2"
}

# try_build NAME SOURCE FLAGS...: does this machine compile and link it?
try_build() {
    local name=$1 src=$2
    shift 2
    printf '%s\n' "$src" >"$work/$name.c"
    timeout 60 ${CC_TEST:-gcc} "$work/$name.c" -o "$work/$name" "$@" >"$work/$name.log" 2>&1 &&
        timeout 20 "$work/$name" >>"$work/$name.log" 2>&1
}

MPI_HELLO='#include <mpi.h>
#include <stdio.h>
int main(int c, char **v) { int r, n, s = 0; MPI_Init(&c, &v); MPI_Comm_rank(MPI_COMM_WORLD, &r);
MPI_Comm_size(MPI_COMM_WORLD, &n); MPI_Allreduce(&r, &s, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
if (r == 0) printf("%d ranks, sum %d\n", n, s); MPI_Finalize(); return s != n * (n - 1) / 2; }'

# mpi_works MPICC MPIEXEC: compiles and runs a 2-rank program
mpi_works() {
    printf '%s\n' "$MPI_HELLO" >"$work/hello.c"
    timeout 60 "$1" "$work/hello.c" -o "$work/hello" >"$work/hello.log" 2>&1 || return 1
    OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 \
        timeout 30 "$2" -n 2 "$work/hello" >>"$work/hello.log" 2>&1 &&
        grep -q "2 ranks, sum 1" "$work/hello.log"
}

# The carried MPICH: its mpicc script with the prefix's directories (it
# names /usr's), its launcher, hydra's proxy beside it on PATH.
carried_mpich() {
    unpack mpich libmpich12 libmpich-dev libhwloc15 libslurm38 libucx0 || return 1
    unpack_if_missing libnuma.so.1 libnuma1 && unpack_if_missing libudev.so.1 libudev1 &&
        unpack_if_missing libgfortran.so.5 libgfortran5 &&
        unpack_if_missing libquadmath.so.0 libquadmath0 || return 1
    mkdir -p "$prefix/bin"
    sed -e "s|^prefix=/usr\$|prefix=$prefix/usr|" -e "s|^exec_prefix=/usr\$|exec_prefix=$prefix/usr|" \
        -e "s|^sysconfdir=/etc/mpich\$|sysconfdir=$prefix/etc/mpich|" \
        -e "s|^includedir=/usr/|includedir=$prefix/usr/|" -e "s|^libdir=/usr/|libdir=$prefix/usr/|" \
        "$prefix/usr/bin/mpicc.mpich" >"$prefix/bin/mpicc.mpich"
    chmod +x "$prefix/bin/mpicc.mpich"
    MPICC="$prefix/bin/mpicc.mpich"
    MPIEXEC="$prefix/usr/bin/mpiexec.mpich"
}

# The prefix's directories on the compiler's and the loader's paths (only
# ladle's programs get LD_LIBRARY_PATH: PyTorch keeps the machine's own).
prefix_paths() {
    local m=x86_64-linux-gnu
    export PATH="$prefix/bin:$prefix/usr/bin:$PATH"
    export CPATH="$prefix/usr/include:$prefix/usr/include/$m/openblas-pthread${CPATH:+:$CPATH}"
    export LIBRARY_PATH="$prefix/usr/lib/$m:$prefix/lib/$m:$prefix/usr/lib/$m/openblas-pthread${LIBRARY_PATH:+:$LIBRARY_PATH}"
    LADLE_LD_PATH="$prefix/usr/lib/$m:$prefix/lib/$m:$prefix/usr/lib/$m/openblas-pthread${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
    export LD_LIBRARY_PATH="$LADLE_LD_PATH"
}

deps_choose() {
    local use=${DEVICE_USE:-} used=""
    rm -rf "$prefix"
    mkdir -p "$prefix"
    # make
    if [ "$use" != carried ] && timeout 10 make --version >/dev/null 2>&1; then
        used="make: the machine's"
    else
        unpack make || return 1
        used="make: carried"
    fi
    # zlib, Check, OpenBLAS: a program that uses each must build and run
    if [ "$use" != carried ] && try_build zlib '#include <zlib.h>
int main(void) { return zlibVersion()[0] == 0; }' -lz; then
        used="$used; zlib: the machine's"
    else
        # the header and the link-time name; the library is the machine's
        unpack zlib1g-dev && unpack_if_missing libz.so.1 zlib1g || return 1
        used="$used; zlib: carried"
    fi
    if [ "$use" != carried ] && try_build check '#include <check.h>
int main(void) { Suite *s = suite_create("x"); SRunner *r = srunner_create(s); srunner_free(r); return 0; }' \
        -lcheck_pic -lsubunit -lm -lrt -lpthread; then
        used="$used; Check: the machine's"
    else
        unpack check libsubunit0 libsubunit-dev || return 1
        used="$used; Check: carried"
    fi
    if [ "$use" != carried ] && try_build blas '#include <cblas.h>
int main(void) { float a = 2, b = 3, c = 0; cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, 1, 1, 1, 1, &a, 1, &b, 1, 0, &c, 1); return c != 6; }' \
        -lopenblas; then
        used="$used; OpenBLAS: the machine's"
    else
        unpack libopenblas0-pthread libopenblas-pthread-dev || return 1
        unpack_if_missing libgfortran.so.5 libgfortran5 && unpack_if_missing libquadmath.so.0 libquadmath0 || return 1
        used="$used; OpenBLAS: carried"
    fi
    # MPI: the machine's MPICH, else the carried one, else whatever
    # mpicc and mpiexec the machine has (Open MPI, say)
    if [ "$use" != carried ] && command -v mpicc.mpich >/dev/null && command -v mpiexec.mpich >/dev/null &&
        mpi_works mpicc.mpich mpiexec.mpich; then
        MPICC=mpicc.mpich MPIEXEC=mpiexec.mpich
        used="$used; MPI: the machine's MPICH"
    elif carried_mpich && (prefix_paths && mpi_works "$MPICC" "$MPIEXEC"); then
        used="$used; MPI: carried MPICH $(grep '^mpich ' "$debs/MANIFEST" | cut -d' ' -f2)"
    elif [ "$use" != carried ] && command -v mpicc >/dev/null && command -v mpiexec >/dev/null &&
        mpi_works mpicc mpiexec; then
        MPICC=mpicc MPIEXEC=mpiexec
        used="$used; MPI: the machine's mpicc and mpiexec"
    else
        echo "deps: no MPI works: neither the machine's nor the carried MPICH"
        cat "$work/hello.log"
        return 1
    fi
    echo "$used" >"$work/used"
}

# The zlib link the carried -dev package makes is absolute (/lib/...): point
# it at the library beside it.
fix_links() {
    local d="$prefix/usr/lib/x86_64-linux-gnu"
    if [ -L "$d/libz.so" ]; then
        ln -sf "$prefix/lib/x86_64-linux-gnu/libz.so.1" "$d/libz.so"
        [ -e "$d/libz.so" ] || ln -sf "$(ldconfig -p | awk '/libz\.so\.1 .*x86-64/ {print $NF; exit}')" "$d/libz.so"
    fi
}

deps_step() {
    local t0=$SECONDS
    say "deps: MPI, OpenBLAS, Check, zlib, make"
    {
        echo "== deps (DEVICE_USE=${DEVICE_USE:-}) from $debs:"
        cat "$debs/MANIFEST" 2>/dev/null || echo "(no carried packages: run scripts/device-prep.sh and carry .device)"
        deps_choose
    } >"$work/deps.log" 2>&1
    local st=$?
    if [ $st -eq 0 ]; then
        fix_links
        prefix_paths
        # one program that links all of them, checked for where each
        # library comes from
        CC_TEST=$MPICC try_build all '#include <mpi.h>
#include <cblas.h>
#include <check.h>
#include <zlib.h>
int main(int c, char **v) { MPI_Init(&c, &v); float a = 1, b = 1, r = 0; cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, 1, 1, 1, 1, &a, 1, &b, 1, 0, &r, 1); Suite *s = suite_create("x"); SRunner *sr = srunner_create(s); srunner_free(sr); MPI_Finalize(); return r != 1 || zlibVersion()[0] == 0; }' \
            -lopenblas -lcheck_pic -lsubunit -lz -lm -lrt -lpthread >>"$work/deps.log" 2>&1
        st=$?
        {
            echo "== all together ($MPICC): $([ $st -eq 0 ] && echo ran || echo FAILED)"
            cat "$work/all.log"
            echo "== $MPICC -show: $($MPICC -show 2>&1)"
            echo "== $MPIEXEC: $($MPIEXEC --version 2>&1 | grep -m1 -i version)"
            echo "== where the libraries come from"
            ldd "$work/all" 2>&1 | grep -vE 'linux-vdso|ld-linux'
        } >>"$work/deps.log" 2>&1
        ldd "$work/all" 2>&1 | grep -q "not found" && st=1
    fi
    cat "$work/deps.log" >"$out/build.log"
    if [ $st -eq 0 ]; then
        record deps PASS $((SECONDS - t0)) "$(cat "$work/used")"
    else
        record deps FAIL $((SECONDS - t0)) "$(tail -3 "$work/deps.log" | tr '\n' ' ' | cut -c1-200) (build.log)"
    fi
    return $st
}

# ---------------------------------------------------------------- build
# CUDA_HOME for the Makefile (which links $(CUDA_HOME)/lib64's cuBLAS and
# runtime): nvcc's own toolkit when that holds them, else a folder of links
# to the ones found elsewhere (a toolkit laid out otherwise, or the wheels
# PyTorch brings, which have no unversioned names)
cuda_home_for() { # NVCC
    local home lib f d="$prefix/cuda/lib64"
    home=$(dirname "$(dirname "$(readlink -f "$1")")")
    if [ -e "$home/lib64/libcublas.so" ] && [ -e "$home/lib64/libcudart.so" ]; then
        echo "$home"
        return
    fi
    mkdir -p "$d"
    # one search, nvcc's toolkit first (find takes its roots in order)
    timeout 30 find "$home" /usr/local /opt /usr/lib \( -name 'libcublas*.so*' -o \
        -name 'libcudart.so*' \) 2>/dev/null | grep -v stubs >"$work/cudalibs"
    for lib in libcublas libcublasLt libcudart; do
        f=$(grep -m1 "/$lib\.so" "$work/cudalibs")
        [ -n "$f" ] || continue
        ln -sf "$f" "$d/$lib.so"
        ln -sf "$f" "$d/$(objdump -p "$f" 2>/dev/null | awk '/SONAME/ {print $2}' | grep . || basename "$f")"
        echo "build: $lib from $f" >&2
    done
    echo "$prefix/cuda"
}

build_step() {
    local t0=$SECONDS cap nvcc cuda_home st relaxed=""
    # time for the steps after it; but with less left, still a short try:
    # a build already made (a rerun) only relinks what changed
    cap=$(budget_for "${DEVICE_BUILD_S:-240}" "$(reserve_after build)")
    [ "$cap" -gt 0 ] || cap=$(budget_for 60 10)
    [ "$cap" -gt 0 ] || { record build SKIP 0 "only $(left) s left"; return 1; }
    nvcc=$(command -v nvcc || ls /usr/local/cuda/bin/nvcc 2>/dev/null)
    [ -n "$nvcc" ] || { record build FAIL 0 "no nvcc"; return 1; }
    cuda_home=$(cuda_home_for "$nvcc" 2>>"$out/build.log")
    say "build: make -j$jobs CUDA=$cuda (nvcc $nvcc, at most $cap s)"
    local args=(-j"$jobs" CUDA="$cuda" DEPS=0 MPICC="$MPICC" MPIEXEC="$MPIEXEC" NVCC="$nvcc"
        CUDA_HOME="$cuda_home" all tests "$bdir"/bench/bench_gpu "$bdir"/bench/bench_layers "$bdir"/bench/bench_pipe
        "$bdir"/bench/bench_dist)
    {
        echo "== make ${args[*]}"
        timeout -k 5 "$cap" make "${args[@]}" 2>&1
    } >>"$out/build.log"
    st=$?
    # A newer gcc may warn where Debian 12's does not: -Werror stops the
    # build, which is reported, and it is built again without it so that
    # the GPU is still tested.
    if [ $st -ne 0 ] && [ $st -ne 124 ] && grep -q '\[-Werror' "$out/build.log"; then
        relaxed=" (warnings as errors under this gcc: built again without -Werror, see build.log)"
        record build FAIL $((SECONDS - t0)) "$(grep -c '\[-Werror' "$out/build.log") warnings$relaxed"
        t0=$SECONDS
        cap=$(budget_for 200 "$(reserve_after build)")
        {
            echo "== again without -Werror"
            timeout -k 5 "$cap" make "${args[@]}" CFLAGS=-Wno-error \
                NVCC_FLAGS='-std=c++20 -O3 $(CUDA_ARCH) -Xcompiler -fPIC,-fvisibility=hidden,-Wall,-Wextra,-Wno-unused-parameter,-Wno-missing-field-initializers $(CUDA_DEFS)' 2>&1
        } >>"$out/build.log"
        st=$?
    fi
    {
        echo "== where the test programs' libraries come from ($bdir/test/test_cuda)"
        ldd "$bdir"/test/test_cuda 2>&1 | grep -vE 'linux-vdso|ld-linux'
        echo "== the GPU code in the library"
        timeout 20 "$(dirname "$nvcc")/cuobjdump" --list-elf "$bdir"/lib/libladle.a 2>&1 | sort | uniq -c | head -5
    } >>"$out/build.log" 2>&1
    local name=build
    [ -z "$relaxed" ] || name=build-2
    if [ $st -eq 0 ] && ! ldd "$bdir"/test/test_cuda 2>&1 | grep -q "not found"; then
        record $name PASS $((SECONDS - t0)) "make -j$jobs CUDA=$cuda with $(timeout 5 gcc -dumpfullversion 2>/dev/null) and nvcc $(timeout 5 "$nvcc" --version | sed -n 's/.*release \([0-9.]*\).*/\1/p')"
        return 0
    fi
    [ $st -eq 124 ] && record $name FAIL $((SECONDS - t0)) "timed out after $cap s" && return 1
    record $name FAIL $((SECONDS - t0)) "$(grep -m1 -E 'error|not found' "$out/build.log" | cut -c1-160) (build.log)"
    return 1
}

# ---------------------------------------------------------------- tests
# The CUDA suite (test/run.sh's CUDA_SUITE at its rank counts, every rank on
# the one GPU, and test/tool_cuda.sh: the tools on the GPU against the CPU,
# its training runs on the made-up dataset) in four groups at once,
# balanced by ranks.
tests_step() {
    local t0=$SECONDS cap groups=4 g
    cap=$(budget_for 170 "$(reserve_after tests)")
    [ "$cap" -gt 0 ] || { record tests SKIP 0 "only $(left) s left"; return; }
    say "tests: the CUDA suite on the GPU, $groups groups at once (at most $cap s)"
    [ -d "$work/data" ] || make_data "$work/data" >>"$out/tests.log" 2>&1
    export LADLE_DATA="$work/data"
    # tool_cuda.sh weighs as a dozen ranks (ladle-adjoint at 3 and 4,
    # ladle-train at 2 and 4 on both devices)
    { sed -n '/^CUDA_SUITE="/,/^"/p' test/run.sh | grep ':'; echo "tool_cuda: 3 4 2 4"; } |
        awk -v only="${DEVICE_TESTS:-}" 'only == "" || index(" " only " ", " " substr($1, 1, length($1) - 1) " ")' |
        awk -v G=$groups '{ n = 0; for (i = 2; i <= NF; i++) n += $i; best = 0; for (g = 1; g < G; g++) if (load[g] < load[best]) best = g
                            load[best] += n; sub(/:$/, "", $1); prog[best] = prog[best] " " $1 }
                          END { for (g = 0; g < G; g++) print prog[g] }' >"$work/groups"
    # Each group in a session of its own: test/run.sh runs every program
    # under a timeout of its own, in a process group of its own, which
    # outlives the group's timeout; what is left of a session is ended
    # before the next step uses the GPU.
    g=0
    while read -r progs; do
        [ -n "$progs" ] || continue
        # a run that hangs costs its group at most 90 s
        LADLE_TEST_EXPECT_GPU=1 DEVICES=cuda TEST="$progs" TEST_TIMEOUT=$((cap < 95 ? cap - 5 : 90)) \
            MPIEXEC="$MPIEXEC" BINDIR="$bdir/bin" \
            setsid timeout -k 5 "$cap" sh test/run.sh "$bdir"/test >"$work/tests.$g" 2>&1 &
        sessions="$sessions $!"
        g=$((g + 1))
    done <"$work/groups"
    wait
    end_sessions
    local pass=0 fail=0 incomplete=0 i line
    for i in $(seq 0 $((g - 1))); do
        line=$(grep -E '^[0-9]+ passed, [0-9]+ failed' "$work/tests.$i")
        if [ -z "$line" ]; then
            # the runs that ended before the group was stopped
            incomplete=$((incomplete + 1))
            pass=$((pass + $(grep -c '^PASS' "$work/tests.$i")))
            fail=$((fail + $(grep -c '^FAIL' "$work/tests.$i")))
        else
            pass=$((pass + $(echo "$line" | cut -d' ' -f1)))
            fail=$((fail + $(echo "$line" | cut -d' ' -f3)))
        fi
        { echo "== group $i: $(sed -n "$((i + 1))p" "$work/groups")"; cat "$work/tests.$i"; } >>"$out/tests.log"
    done
    grep -h '^FAIL' "$work"/tests.* | sed 's/^/    /' >"$work/failed.tmp"
    if [ -s "$work/failed.tmp" ]; then
        { echo "failed test runs (tests.log has their output):"; cat "$work/failed.tmp"; } >"$work/failed"
    fi
    local detail="$pass passed, $fail failed on the ${where}GPU" why
    why=$(grep -h -m1 -E '^    \| .*(assertion|failed:|GPU|not found|timed out)' "$work"/tests.* 2>/dev/null |
        head -1 | sed 's/^    | //' | cut -c1-160)
    [ -z "$why" ] || detail="$detail; the first says: $why"
    [ $incomplete -eq 0 ] || detail="$detail; $incomplete of $g groups did not finish in $cap s"
    if [ $fail -eq 0 ] && [ $incomplete -eq 0 ] && [ $pass -gt 0 ]; then
        record tests PASS $((SECONDS - t0)) "$detail"
    else
        record tests FAIL $((SECONDS - t0)) "$detail"
    fi
}

# ---------------------------------------------------------------- train
# A small IDX dataset (no download there): each class a bright square in its
# own place, on noise, so that a few steps already learn something.
make_data() { # DIR
    timeout 60 python3 - "$1" <<'EOF'
import gzip, os, random, struct, sys
d = sys.argv[1]
os.makedirs(d, exist_ok=True)
def write(which, n, seed):
    rng = random.Random(seed)
    labels = bytes(rng.randrange(10) for _ in range(n))
    images = bytearray()
    for c in labels:
        img = bytearray(rng.randrange(60) for _ in range(784))
        r, q = 2 + 8 * (c // 4), 2 + 8 * (c % 4)
        for i in range(r, r + 6):
            for j in range(q, q + 6):
                img[28 * i + j] = 200 + rng.randrange(56)
        images += img
    with gzip.open(f"{d}/{which}-images-idx3-ubyte.gz", "wb") as f:
        f.write(struct.pack(">IIII", 0x803, n, 28, 28) + images)
    with gzip.open(f"{d}/{which}-labels-idx1-ubyte.gz", "wb") as f:
        f.write(struct.pack(">II", 0x801, n) + labels)
write("train", 4096, 1)
write("t10k", 1024, 2)
EOF
}

train_step() {
    local t0=$SECONDS cap tool="$bdir"/bin/ladle-train
    cap=$(budget_for 60 "$(reserve_after train)")
    [ "$cap" -gt 0 ] || { record train SKIP 0 "only $(left) s left"; return; }
    if ! timeout 20 "$MPIEXEC" -n 1 "$tool" --help 2>/dev/null | grep -q -- '--device'; then
        record train SKIP 0 "ladle-train has no --device option yet"
        return
    fi
    say "train: ladle-train --device cuda on a small made-up dataset (at most $cap s)"
    [ -d "$work/data" ] || make_data "$work/data" >"$out/train.log" 2>&1 ||
        { record train FAIL 0 "could not make the dataset (train.log)"; return; }
    local common=(--data "$work/data" --epochs 1 --steps 16 --batch 256 --seed 4 --quiet)
    local st=0 runs=("1 cuda" "1 cpu" "2 cuda --data-ways 2")
    local r
    for r in "${runs[@]}"; do
        set -- $r
        local n=$1 dev=$2
        shift 2
        echo "== $n ranks, --device $dev $*" >>"$out/train.log"
        timeout -k 5 $((cap / 3)) "$MPIEXEC" -n "$n" "$tool" "${common[@]}" --device "$dev" "$@" \
            --summary "$work/sum.$n.$dev" >>"$out/train.log" 2>&1 || st=1
        cat "$work/sum.$n.$dev" >>"$out/train.log" 2>/dev/null
    done
    loss() { sed -n 's/.*last_loss \([0-9.eE+-]*\).*/\1/p' "$1" 2>/dev/null | tail -1; }
    local a b c
    a=$(loss "$work/sum.1.cuda")
    b=$(loss "$work/sum.1.cpu")
    c=$(loss "$work/sum.2.cuda")
    # f32 with TF32 off: the GPU's sums run in another order than the
    # CPU's, 16 steps of SGD keep them within 1e-3
    if [ $st -eq 0 ] && [ -n "$a" ] && [ -n "$b" ] && [ -n "$c" ] &&
        awk -v a="$a" -v b="$b" -v c="$c" 'function d(x, y) { return (x > y ? x - y : y - x) / (y > 0 ? y : 1) }
            BEGIN { exit !(d(a, b) < 1e-3 && d(c, b) < 1e-3) }'; then
        record train PASS $((SECONDS - t0)) "last loss: cuda $a, cpu $b, cuda 2 ranks $c"
    else
        record train FAIL $((SECONDS - t0)) "exit $st; last loss: cuda '$a', cpu '$b', cuda 2 ranks '$c' (train.log)"
    fi
}

# ---------------------------------------------------------------- bench
bench_step() {
    local t0=$SECONDS cap st=0 na=0 n rc bench="$bdir"/bench/bench_gpu
    cap=$(budget_for 200 5)
    [ "$cap" -gt 20 ] || { record bench SKIP 0 "only $(left) s left"; return; }
    say "bench: PyTorch's LeNet-5, then bench_gpu at 1, 2 and 4 ranks (at most $cap s)"
    {
        echo "== PyTorch (python3 bench/torch_lenet_gpu.py --batch 256)"
        LD_LIBRARY_PATH=$machine_ld timeout -k 5 $((cap / 4)) python3 bench/torch_lenet_gpu.py \
            --batch 256 >"$work/torch.txt" 2>&1
        echo "exit $?"
        cat "$work/torch.txt"
    } >>"$out/bench.txt"
    grep -q '^torch-lenet' "$work/torch.txt" || st=1
    # the bf16 GEMM (cublasGemmEx) against cublasSgemm, a bf16 and an f32
    # linear layer's forward on the GPU: seconds on a GPU, so a short cap
    cap=$(budget_for 40 100)
    if [ "$cap" -gt 0 ]; then
        echo "== bench_layers --only gemm_bf16 --device cuda --reps 5 (at most $cap s)" >>"$out/bench.txt"
        timeout -k 5 "$cap" "$MPIEXEC" -n 1 "$bdir"/bench/bench_layers --only gemm_bf16 \
            --device cuda --reps 5 >"$work/gemm16.txt" 2>&1
        rc=$?
        cat "$work/gemm16.txt" >>"$out/bench.txt"
        echo "exit $rc" >>"$out/bench.txt"
        [ $rc -eq 0 ] || st=1
        { echo "== bf16 GEMM on the GPU (ratio: cublasSgemm ms / cublasGemmEx ms)"
          grep -E '^(gemm16|bf16) ' "$work/gemm16.txt"; } >>"$work/ratios"
    else
        echo "== bench_layers gemm_bf16: skipped, $(left) s left" >>"$out/bench.txt"
        st=1
    fi
    # caps: the first launch leaves time for the other two
    for n in 1 2 4; do
        case $n in
        1) cap=$(budget_for 120 50) ;;
        2) cap=$(budget_for 60 25) ;;
        *) cap=$(budget_for 60 3) ;;
        esac
        if [ "$cap" -le 0 ]; then
            echo "== $n ranks: skipped, $(left) s left" >>"$out/bench.txt"
            st=1
            continue
        fi
        echo "== bench_gpu, $n ranks (at most $cap s)" >>"$out/bench.txt"
        # shellcheck disable=SC2086
        timeout -k 5 "$cap" "$MPIEXEC" -n $n "$bench" --torch "$work/torch.txt" ${DEVICE_BENCH_ARGS:-} \
            >"$work/bench.$n" 2>&1
        rc=$?
        cat "$work/bench.$n" >>"$out/bench.txt"
        echo "exit $rc" >>"$out/bench.txt"
        case $rc in
        0) ;;
        3) na=1 ;;
        *) st=1 ;;
        esac
        # the launch's summary table into summary.txt
        sed -n '/^== summary/,/^-- /p' "$work/bench.$n" | sed "s/^== summary/== bench_gpu at $n rank(s): summary/" >>"$work/ratios"
        [ -s "$work/ratios" ] && write_summary
    done
    local rows
    rows=$(grep -h '^-- ' "$work"/bench.* 2>/dev/null | tr '\n' ' ')
    [ -n "$rows" ] || rows="no bench_gpu launch finished: $(grep -h -m1 -E 'bench_gpu \(rank|rror' "$work"/bench.* | head -1 | cut -c1-160)"
    grep -q '^torch-lenet' "$work/torch.txt" || rows="$rows; PyTorch: $(tail -1 "$work/torch.txt" | cut -c1-120)"
    if [ $st -ne 0 ]; then
        record bench FAIL $((SECONDS - t0)) "a launch failed or was cut short (bench.txt); $rows"
    elif [ $na -ne 0 ]; then
        record bench INCOMPLETE $((SECONDS - t0)) "rows the backend cannot run yet; $rows"
    else
        record bench PASS $((SECONDS - t0)) "$rows"
    fi
}

# ---------------------------------------------------------------- CPU runs
# The pipe and halo steps launch benchmarks where every rank has a core of
# its own, bound one per core (Open MPI spells the option --bind-to, hydra
# -bind-to).
bind_flag() {
    if "$MPIEXEC" --version 2>&1 | grep -qiE "open ?(mpi|rte)"; then
        echo "--bind-to core"
    else
        echo "-bind-to core"
    fi
}

# cpu_fits N FILE LABEL: whether N ranks have a core each; if not, says so
# in FILE and in cpu_why (the step's summary)
cpu_fits() {
    local cores
    cores=$(nproc)
    [ "$1" -gt "$cores" ] || return 0
    echo "== $3: skipped, $cores cores" >>"$2"
    cpu_why="$cpu_why$1 ranks skipped ($cores cores); "
    return 1
}

# cpu_launch N FILE LABEL PROGRAM [ARGS]: one launch at N ranks, one per
# core, within the budget; its output appended to FILE under "== LABEL"
# and left in $work/launch. 1 when it was skipped for lack of time, failed
# or was cut short.
cpu_launch() {
    local n=$1 file=$2 label=$3 cap rc
    shift 3
    : >"$work/launch" # nothing left from a launch before
    cap=$(budget_for 40 3)
    if [ "$cap" -le 0 ]; then
        echo "== $label: skipped, $(left) s left" >>"$file"
        return 1
    fi
    echo "== $label" >>"$file"
    # shellcheck disable=SC2046
    timeout -k 5 "$cap" "$MPIEXEC" $(bind_flag) -n "$n" "$@" >"$work/launch" 2>&1
    rc=$?
    cat "$work/launch" >>"$file"
    echo "exit $rc" >>"$file"
    [ $rc -eq 0 ]
}

# ---------------------------------------------------------------- pipe
# The pipeline schedules on the CPU (bench/bench_pipe.c), where every rank
# has a core of its own, as 2 cores cannot give 4 ranks: 3 launches at 2, 4
# and 8 ranks, bound one per core; the medians of measured against
# simulated (bench/summarize.awk) go into the summary.
pipe_step() {
    local t0=$SECONDS st=0 n r bench="$bdir"/bench/bench_pipe
    cpu_why=""
    say "pipe: bench_pipe on the CPU at 2, 4 and 8 ranks, 3 launches each, one rank per core"
    for n in 2 4 8; do
        cpu_fits $n "$out/pipe.txt" "pipeline, $n ranks" || { st=1; continue; }
        for r in 1 2 3; do
            cpu_launch $n "$out/pipe.txt" "pipeline, $n ranks, launch $r" "$bench" || st=1
        done
    done
    awk -f bench/summarize.awk "$out/pipe.txt" | sed '/^$/d' >"$work/pipe.sum"
    { echo "== bench_pipe on the CPU, one rank per core"; cat "$work/pipe.sum"; } >>"$work/ratios"
    local rows
    rows=$(awk '$2 == "hybrid" {printf "%s ranks: hybrid %s x 1F1B measured, %s simulated; ", $1, $6, $7}' \
        "$work/pipe.sum")
    if [ $st -ne 0 ]; then
        record pipe FAIL $((SECONDS - t0)) "${cpu_why}a launch failed, was cut short or skipped (pipe.txt); $rows"
    else
        record pipe PASS $((SECONDS - t0)) "$rows"
    fi
}

# ---------------------------------------------------------------- halo
# The spatial convolution's and pooling's halo on row tiles of LeNet-5's
# and larger layers (bench/bench_dist.c, --only conv-halo): the layer
# against the sequential one on its box, the exchange's share, and the
# overlap with the interior against without it, where each rank has a
# core of its own (2 cores cannot show it): one launch at 4, 8 and 16 ranks.
halo_step() {
    local t0=$SECONDS st=0 n bench="$bdir"/bench/bench_dist
    cpu_why=""
    say "halo: bench_dist --only conv-halo on the CPU at 4, 8 and 16 ranks, one per core"
    for n in 4 8 16; do
        cpu_fits $n "$out/halo.txt" "conv-halo, $n ranks" || { st=1; continue; }
        cpu_launch $n "$out/halo.txt" "conv-halo, $n ranks" "$bench" --only conv-halo || st=1
        { echo "== bench_dist --only conv-halo, $n ranks, one per core"; grep -E '^(row|conv-halo|halo-ovl)' "$work/launch"; } >>"$work/ratios"
    done
    local rows
    rows=$(awk '/^== conv-halo, [0-9]+ ranks$/ {n = $3} /^halo-ovl/ {v[n] = v[n] " " $(NF - 3)}
        END {for (k = 4; k <= 16; k *= 2) if (k in v) printf "%s ranks: overlapped/plain%s; ", k, v[k]}' "$out/halo.txt")
    if [ $st -ne 0 ]; then
        record halo FAIL $((SECONDS - t0)) "${cpu_why}a launch failed, was cut short or skipped (halo.txt); $rows"
    else
        record halo PASS $((SECONDS - t0)) "$rows"
    fi
}

# ---------------------------------------------------------------- main
rm -f "$out"/summary.txt "$out"/probe.txt "$out"/build.log "$out"/tests.log "$out"/train.log \
    "$out"/bench.txt "$out"/pipe.txt "$out"/halo.txt
say "ladle device check into $out: steps probe deps build $steps, $budget s"
probe_step
if ! deps_step; then
    for s in build $steps; do record "$s" SKIP 0 "no build without MPI and the libraries"; done
    finish
fi
if ! build_step; then
    for s in $steps; do record "$s" SKIP 0 "nothing built"; done
    finish
fi
export LD_LIBRARY_PATH="${LADLE_LD_PATH:-${LD_LIBRARY_PATH:-}}"
! wanted tests || tests_step
! wanted train || train_step
! wanted bench || bench_step
! wanted pipe || pipe_step
! wanted halo || halo_step
finish
