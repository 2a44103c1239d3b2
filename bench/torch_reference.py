"""PyTorch on the CPU, one thread, on the shapes of bench_layers.

Prints, per row, the median milliseconds of forward + backward (input and
weight gradients) in bench_layers' row format (layer, shape, ms), so that
bench/torch_compare.sh can join the two. An outside reference only: ladle
neither needs nor uses PyTorch. Its times include autograd's bookkeeping
and a fresh output tensor per call, as a PyTorch user would see them.
"""
import statistics
import sys
import time

import torch

F = torch.nn.functional

# batch, cin, cout, size, kernel, pad (the conv2d rows of bench_layers)
CONV = [
    (64, 1, 6, 28, 5, 2), (64, 6, 16, 14, 5, 0), (32, 3, 16, 32, 3, 1),
    (32, 16, 16, 32, 3, 1), (32, 32, 32, 16, 3, 1), (32, 64, 64, 16, 3, 1),
    (32, 128, 128, 8, 3, 1), (32, 256, 256, 4, 3, 1), (64, 64, 64, 8, 1, 0),
]


def median_ms(fn, inputs, reps):
    y = fn(*inputs)
    dy = torch.randn_like(y)
    times = []
    for r in range(-2, reps):
        t0 = time.perf_counter()
        fn(*inputs).backward(dy)
        t = time.perf_counter() - t0
        for i in inputs:
            i.grad = None
        if r >= 0:
            times.append(t)
    return statistics.median(times) * 1e3


def row(layer, shape, ms):
    print("%-8s %-34s %9.3f" % (layer, shape, ms))
    sys.stdout.flush()


def main():
    reps = int(sys.argv[1]) if len(sys.argv) > 1 else 15
    dt = torch.float64 if len(sys.argv) > 2 and sys.argv[2] == "f64" else torch.float32
    torch.set_num_threads(1)
    torch.manual_seed(0)
    print("# torch %s, %d thread, median of %d" % (torch.__version__, torch.get_num_threads(), reps))
    for b, ci, co, n, k, p in CONV:
        x = torch.randn(b, ci, n, n, dtype=dt, requires_grad=True)
        w = torch.randn(co, ci, k, k, dtype=dt, requires_grad=True)
        bias = torch.randn(co, dtype=dt, requires_grad=True)
        ms = median_ms(lambda x, w, bias: F.conv2d(x, w, bias, padding=p), (x, w, bias), reps)
        row("conv2d", "%dx%dx%d^2 k%d -> %d" % (b, ci, n, k, co), ms)
    x = torch.randn(32, 64, 32, 32, dtype=dt, requires_grad=True)
    bn = torch.nn.BatchNorm2d(64).to(dt)
    memory = [
        ("maxpool", "32x64x32x32 k2 s2", lambda t: F.max_pool2d(t, 2)),
        ("maxpool", "32x64x32x32 k3 s2 p1", lambda t: F.max_pool2d(t, 3, 2, 1)),
        ("avgpool", "32x64x32x32 k2 s2", lambda t: F.avg_pool2d(t, 2)),
        ("avgpool", "32x64x32x32 k3 s1 p1", lambda t: F.avg_pool2d(t, 3, 1, 1)),
        ("gavgpool", "32x64x32x32", lambda t: F.adaptive_avg_pool2d(t, 1)),
        ("batchnorm", "32x64x32x32 training", bn),
        ("relu", "32x64x32x32", F.relu),
        ("gelu", "32x64x32x32", F.gelu),
    ]
    for layer, shape, fn in memory:
        row(layer, shape, median_ms(fn, (x,), reps))


if __name__ == "__main__":
    main()
