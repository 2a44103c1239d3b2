"""The package refuses a libladle built with another MPI than mpi4py's."""

import os
import subprocess
import sys

import pytest
from mpi4py import MPI

import ladle

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.normpath(os.path.join(HERE, "..", "..", ".."))


def test_match_rule():
    openmpi = "Open MPI v4.1.4, package: Debian OpenMPI, ident: 4.1.4, repo rev: v4.1.4"
    mpich = "MPICH Version:\t4.0.2\nMPICH Release date:\tThu May 26 15:51:45 CDT 2022"
    assert ladle.check_mpi_match("Open MPI 4.1.4", openmpi) is None
    assert ladle.check_mpi_match("MPICH 4.0.2", mpich) is None
    reason = ladle.check_mpi_match("MPICH 4.0.2", openmpi)
    assert "MPICH 4.0.2" in reason and "Open MPI" in reason
    intel = "Intel(R) MPI Library 2021.9 for Linux* OS"
    assert ladle.check_mpi_match("MPICH 4.0.2", intel) is None  # one family
    assert ladle.check_mpi_match("Open MPI 4.1.4", intel) is not None


def test_this_library_matches():
    assert ladle.check_mpi_match(ladle.mpi_library(), MPI.Get_library_version()) is None


def other_mpi_library():
    """The default (MPICH) build's libladle, when there is one."""
    path = os.environ.get("LADLE_MPICH_LIBRARY") or os.path.join(ROOT, "lib", "libladle.so")
    if not os.path.exists(path):
        return None
    with open(path, "rb") as f:
        return path if b"libmpich.so" in f.read() else None


def test_mismatched_library_raises_import_error(comm):
    path = other_mpi_library()
    if path is None:
        pytest.skip("no MPICH libladle built (make builds lib/libladle.so)")
    result = None
    if comm.rank == 0:
        # a fresh process outside the MPI job (a singleton), loading the MPICH
        # libladle under mpi4py's Open MPI
        env = {k: v for k, v in os.environ.items()
               if not k.startswith(("OMPI_", "PMIX_", "PMI_", "HYDRA_"))}
        env["LADLE_LIBRARY"] = path
        code = ("import sys; sys.path.insert(0, %r)\n"
                "try:\n    import ladle\nexcept ImportError as e:\n"
                "    print('IMPORTERROR', e); sys.exit(3)\n" % os.path.join(HERE, ".."))
        p = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True,
                           text=True, timeout=60)
        result = (p.returncode, p.stdout, p.stderr)
    rc, out, err = comm.bcast(result, root=0)
    assert rc == 3, (rc, out, err)
    assert "IMPORTERROR" in out and "MPICH" in out and "Open MPI" in out, out
