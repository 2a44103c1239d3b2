"""A LeNet-5 training step in DistDL, the contender of the ladle.torch step.

    mpiexec -n 4 python3 bench/distdl_lenet.py --distdl DISTDL/src --spatial 2x2 --fc-ways 2

DistDL (github.com/distdl/distdl, BSD-2-Clause) has no LeNet of its own, so
this builds the network ladle's models.c lays out (ladle/models.h), from
DistDL's layers, for one batch block (D = 1): the two convolutions and
poolings on a 1 x 1 x Ph x Pw partition of ranks 0 .. Ph*Pw-1 (halo
exchanges), a repartition gathering the features onto rank 0, the first
linear layer column-parallel over ranks 0 .. F-1 (its weight partition F x 1,
its output 1 x F), the second row-parallel (weight 1 x F, output on rank 0),
the third and the cross-entropy on rank 0. DistDL's linear layer has a
two-dimensional weight partition, without a batch dimension, so the
data-parallel layouts (D > 1) have no DistDL twin here.

A step is what bench_dist times: zero the gradients, forward, loss, backward
(no optimizer: its update is local). Batch 64 of 28 x 28 images (random data,
labels i mod 10), f32, one torch thread per rank. Prints the median over
--reps steps of the slowest rank's time, after 3 warm-up steps:

    distdl lenet 1x2x2 fc 2, 4 ranks: 12.345 ms/step (median of 50)

DistDL runs on Debian's torch 1.13 and numpy 1.24 with three shims, kept here
and not in DistDL: numpy's removed aliases (np.int, np.bool, ...) are put
back, the compiled interpolation extension (a C++ module DistDL's setup.py
builds, used only by its interpolation layers) is replaced by an empty module,
and the ReLUs before the poolings are leaky_relu(x, 0) (see forward).
"""
import argparse
import os
import sys

import steptime  # bench/steptime.py, beside this script
import types

import numpy as np


def shims(src):
    """Make DistDL's public code importable on Debian's numpy and torch."""
    for name, value in (("int", int), ("bool", bool), ("float", float),
                        ("complex", complex), ("object", object)):
        if name not in np.__dict__:
            setattr(np, name, value)
    cpp = types.ModuleType("distdl.functional.interpolate._cpp")
    for fn in ("constant_interpolation_adjoint", "constant_interpolation_forward",
               "linear_interpolation_adjoint", "linear_interpolation_forward"):
        setattr(cpp, fn, None)
    sys.modules[cpp.__name__] = cpp
    if src:
        sys.path.insert(0, src)


def parse():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--distdl", default=os.environ.get("DISTDL_SRC", ""),
                    help="DistDL's src folder (or $DISTDL_SRC); else an installed distdl")
    ap.add_argument("--spatial", default="2x1", help="Ph x Pw tiles of the convolutions")
    ap.add_argument("--fc-ways", type=int, default=2, help="F, the first two linear layers' split")
    ap.add_argument("--batch", type=int, default=64)
    ap.add_argument("--reps", type=int, default=50)
    ap.add_argument("--threads", type=int, default=1, help="torch threads per rank")
    return ap.parse_args()


def main():
    a = parse()
    shims(a.distdl)
    import warnings
    warnings.filterwarnings("ignore")
    import torch
    import torch.nn.functional as F
    from mpi4py import MPI

    import distdl
    from distdl.backends.mpi.partition import MPIPartition
    from distdl.utilities.slicing import compute_subshape
    from distdl.utilities.torch import zero_volume_tensor

    torch.set_num_threads(a.threads)
    torch.manual_seed(1)
    comm = MPI.COMM_WORLD
    ph, pw = (int(v) for v in a.spatial.split("x"))
    tiles, fc, n = ph * pw, a.fc_ways, a.batch
    if tiles > comm.size or fc > tiles:
        sys.exit("layout 1x%dx%d fc %d does not fit %d ranks" % (ph, pw, fc, comm.size))

    world = MPIPartition(comm)

    def grid(ranks, shape):
        return world.create_partition_inclusive(np.arange(ranks)).create_cartesian_topology_partition(shape)

    p_conv = grid(tiles, [1, 1, ph, pw])
    p_root4 = grid(1, [1, 1, 1, 1])
    p_root = grid(1, [1, 1])
    p_fc = grid(fc, [1, fc])      # fc1's output, fc2's input
    p_w1 = grid(fc, [fc, 1])      # column-parallel
    p_w2 = grid(fc, [1, fc])      # row-parallel

    dnn = distdl.nn

    class LeNet(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.conv1 = dnn.DistributedFeatureConv2d(p_conv, 1, 6, 5, padding=2)
            self.pool1 = dnn.DistributedMaxPool2d(p_conv, 2, stride=2)
            self.conv2 = dnn.DistributedFeatureConv2d(p_conv, 6, 16, 5)
            self.pool2 = dnn.DistributedMaxPool2d(p_conv, 2, stride=2)
            self.gather = dnn.Repartition(p_conv, p_root4)
            self.fc1 = dnn.DistributedLinear(p_root, p_fc, p_w1, 400, 120)
            self.fc2 = dnn.DistributedLinear(p_fc, p_root, p_w2, 120, 84)
            self.fc3 = dnn.DistributedLinear(p_root, p_root, p_root, 84, 10)

        def forward(self, x):
            # DistDL's pooling exchanges halos in place into its input, which
            # torch's relu saved for its backward (torch >= 1.x refuses);
            # leaky_relu with slope 0 is the same ReLU, saving its input
            x = self.pool1(F.leaky_relu(self.conv1(x), 0.0))
            x = self.pool2(F.leaky_relu(self.conv2(x), 0.0))
            x = self.gather(x)
            if p_root4.active:  # elsewhere a zero-volume tensor, kept in the graph
                x = torch.flatten(x, 1)
            x = F.relu(self.fc1(x))
            x = F.relu(self.fc2(x))
            return self.fc3(x)

    net = LeNet()
    x = zero_volume_tensor(n)
    if p_conv.active:
        x = torch.randn(*compute_subshape(p_conv.shape, p_conv.index, [n, 1, 28, 28]))
    # no input gradient: ladle's step skips the first layer's dx too
    labels = torch.arange(n) % 10

    def step():
        net.zero_grad(set_to_none=False)
        y = net(x)
        if p_root.active:
            loss = F.cross_entropy(y, labels)
        else:
            loss = y.sum()  # a zero-volume output: the backward still runs the adjoints
        loss.backward()

    steptime.report(comm, "distdl lenet 1x%dx%d fc %d" % (ph, pw, fc),
                    steptime.median_step(comm, step, a.reps), a.reps)


if __name__ == "__main__":
    main()
