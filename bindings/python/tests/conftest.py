"""Every test is collective: all ranks run the same tests in the same order.
After each test the ranks agree on its outcome, so a failure on one rank
fails the test on every rank (naming the ranks) and the runs never drift
apart into mismatched collectives."""

import os
import sys

import numpy as np
import pytest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

from mpi4py import MPI  # noqa: E402

import ladle  # noqa: E402,F401


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    report = outcome.get_result()
    if call.when != "call":
        return
    comm = MPI.COMM_WORLD
    failed = comm.allgather(bool(report.failed))
    bad = [r for r, f in enumerate(failed) if f]
    if bad and not report.failed:
        report.outcome = "failed"
        report.longrepr = "failed on rank(s) %s (this rank, %d, passed)" % (bad, comm.rank)


@pytest.fixture
def comm():
    return MPI.COMM_WORLD


@pytest.fixture
def rng():
    # the same stream on every rank: global arrays agree everywhere
    return np.random.default_rng(20261202)


def gather_global(comm, layout, block, dtype=None):
    """The global array from every rank's block of layout (allgather)."""
    off, shp = layout.box()
    parts = comm.allgather((off, shp, np.ascontiguousarray(block)))
    shape = layout.global_shape
    out = np.zeros(shape, dtype=dtype or block.dtype)
    for o, s, b in parts:
        if int(np.prod(s)) == 0:
            continue
        out[tuple(slice(a, a + n) for a, n in zip(o, s))] = b
    return out


# Known open fault: after every test has passed, a process at 1-4 ranks
# sometimes dies with SIGSEGV inside the interpreter's final garbage
# collection (Py_FinalizeEx), after ladle's objects were destroyed and MPI
# finalized. Until it is found, the test processes release ladle's objects,
# finalize MPI and leave with pytest's own status without that collection, so
# the suite reports what the tests found. Scripts of users are not changed
# by this: the fault is listed in docs/embedding.md.
def pytest_sessionfinish(session, exitstatus):
    session.config._ladle_exit = int(exitstatus)


def pytest_unconfigure(config):
    status = getattr(config, "_ladle_exit", None)
    if status is None:
        return
    from ladle import _core
    _core._release_all()
    if not MPI.Is_finalized():
        MPI.Finalize()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(status)
