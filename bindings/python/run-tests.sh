#!/bin/sh
# Run the Python package's tests (pytest) under MPI at 1, 2, 3 and 4 ranks.
#
#   bindings/python/run-tests.sh     (make check-python does this)
#
# MPIEXEC (default mpiexec.openmpi) launches PYTHON3 (default
# /usr/bin/python3) with pytest on every rank; RANKS limits the rank counts,
# TEST_TIMEOUT (seconds, default 120) bounds each run; PYTEST_PATHS (default:
# the whole tests folder) says what pytest collects, PYTEST_ARGS what else it
# is given. A run passes only if
# every rank's pytest passes: each rank writes its own log, and the logs of
# the ranks that failed are printed. The tests agree on every outcome
# across ranks (tests/conftest.py), so one rank's failure fails them all.
set -u
here=$(cd "$(dirname "$0")" && pwd)
MPIEXEC=${MPIEXEC:-mpiexec.openmpi}
PYTHON3=${PYTHON3:-/usr/bin/python3}
RANKS=${RANKS:-1 2 3 4}
TIMEOUT=${TEST_TIMEOUT:-120}
export OPENBLAS_NUM_THREADS=1 PYTHONDONTWRITEBYTECODE=1
flags=""
if $MPIEXEC --version 2>&1 | grep -qiE "open ?(mpi|rte)"; then
    flags="--oversubscribe"
    export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
fi
logs=$(mktemp -d)
trap 'rm -rf "$logs"' EXIT
status=0
total_start=$(date +%s)
for n in $RANKS; do
    start=$(date +%s)
    # each rank: pytest, its output into its own log
    timeout -k 10 "$TIMEOUT" $MPIEXEC $flags -n "$n" sh -c '
        r=${OMPI_COMM_WORLD_RANK:-${PMI_RANK:-0}}
        exec "$0" -m pytest -q -p no:cacheprovider "$1" $3 >"$2/rank$r.log" 2>&1' \
        "$PYTHON3" "${PYTEST_PATHS:-$here/tests}" "$logs" "${PYTEST_ARGS:-}"
    rc=$?
    took=$(( $(date +%s) - start ))
    summary=$(tail -n 1 "$logs/rank0.log" 2>/dev/null)
    if [ $rc -eq 0 ]; then
        echo "PASS pytest -n $n (${took}s): $summary"
    else
        status=1
        why="exit $rc"
        [ $rc -eq 124 ] || [ $rc -eq 137 ] && why="timed out after ${TIMEOUT}s"
        echo "FAIL pytest -n $n (${took}s, $why): $summary"
        shown=0
        for f in "$logs"/rank*.log; do
            case "$(tail -n 1 "$f")" in
            *failed* | *error* | "") ;;
            *passed* | *skipped*) continue ;;
            esac
            shown=1
            echo "---- $(basename "$f" .log)"
            tail -n 60 "$f"
        done
        if [ $shown = 0 ]; then
            for f in "$logs"/rank*.log; do echo "---- $(basename "$f" .log)"; tail -n 20 "$f"; done
        fi
    fi
    rm -f "$logs"/rank*.log
done
echo "python: $(( $(date +%s) - total_start ))s at ranks $RANKS"
exit $status
