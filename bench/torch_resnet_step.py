"""ResNet-20 training steps in plain PyTorch (CPU, one thread): the twin of
bench_dist's resnet rows (ladle_resnet_create's LADLE_RESNET20).

    python3 bench/torch_resnet_step.py [--batch 64] [--reps 7]

The network: conv 3x3 (1 -> 16, no bias), batch norm, ReLU; three stages of
three basic blocks (16, 32, 64 channels; the first block of stages 2 and 3
at stride 2 with a 1x1 convolution and batch norm on the shortcut); global
average pooling; linear 64 -> 10; cross entropy (mean). A step is zero the
gradients, forward, loss, backward (no optimizer, as bench_dist). Batch of
28 x 28 random images, labels i mod 10, f32; the median of --reps steps after
2 warm-up steps:

    torch resnet20 batch 64: 123.456 ms/step (median of 7)
"""
import argparse
import statistics
import time

import torch
from torch import nn


class Block(nn.Module):
    def __init__(self, cin, cout, stride):
        super().__init__()
        self.conv1 = nn.Conv2d(cin, cout, 3, stride, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(cout)
        self.conv2 = nn.Conv2d(cout, cout, 3, 1, 1, bias=False)
        self.bn2 = nn.BatchNorm2d(cout)
        self.short = None
        if stride != 1 or cin != cout:
            self.short = nn.Sequential(nn.Conv2d(cin, cout, 1, stride, 0, bias=False),
                                       nn.BatchNorm2d(cout))

    def forward(self, x):
        y = torch.relu(self.bn1(self.conv1(x)))
        y = self.bn2(self.conv2(y))
        return torch.relu(y + (x if self.short is None else self.short(x)))


class ResNet20(nn.Module):
    def __init__(self, classes=10, width=16):
        super().__init__()
        self.stem = nn.Sequential(nn.Conv2d(1, width, 3, 1, 1, bias=False),
                                  nn.BatchNorm2d(width), nn.ReLU())
        blocks, cin = [], width
        for s in range(3):
            for b in range(3):
                cout = width << s
                blocks.append(Block(cin, cout, 2 if s > 0 and b == 0 else 1))
                cin = cout
        self.blocks = nn.Sequential(*blocks)
        self.fc = nn.Linear(cin, classes)

    def forward(self, x):
        y = self.blocks(self.stem(x))
        return self.fc(y.mean(dim=(2, 3)))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--batch", type=int, default=64)
    ap.add_argument("--reps", type=int, default=7)
    a = ap.parse_args()
    torch.set_num_threads(1)
    torch.manual_seed(1)
    net = ResNet20()
    params = sum(p.numel() for p in net.parameters())
    assert params == 272186, params  # the count test_resnet derives by hand
    x = torch.randn(a.batch, 1, 28, 28)
    labels = torch.arange(a.batch) % 10
    loss_fn = nn.CrossEntropyLoss()
    times = []
    for r in range(-2, a.reps):
        t0 = time.perf_counter()
        net.zero_grad(set_to_none=False)
        loss = loss_fn(net(x), labels)
        loss.backward()
        if r >= 0:
            times.append(time.perf_counter() - t0)
    print("torch resnet20 batch %d: %.3f ms/step (median of %d)"
          % (a.batch, 1e3 * statistics.median(times), a.reps))


if __name__ == "__main__":
    main()
