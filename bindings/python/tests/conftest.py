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

