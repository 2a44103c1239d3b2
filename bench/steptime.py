"""The timing both LeNet-5 step scripts share (bench/torch_lenet_step.py,
bench/distdl_lenet.py), so that ladle.torch and DistDL are timed alike."""
import statistics
import sys
import time

from mpi4py import MPI


def median_step(comm, step, reps, warmup=3):
    """The median over `reps` calls of step() of the slowest rank's time,
    in seconds, after `warmup` calls; each call starts after a barrier."""
    times = []
    for r in range(-warmup, reps):
        comm.Barrier()
        t0 = time.perf_counter()
        step()
        t = comm.allreduce(time.perf_counter() - t0, op=MPI.MAX)
        if r >= 0:
            times.append(t)
    return statistics.median(times)


def report(comm, label, seconds, reps):
    """Rank 0 prints `LABEL, N ranks: T ms/step (median of REPS)`, the line
    bench/torch_vs_distdl.sh collects."""
    if comm.rank == 0:
        print("%s, %d ranks: %.3f ms/step (median of %d)" % (label, comm.size, seconds * 1e3, reps))
        sys.stdout.flush()
