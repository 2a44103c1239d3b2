"""examples/torch_lenet.py: five training steps of LeNet-5 through ladle.torch
(torch's loop, torch's SGD) give the losses of ladle's own network and
optimizer on the same batches (the path ladle-train takes), in the layout
each rank count gets (the demo's 2 x 2x1, fc 2 at 4 ranks)."""
import os
import sys

import pytest

torch = pytest.importorskip("torch")

from mpi4py import MPI  # noqa: E402

here = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(here, "..", "..", "..", "examples"))

DATA = os.environ.get("LADLE_DATA", "/usr/share/datasets/fashion-mnist")
LAYOUTS = {1: "--data-ways 1 --spatial 1x1 --fc-ways 1",
           2: "--data-ways 1 --spatial 2x1 --fc-ways 2",
           3: "--data-ways 1 --spatial 3x1 --fc-ways 3",
           4: "--data-ways 2 --spatial 2x1 --fc-ways 2"}


@pytest.mark.skipif(not os.path.exists(os.path.join(DATA, "train-labels-idx1-ubyte.gz")),
                    reason="no Fashion-MNIST (dataset-fashion-mnist) in " + DATA)
def test_losses_match_ladle_network():
    import torch_lenet
    layout = LAYOUTS.get(MPI.COMM_WORLD.size, LAYOUTS[4]).split()
    a = torch_lenet.parse(layout + ["--steps", "5", "--reference", "--data", DATA])
    losses, ref = torch_lenet.train(a, out=lambda s: None)
    assert len(losses) == 5 and len(ref) == 5
    for t, r in zip(losses, ref):
        assert abs(t - r) <= 1e-6 * abs(r), (losses, ref)
    # the first loss is the untrained network's: near ln 10
    assert 2.0 < losses[0] < 2.6
