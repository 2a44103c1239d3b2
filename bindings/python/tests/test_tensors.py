"""Tensors wrap numpy arrays without copying; views of ladle's memory."""

import numpy as np
import pytest

import ladle


def test_wrap_is_zero_copy():
    a = np.zeros((3, 4))
    t = ladle.Tensor.wrap(a)
    assert t.data_ptr == a.ctypes.data
    assert t.shape == (3, 4) and t.strides == (4, 1) and t.dtype == np.float64
    # numpy writes, ladle reads
    a[1, 2] = 3.0
    assert t.dot(np.ones((3, 4))) == 3.0
    # ladle writes, numpy reads
    t.fill(2.5)
    assert np.all(a == 2.5)
    assert t.numpy() is a


def test_wrap_keeps_array_alive():
    t = ladle.Tensor.wrap(np.arange(6.0).reshape(2, 3))
    import gc
    gc.collect()
    t.fill(1.0)
    assert t.numpy().sum() == 6.0


def test_wrap_strided_view_passes_strides():
    a = np.zeros((4, 6), dtype=np.float32)
    v = a[:, ::2]
    t = ladle.Tensor.wrap(v)
    assert t.shape == (4, 3) and t.strides == (6, 2)
    t.fill(1.0)
    assert a[:, ::2].sum() == 12 and a[:, 1::2].sum() == 0


def test_wrap_refuses_negative_strides_and_other_dtypes():
    with pytest.raises(ladle.LadleError) as e:
        ladle.Tensor.wrap(np.zeros(5)[::-1])
    assert e.value.name == "LADLE_ERR_ARG" and "strides" in e.value.message
    with pytest.raises(ladle.LadleError) as e:
        ladle.Tensor.wrap(np.zeros(5, dtype=np.int32))
    assert e.value.name == "LADLE_ERR_DTYPE" and "int32" in e.value.message


def test_convert_rounds_as_numpy_does():
    rng = np.random.default_rng(7)
    a = rng.standard_normal(4096) * np.exp2(rng.integers(-30, 20, 4096))
    a[:4] = [np.inf, -np.inf, 65520.0, 2.0 ** -25]
    h = np.zeros(4096, dtype=np.float16)
    ladle.Tensor.wrap(h).convert_from(ladle.Tensor.wrap(a))
    # numpy's float64 -> float16 is rounded once, to nearest even
    with np.errstate(over="ignore"):  # the values past 65504 become inf, as wanted
        want = a.astype(np.float16)
    assert np.array_equal(h.view(np.uint16), want.view(np.uint16))
    back = np.zeros(4096)
    ladle.Tensor.wrap(back).convert_from(ladle.Tensor.wrap(h))
    assert np.array_equal(back, h.astype(np.float64))
    with pytest.raises(ladle.LadleError) as e:
        ladle.Tensor.wrap(h).convert_from(ladle.Tensor.wrap(np.zeros(5)))
    assert e.value.name == "LADLE_ERR_SHAPE"


def test_ladle_random_fill_seen_in_numpy():
    a = np.zeros(100)
    t = ladle.Tensor.wrap(a)
    t.fill_random(seed=3)
    assert np.all(a >= -1) and np.all(a < 1) and np.any(a != 0)


def test_layer_param_views_share_memory():
    lin = ladle.Linear((2, 3), 4, seed=1)
    names = lin.param_names()
    assert names == ["weight", "bias"]
    w = lin.param(0)
    assert w.shape == (4, 3)
    w[:] = 0.0
    lin.param(1)[:] = 1.0
    y = lin.forward(np.ones((2, 3)))
    np.testing.assert_array_equal(y, np.ones((2, 4)))


def test_read_only_output_refused(comm):
    p = ladle.Partition(comm, [comm.size])
    with ladle.all_sum_reduce(p, [0], (3,)) as op:
        y = np.zeros(3)
        y.flags.writeable = False
        with pytest.raises(ladle.LadleError) as e:
            op.forward(np.ones(3), y)
        assert e.value.name == "LADLE_ERR_ARG" and "read-only" in e.value.message
        # a read-only input is fine
        x = np.ones(3)
        x.flags.writeable = False
        assert op.forward(x).sum() == 3 * comm.size


def test_views_are_plain_arrays_that_keep_their_layer():
    w = ladle.Linear((2, 3), 4, seed=1).param(0)  # the layer lives on through w
    assert type(w) is np.ndarray and w.shape == (4, 3)
    import gc
    gc.collect()
    assert np.all(np.abs(w) <= 1)
