"""Operators written in Python (CustomOp) checked by ladle's own tests."""

import numpy as np
import pytest

import ladle


def matmul_op(A, wrong=False, dtype=np.float64):
    """F x = A x along the last axis, in numpy; its adjoint A^T dy (or a
    wrong one)."""
    m, n = A.shape
    At = (A * 1.01).T if wrong else A.T

    def forward(x, y):
        y[...] = x @ A.T

    def adjoint(dy, dx):
        dx[...] = dy @ At.T

    return ladle.CustomOp(forward, adjoint, x_shape=(3, n), y_shape=(3, m), dtype=dtype,
                          name="matmul")


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_custom_linear_op_passes_adjoint_test(rng, dtype):
    A = rng.uniform(-1, 1, (4, 5)).astype(dtype)
    with matmul_op(A, dtype=dtype) as op:
        assert op.x_shape == (3, 5) and op.y_shape == (3, 4)
        assert ladle.adjoint_test(op) <= ladle.adjoint_tolerance(dtype)
        x = rng.uniform(-1, 1, (3, 5)).astype(dtype)
        np.testing.assert_allclose(op.forward(x), x @ A.T, rtol=1e-6)


def test_wrong_adjoint_fails_adjoint_test(rng):
    A = rng.uniform(-1, 1, (4, 5))
    with matmul_op(A, wrong=True) as op:
        assert ladle.adjoint_test(op) > 1e-3


def test_python_exception_becomes_callback_error(rng):
    def forward(x, y):
        raise ValueError("no forward today")

    op = ladle.CustomOp(forward, lambda dy, dx: None, x_shape=(2,), y_shape=(2,))
    with pytest.raises(ladle.LadleError) as e:
        op.forward(np.zeros(2))
    assert e.value.name == "LADLE_ERR_CALLBACK"
    assert "ValueError" in e.value.message and "no forward today" in e.value.message
    assert "no forward today" in op.last_traceback
    # the op still works once the callback does
    with pytest.raises(ladle.LadleError):
        ladle.adjoint_test(op)
    op.close()


def test_custom_nonlinear_layer_with_params_passes_gradient_test(rng):
    """y = tanh(x * w) elementwise with a parameter w: forward saves y."""
    n = 6
    w = rng.uniform(0.5, 1.5, n)
    gw = np.zeros(n)
    saved_bytes = 8 * 2 * n  # x and y of the forward

    def forward(x, y, saved):
        y[...] = np.tanh(x * w)
        s = saved.view(np.float64)
        s[:n], s[n:] = x.ravel(), y.ravel()

    def backward(dy, dx, saved):
        s = saved.view(np.float64)
        dx[...] = dy * (1 - s[n:] ** 2) * w

    def backward_weight(dy, saved):
        s = saved.view(np.float64)
        gw[...] += (dy * (1 - s[n:] ** 2) * s[:n]).reshape(-1)

    op = ladle.CustomOp(forward, backward, x_shape=(1, n), y_shape=(1, n), linear=False,
                        backward_weight=backward_weight, params=[w], grads=[gw],
                        param_names=["w"], saved_bytes=saved_bytes, name="tanh-scale")
    assert op.param_names() == ["w"]
    assert np.shares_memory(op.param(0), w)
    assert ladle.gradient_test(op, seed=2) < 1e-6
    # a broken backward is caught
    op2 = ladle.CustomOp(forward, lambda dy, dx, s: backward(dy, dx, s) or dx.__imul__(1.1),
                         x_shape=(1, n), y_shape=(1, n), linear=False,
                         backward_weight=backward_weight, params=[w], grads=[gw],
                         saved_bytes=saved_bytes)
    assert ladle.gradient_test(op2, seed=2) > 1e-3


def test_distributed_custom_op(comm, rng):
    """A rank-local scaling on a distributed layout, composed with ladle's
    repartition: the adjoint test is collective."""
    layout = ladle.Layout(ladle.Partition(comm, [comm.size]), (4 * comm.size + 1,))
    scale = 1.0 + comm.rank
    op = ladle.CustomOp(lambda x, y: x * scale, lambda dy, dx: dy * scale, x_layout=layout,
                        y_layout=layout, name="scale")
    assert op.x_shape == layout.local_shape
    assert ladle.adjoint_test(op) <= ladle.adjoint_tolerance(np.float64)
    op.close()
