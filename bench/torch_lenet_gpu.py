#!/usr/bin/env python3
"""PyTorch's LeNet-5 training step on one GPU: the reference of bench_gpu's
lenet rows (scripts/device-check.sh runs both and prints the ratio).

The network is train/models.c's sequential LeNet-5 (ladle_lenet_create
with sequential = 1) layer for layer:

    conv 1->6 k5 p2, [bn], maxpool 2, relu
    conv 6->16 k5,   [bn], maxpool 2, relu
    flatten, linear 400->120, relu, linear 120->84, relu, linear 84->10
    cross entropy (mean)

Each ReLU follows its pooling, as in ladle's model: the two commute, so the
network computes what the textbook order (relu, then maxpool) does with a
quarter of the ReLU's work. --textbook builds that order instead, to show
what the reordering gives PyTorch.

f32 on 28 x 28 inputs, and the same step as bench_gpu times: zero the
gradients, forward, loss, backward, SGD with momentum 0.9 (lr 0.01), then
wait for the GPU. TF32 is off for matmuls and cuDNN alike, as ladle's
default (LADLE_DEVICE_TF32 0: f32 GEMMs round as the CPU does); --tf32
turns it on for both. cuDNN picks its algorithms as it does by default
(benchmark mode off); --cudnn-benchmark lets it time them first.

Prints one line per network, which bench_gpu --torch FILE reads:

    torch-lenet bn=0 batch=256 ms=0.812 steps=50 device=NVIDIA H200 ...

    python3 bench/torch_lenet_gpu.py [--batch 256] [--steps 50] [--warmup 10]
                                     [--device cuda] [--tf32] [--cudnn-benchmark]
                                     [--textbook]

Exit status 0, or 1 when the device is not there (the line says why).
"""
import argparse
import statistics
import sys
import time

import torch
from torch import nn


def lenet(bn, textbook=False):
    """LeNet-5 as ladle builds it (models.c's sequential()), or with each ReLU
    before its pooling (textbook)."""
    def act_pool():
        return [nn.ReLU(), nn.MaxPool2d(2)] if textbook else [nn.MaxPool2d(2), nn.ReLU()]
    layers = [nn.Conv2d(1, 6, 5, padding=2)]
    if bn:
        layers.append(nn.BatchNorm2d(6))
    layers += act_pool() + [nn.Conv2d(6, 16, 5)]
    if bn:
        layers.append(nn.BatchNorm2d(16))
    layers += act_pool() + [
        nn.Flatten(),
        nn.Linear(16 * 5 * 5, 120),
        nn.ReLU(),
        nn.Linear(120, 84),
        nn.ReLU(),
        nn.Linear(84, 10),
    ]
    return nn.Sequential(*layers)


def sync(device):
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def time_steps(bn, args, device):
    """Median milliseconds of a training step, after warm-up steps."""
    torch.manual_seed(1)
    model = lenet(bn, args.textbook).to(device)
    model.train()
    opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    loss_fn = nn.CrossEntropyLoss()
    # random inputs in [-1, 1) and labels i % 10, as bench_gpu's
    x = torch.rand(args.batch, 1, 28, 28, device=device) * 2 - 1
    t = torch.arange(args.batch, device=device) % 10
    times = []
    for i in range(args.warmup + args.steps):
        sync(device)
        t0 = time.perf_counter()
        opt.zero_grad()
        loss = loss_fn(model(x), t)
        loss.backward()
        opt.step()
        sync(device)
        if i >= args.warmup:
            times.append(time.perf_counter() - t0)
    if not torch.isfinite(loss).item():
        raise RuntimeError(f"the loss is not finite: {loss.item()}")
    return 1e3 * statistics.median(times)


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--batch", type=int, default=256)
    p.add_argument("--steps", type=int, default=50)
    p.add_argument("--warmup", type=int, default=10)
    p.add_argument("--device", default="cuda")
    p.add_argument("--tf32", action="store_true")
    p.add_argument("--cudnn-benchmark", action="store_true")
    p.add_argument("--textbook", action="store_true")
    args = p.parse_args()

    device = torch.device(args.device)
    if device.type == "cuda" and not torch.cuda.is_available():
        print(f"torch-lenet: no GPU: torch {torch.__version__} sees no CUDA device")
        return 1
    torch.backends.cuda.matmul.allow_tf32 = args.tf32
    torch.backends.cudnn.allow_tf32 = args.tf32
    torch.backends.cudnn.benchmark = args.cudnn_benchmark
    name = torch.cuda.get_device_name(device) if device.type == "cuda" else "cpu"
    for bn in (0, 1):
        ms = time_steps(bn, args, device)
        print(
            f"torch-lenet bn={bn} batch={args.batch} ms={ms:.4f} steps={args.steps} "
            f"device={name} torch={torch.__version__} tf32={int(args.tf32)} "
            f"cudnn_benchmark={int(args.cudnn_benchmark)} order="
            f"{'relu-pool' if args.textbook else 'pool-relu'}",
            flush=True,
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
