"""A LeNet-5 training step through ladle.torch, the twin of
bench/distdl_lenet.py (the same layout, batch, data and timing).

    mpiexec -n 4 python3 bench/torch_lenet_step.py --spatial 2x2 --fc-ways 2

The network is examples/torch_lenet.py's (ladle's distributed layers as
ladle.torch modules, torch's ReLUs), over D x Ph x Pw ranks with fc F. A step
is: zero the gradients, forward, loss, backward (no optimizer, as
bench_dist and the DistDL script). Batch 64 of 28 x 28 random images, labels
i mod 10, f32, one thread per rank; the median over --reps steps of the
slowest rank's time after 3 warm-up steps:

    ladle.torch lenet 1x2x2 fc 2, 4 ranks: 12.345 ms/step (median of 50)
"""
import argparse
import os
import sys

import steptime  # bench/steptime.py, beside this script

here = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(here, "..", "examples"))

import torch  # noqa: E402
from mpi4py import MPI  # noqa: E402

import torch_lenet  # noqa: E402  (imports ladle and ladle.torch)
import ladle  # noqa: E402


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--data-ways", type=int, default=1)
    ap.add_argument("--spatial", default="2x1")
    ap.add_argument("--fc-ways", type=int, default=2)
    ap.add_argument("--batch", type=int, default=64)
    ap.add_argument("--reps", type=int, default=50)
    a = ap.parse_args()
    comm = MPI.COMM_WORLD
    ph, pw = (int(v) for v in a.spatial.split("x"))
    torch.set_num_threads(1)
    ladle.set_num_threads(1)
    torch.manual_seed(1)
    g = torch_lenet.Grids(comm, a.data_ways, ph, pw, a.fc_ways)
    net = torch_lenet.LeNet(g, a.batch, 1, torch.float32)
    x = torch.randn(net.conv1.x_shape)
    off, shp = net.loss.layer.x_layout.box()
    labels = (torch.arange(shp[0]) + off[0]) % 10

    def step():
        net.zero_grad(set_to_none=False)
        loss = net.loss(net(x), labels)
        loss.backward()

    steptime.report(comm, "ladle.torch lenet %dx%dx%d fc %d" % (a.data_ways, ph, pw, a.fc_ways),
                    steptime.median_step(comm, step, a.reps), a.reps)


if __name__ == "__main__":
    main()
