"""LeNet-5 on Fashion-MNIST from a plain PyTorch training loop, with ladle's
distributed layers (ladle.torch) laid out over the ranks as ladle-train lays
them out, and the same loss sequence as ladle-train with the same layout and
seed.

    mpiexec.openmpi -n 4 python3 examples/torch_lenet.py --data-ways 2 --spatial 2x1 \\
        --fc-ways 2 --steps 5 --progress 1

    --reference   also train ladle's own network (ladle.Network and ladle's
                  SGD, the path ladle-train takes) on the same batches and
                  print both losses side by side

What makes the two runs the same:
- the layers: the ones ladle's LeNet-5 (ladle/models.h) is made of, over the
  same partitions, created with the same seeds (seed, seed + 1, ... for conv1,
  conv2, fc1, fc2, fc3): ladle draws a weight from (seed, its global index),
  so every layout starts from the same weights; the ReLUs are torch's;
- the data: ladle's dataset reader, this rank's window of each image, the
  order of (seed, epoch) (ladle_dataset_batch, ladle_dataset_sample), pixels
  normalised by Fashion-MNIST's mean and spread as ladle-train does;
- the update: torch.optim.SGD (lr 0.03, momentum 0.9, no dampening) on the
  torch-owned parameters, with ladle-train's cosine rate for each step
  (ladle_lr_at over epochs x steps per epoch); replicated parameters' gradients
  are summed over their copies in each layer's backward, as ladle's network
  does before its optimizer steps.
"""
import argparse
import ctypes
import os
import sys
from ctypes import POINTER, byref, c_char_p, c_double, c_int, c_int64, c_uint64, c_void_p

import numpy as np
import torch

here = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(here, "..", "bindings", "python"))

from mpi4py import MPI  # noqa: E402

import ladle  # noqa: E402
import ladle.torch as lt  # noqa: E402

lib = ladle.lib
DATA = "/usr/share/datasets/fashion-mnist"
MEAN, STD = 0.2860, 0.3530


class LrSchedule(ctypes.Structure):
    # ladle_lr_schedule, field for field: ladle_lr_schedule_init writes all of
    # it, size first
    _fields_ = [("size", ctypes.c_size_t), ("kind", c_int), ("base_lr", c_double), ("step_size", c_int64),
                ("gamma", c_double), ("total_steps", c_int64), ("min_lr", c_double),
                ("warmup_steps", c_int64), ("warmup_start", c_double)]


class DatasetDesc(ctypes.Structure):
    # ladle_dataset_desc: the window of every image a rank keeps, and the
    # normalisation; ladle_dataset_desc_init sets the size and the defaults
    _fields_ = [("size", ctypes.c_size_t), ("row0", c_int64), ("rows", c_int64),
                ("col0", c_int64), ("cols", c_int64), ("mean", c_double), ("std", c_double)]


class BatchDesc(ctypes.Structure):
    # ladle_batch_desc: the order's seed, the global batch, this rank's block
    # and tile, the augmentation; ladle_batch_desc_init sets size, seed, batch
    _fields_ = [("size", ctypes.c_size_t), ("seed", c_uint64), ("batch", c_int64),
                ("offset", c_int64), ("row_off", c_int64), ("col_off", c_int64),
                ("crop_pad", c_int64), ("flip", c_int)]


def _prototypes():
    for name, res, args in (
            ("ladle_dataset_desc_init", None, [POINTER(DatasetDesc)]),
            ("ladle_dataset_load_dir", c_int, [c_char_p, c_char_p, POINTER(DatasetDesc),
                                                POINTER(c_void_p)]),
            ("ladle_dataset_destroy", c_int, [POINTER(c_void_p)]),
            ("ladle_dataset_size", c_int64, [c_void_p]),
            ("ladle_dataset_sample", c_int64, [c_void_p, c_uint64, c_int64, c_int64]),
            ("ladle_dataset_label", c_int64, [c_void_p, c_int64]),
            ("ladle_batch_desc_init", None, [POINTER(BatchDesc), c_uint64, c_int64]),
            ("ladle_dataset_batch", c_int, [c_void_p, POINTER(BatchDesc), c_int64, c_int64,
                                            c_void_p, c_void_p]),
            ("ladle_lr_schedule_init", None, [POINTER(LrSchedule), c_int, c_double]),
            ("ladle_lr_at", c_double, [POINTER(LrSchedule), c_int64])):
        f = getattr(lib, name)
        f.restype, f.argtypes = res, args


_prototypes()


def parse(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--data-ways", type=int, default=1)
    ap.add_argument("--spatial", default="1x1")
    ap.add_argument("--fc-ways", type=int, default=1)
    ap.add_argument("--batch", type=int, default=64)
    ap.add_argument("--epochs", type=int, default=1)
    ap.add_argument("--steps", type=int, default=0, help="at most K steps per epoch (all)")
    ap.add_argument("--lr", type=float, default=0.03)
    ap.add_argument("--momentum", type=float, default=0.9)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--dtype", choices=("f32", "f64"), default="f32")
    ap.add_argument("--data", default=DATA)
    ap.add_argument("--progress", type=int, default=0)
    ap.add_argument("--reference", action="store_true")
    a = ap.parse_args(argv)
    a.Ph, a.Pw = (int(v) for v in a.spatial.split("x"))
    return a


class Grids:
    """The partitions of ladle's LeNet-5 layout (train/models.c)."""

    def __init__(self, comm, D, Ph, Pw, F):
        tiles = Ph * Pw
        self.p4 = ladle.Partition(comm, [D, 1, Ph, Pw], ranks=list(range(D * tiles)))
        self.p2 = ladle.Partition(comm, [D, 1], ranks=[b * tiles for b in range(D)])
        self.pf = ladle.Partition(comm, [D, F], ranks=[b * tiles + j for b in range(D)
                                                       for j in range(F)])
        if D > 1:
            r1 = [0] * (F * D)
            for i in range(F):
                for b in range(D):
                    r1[i * D + b] = b * tiles + i
            self.pw1 = ladle.Partition(comm, [F, D, 1], ranks=r1)
            self.pw2 = ladle.Partition(comm, [1, D, F], ranks=[b * tiles + j for b in range(D)
                                                               for j in range(F)])
            self.pw3 = ladle.Partition(comm, [1, D, 1], ranks=[b * tiles for b in range(D)])
        else:
            self.pw1 = ladle.Partition(comm, [F, 1], ranks=list(range(F)))
            self.pw2 = ladle.Partition(comm, [1, F], ranks=list(range(F)))
            self.pw3 = ladle.Partition(comm, [1, 1], ranks=[0])


class LeNet(torch.nn.Module):
    """LeNet-5 of ladle.torch modules, torch's ReLUs between them."""

    def __init__(self, g, n, seed, dtype, image=28, classes=10):
        super().__init__()
        s1 = image // 2
        s2 = (s1 - 4) // 2
        f = 16 * s2 * s2
        # the first layer's input gradient is never needed (as in ladle-train)
        self.conv1 = lt.DistConv2d(g.p4, (n, 1, image, image), 6, 5, padding=2, dtype=dtype,
                                   seed=seed, input_grad=False)
        self.pool1 = lt.DistPool2d(g.p4, (n, 6, image, image), 2, dtype=dtype)
        self.conv2 = lt.DistConv2d(g.p4, (n, 6, s1, s1), 16, 5, dtype=dtype, seed=seed + 1)
        self.pool2 = lt.DistPool2d(g.p4, (n, 16, s1 - 4, s1 - 4), 2, dtype=dtype)
        self.flatten = lt.DistFlatten(g.p4, (n, 16, s2, s2), g.p2, dtype=dtype)
        self.fc1 = lt.DistLinear(g.p2, g.pw1, g.pf, n, f, 120, dtype=dtype, seed=seed + 2)
        self.fc2 = lt.DistLinear(g.pf, g.pw2, g.p2, n, 120, 84, dtype=dtype, seed=seed + 3)
        self.fc3 = lt.DistLinear(g.p2, g.pw3, g.p2, n, 84, classes, dtype=dtype, seed=seed + 4)
        self.loss = lt.DistLoss(g.p2, (n, classes), dtype=dtype)

    def forward(self, x):
        x = self.pool1(torch.relu(self.conv1(x)))
        x = self.pool2(torch.relu(self.conv2(x)))
        x = self.flatten(x)
        x = torch.relu(self.fc1(x))
        x = torch.relu(self.fc2(x))
        return self.fc3(x)


def ladle_lenet(g, n, seed, dtype, image=28, classes=10):
    """The same network as ladle's own layers in a ladle.Network (ladle's
    models.c, layer by layer): the reference."""
    np_dt = np.float32 if dtype == torch.float32 else np.float64
    s1 = image // 2
    s2 = (s1 - 4) // 2
    layers = []

    def relu():
        layers.append(ladle.Activation(layers[-1].y_shape, "relu", dtype=np_dt))

    layers.append(ladle.DistConv(g.p4, (n, 1, image, image), 6, 5, padding=2, dtype=np_dt,
                                 seed=seed))
    layers.append(ladle.DistPool(g.p4, (n, 6, image, image), 2, dtype=np_dt))
    relu()  # after the pooling, as models.c: the two commute
    layers.append(ladle.DistConv(g.p4, (n, 6, s1, s1), 16, 5, dtype=np_dt, seed=seed + 1))
    layers.append(ladle.DistPool(g.p4, (n, 16, s1 - 4, s1 - 4), 2, dtype=np_dt))
    relu()
    layers.append(ladle.DistFlatten(g.p4, (n, 16, s2, s2), g.p2, dtype=np_dt))
    layers.append(ladle.DistLinear(g.p2, g.pw1, g.pf, n, 16 * s2 * s2, 120, dtype=np_dt,
                                   seed=seed + 2))
    relu()
    layers.append(ladle.DistLinear(g.pf, g.pw2, g.p2, n, 120, 84, dtype=np_dt, seed=seed + 3))
    relu()
    layers.append(ladle.DistLinear(g.p2, g.pw3, g.p2, n, 84, classes, dtype=np_dt,
                                   seed=seed + 4))
    loss = ladle.DistLoss(g.p2, (n, classes), dtype=np_dt)
    return ladle.Network(layers, loss)


class Data:
    """This rank's window of the training images and its labels, in ladle's
    order (what ladle-train reads)."""

    def __init__(self, a, x_layout, loss_layout, dtype):
        self.seed, self.batch = a.seed, a.batch
        (self.xoff, self.xbox) = x_layout.box()
        (self.loff, self.lbox) = loss_layout.box()
        self.has_x = int(np.prod(self.xbox)) > 0
        self.has_loss = self.lbox[0] > 0  # ranks outside the loss's partition: none
        self.ds = c_void_p()
        if self.has_x or self.has_loss:
            r0, rows = (self.xoff[2], self.xbox[2]) if self.has_x else (0, 1)
            c0, cols = (self.xoff[3], self.xbox[3]) if self.has_x else (0, 1)
            win = DatasetDesc()
            lib.ladle_dataset_desc_init(byref(win))
            win.row0, win.rows, win.col0, win.cols = r0, rows, c0, cols
            win.mean, win.std = MEAN, STD
            ladle.check(lib.ladle_dataset_load_dir(a.data.encode(), b"train", byref(win),
                                                   byref(self.ds)))
        self.size = lib.ladle_dataset_size(self.ds) if self.ds.value else 0
        self.x = torch.zeros(self.xbox, dtype=dtype)
        self.xt = lt.wrap(self.x)
        self.labels = torch.zeros(self.lbox[0] if self.has_loss else 0, dtype=torch.int64)

    def load(self, epoch, step):
        """Batch `step` of `epoch` into self.x and self.labels."""
        if self.has_x:
            bd = BatchDesc()
            lib.ladle_batch_desc_init(byref(bd), self.seed, self.batch)
            bd.offset = self.xoff[0]
            ladle.check(lib.ladle_dataset_batch(self.ds, byref(bd), epoch, step,
                                                self.xt.handle, None))
        for i in range(self.labels.shape[0]):
            k = step * self.batch + self.loff[0] + i
            self.labels[i] = lib.ladle_dataset_label(
                self.ds, lib.ladle_dataset_sample(self.ds, self.seed, epoch, k))
        return self.x, self.labels

    def close(self):
        if self.ds.value:
            lib.ladle_dataset_destroy(byref(self.ds))


def steps_per_epoch(comm, a, data):
    size = comm.allreduce(data.size, op=MPI.MAX)
    per = size // a.batch
    return min(per, a.steps) if a.steps > 0 else per


def train(a, comm=MPI.COMM_WORLD, out=print):
    """Train; returns the list of every step's loss (on every rank)."""
    torch.set_num_threads(1)
    ladle.set_num_threads(1)
    dtype = torch.float32 if a.dtype == "f32" else torch.float64
    g = Grids(comm, a.data_ways, a.Ph, a.Pw, a.fc_ways)
    net = LeNet(g, a.batch, a.seed, dtype)
    data = Data(a, net.conv1.layer.x_layout, net.loss.layer.x_layout, dtype)
    per = steps_per_epoch(comm, a, data)
    opt = torch.optim.SGD(net.parameters(), lr=a.lr, momentum=a.momentum)
    sched = LrSchedule()
    lib.ladle_lr_schedule_init(byref(sched), 2, a.lr)  # cosine, as ladle-train
    sched.total_steps = a.epochs * per
    ref = ref_opt = None
    if a.reference:
        ref = ladle_lenet(g, a.batch, a.seed, dtype)
        ref_opt = ladle.Optimizer("sgd", lr=a.lr, momentum=a.momentum)
        ref_opt.add(ref)
    progress = a.progress or max(per // 10, 1)
    losses, ref_losses = [], []
    for e in range(a.epochs):
        for s in range(per):
            x, labels = data.load(e, s)
            lr = lib.ladle_lr_at(byref(sched), e * per + s)
            for group in opt.param_groups:
                group["lr"] = lr
            opt.zero_grad(set_to_none=True)
            loss = net.loss(net(x), labels)
            loss.backward()
            opt.step()
            value = comm.bcast(float(loss), root=0)
            losses.append(value)
            line = "epoch %d/%d  step %d/%d  loss %.6f" % (e + 1, a.epochs, s + 1, per, value)
            if ref is not None:
                ref_opt.lr = lr
                ref.zero_grad()
                ref.forward(data.xt)
                rv = comm.bcast(ref.loss(ladle.Tensor.wrap(labels.numpy())), root=0)
                ref.backward()
                ref_opt.step()
                ref_losses.append(rv)
                line += "  (ladle's network: %.6f, difference %.1e)" % (rv, abs(rv - value))
            if comm.rank == 0 and ((s + 1) % progress == 0 or s + 1 == per):
                out(line)
    data.close()
    # the layers before their partitions (the garbage collector would free
    # them in any order)
    del opt
    for m in net.modules():
        if isinstance(m, lt.LadleModule):
            m.close()
    if ref is not None:
        ref_opt.close()  # it holds the network's parameters: first
        ref.close()
    return (losses, ref_losses) if a.reference else losses


def main():
    a = parse()
    comm = MPI.COMM_WORLD
    need = a.data_ways * a.Ph * a.Pw
    if need > comm.size or a.fc_ways > a.Ph * a.Pw:
        if comm.rank == 0:
            print("torch_lenet: layout %d x %dx%d (fc %d) does not fit %d ranks"
                  % (a.data_ways, a.Ph, a.Pw, a.fc_ways, comm.size), file=sys.stderr)
        return 2
    if comm.rank == 0:
        print("LeNet-5 through ladle.torch on %d ranks: %d (data) x %dx%d (spatial), fc %d; "
              "batch %d, SGD lr %g momentum %g, seed %d" % (comm.size, a.data_ways, a.Ph, a.Pw,
                                                            a.fc_ways, a.batch, a.lr, a.momentum,
                                                            a.seed))
        sys.stdout.flush()
    train(a, comm, out=lambda s: (print(s), sys.stdout.flush()))
    return 0


if __name__ == "__main__":
    sys.exit(main())
