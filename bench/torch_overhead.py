"""What one call of a ladle operator costs from PyTorch (ladle.torch), next
to the same call from C (bench_overhead.c), on tensors so small that the
call is all there is.

    bench_overhead > c.txt; python3 bench/torch_overhead.py --c-output c.txt

Rows (as in bench_overhead.c), median ns per call over --reps timings of
--calls calls:
  broadcast   a broadcast over a 1-rank partition, 4 floats, forward only
              (under torch.no_grad(): the module call, a new output tensor,
              the ctypes call into ladle_op_forward)
  linear      a sequential linear layer, batch 1, 4 -> 4, forward recording
              autograd's graph (the training form: a ladle ctx per call)
  linear-fb   that forward, then backward from a fixed dy: ladle's backward
              and backward_weight, the gradients handed to autograd, which
              adds them into .grad
and, for scale, `ladle-py`: the same broadcast through the plain ladle
package (numpy arrays, no torch), and torch_ns: torch's own call of the same
size (a clone for the broadcast, torch.nn.Linear(4, 4) for the linear rows),
what any PyTorch call costs anyway, and floor_ns: an autograd Function written
in Python that does nothing but make its output (and, for linear-fb, return
its gradients) with the arguments ladle.torch's Function takes -- the cost
torch charges every extension written in Python, before any of its own work.
With --c-output, each row also prints the difference to C (the overhead of
the Python layers), the ratio, and own_us: the overhead above that floor,
which is ladle.torch's own share.
"""
import argparse
import os
import statistics
import sys
import time

here = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(here, "..", "bindings", "python"))

import numpy as np  # noqa: E402
import torch  # noqa: E402
from mpi4py import MPI  # noqa: E402

import ladle  # noqa: E402
import ladle.torch as lt  # noqa: E402


def median_ns(fn, reps, calls):
    for _ in range(max(calls // 10, 1)):
        fn()
    times = []
    for _ in range(reps):
        t0 = time.perf_counter()
        for _ in range(calls):
            fn()
        times.append((time.perf_counter() - t0) / calls * 1e9)
    return statistics.median(times)


def c_figures(path):
    out = {}
    if not path:
        return out
    with open(path) as f:
        for line in f:
            w = line.split()
            if len(w) >= 4 and w[0] == "overhead":
                out[w[1]] = float(w[3])
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--reps", type=int, default=11)
    ap.add_argument("--calls", type=int, default=5000)
    ap.add_argument("--c-output", default="", help="bench_overhead's output, for the ratios")
    a = ap.parse_args()
    torch.set_num_threads(1)
    ladle.set_num_threads(1)
    comm = MPI.COMM_WORLD.Split(MPI.COMM_WORLD.rank, 0)  # each rank alone
    p = ladle.Partition(comm, [1])
    f32 = torch.float32

    bcast = lt.Broadcast(p, p, (4,), dtype=f32)
    xb = torch.randn(4)

    def broadcast():
        with torch.no_grad():
            bcast(xb)

    lin = lt.Linear((1, 4), 4, dtype=f32, seed=1)
    xl = torch.randn(1, 4)
    dy = torch.randn(1, 4)

    def linear():
        lin(xl)

    xg = torch.randn(1, 4, requires_grad=True)

    def linear_fb():
        lin(xg).backward(dy)

    op = ladle.broadcast(p, p, (4,), dtype=np.float32)
    xn, yn = np.ones(4, np.float32), np.zeros(4, np.float32)

    def ladle_py():
        op.forward(xn, yn)

    # torch's own layers on the same shapes: what a call costs in torch anyway
    tlin = torch.nn.Linear(4, 4)

    def torch_clone():
        with torch.no_grad():
            xb.clone()

    def torch_linear():
        tlin(xl)

    def torch_linear_fb():
        tlin(xg).backward(dy)

    class Floor(torch.autograd.Function):
        """A Python autograd Function that only makes its output: what
        torch charges any such extension per call."""

        @staticmethod
        def forward(ctx, mod, grad, x, anchor, *params):
            return torch.empty(1, 4)

        @staticmethod
        def backward(ctx, dy):
            return (None, None, torch.empty(1, 4), None) + tuple(torch.empty(p.shape) for p in lin._params)

    class FloorModule(torch.nn.Module):
        def forward(self, x):
            return Floor.apply(self, torch.is_grad_enabled(), x, lt._ANCHOR, *lin._params)

    floor_mod = FloorModule()

    def floor_nograd():
        with torch.no_grad():
            floor_mod(xb)

    def floor_linear():
        floor_mod(xl)

    def floor_linear_fb():
        floor_mod(xg).backward(dy)

    native = {"broadcast": torch_clone, "linear": torch_linear, "linear-fb": torch_linear_fb}
    floors = {"broadcast": floor_nograd, "linear": floor_linear, "linear-fb": floor_linear_fb}
    c = c_figures(a.c_output)
    rows = [("broadcast", broadcast), ("linear", linear), ("linear-fb", linear_fb),
            ("ladle-py", ladle_py)]
    if MPI.COMM_WORLD.rank == 0:
        print("# ladle.torch on torch %s, Python %s; median of %d timings of %d calls"
              % (torch.__version__, sys.version.split()[0], a.reps, a.calls))
        print("%-10s %-12s %12s %12s %12s %7s %12s %10s %8s" % (
            "row", "call", "python_ns", "c_ns", "overhead_us", "ratio", "torch_ns", "floor_ns",
            "own_us"))
    for name, fn in rows:
        ns = median_ns(fn, a.reps, a.calls)
        ref = c.get(name if name != "ladle-py" else "broadcast")
        tn = median_ns(native[name], a.reps, a.calls) if name in native else None
        fl = median_ns(floors[name], a.reps, a.calls) if name in floors else None
        if MPI.COMM_WORLD.rank == 0:
            cols = ("%12.1f %12.2f %7.1f" % (ref, (ns - ref) / 1e3, ns / ref) if ref
                    else "%12s %12s %7s" % ("-", "-", "-"))
            own = "%.2f" % ((ns - ref - fl) / 1e3) if ref and fl else "-"
            print("%-10s %-12s %12.0f %s %12s %10s %8s" % (
                "overhead", name, ns, cols, "%.0f" % tn if tn else "-",
                "%.0f" % fl if fl else "-", own))
            sys.stdout.flush()


if __name__ == "__main__":
    main()
