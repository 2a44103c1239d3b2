"""Every ladle status is a LadleError with ladle's message, on every rank."""

import numpy as np
import pytest

import ladle


def all_ranks_raise(comm, exc_info, name):
    e = exc_info.value
    assert isinstance(e, ladle.LadleError)
    assert e.name == name and e.status == ladle.ERR[name]
    assert e.message
    # every rank got the same status
    assert set(comm.allgather(e.status)) == {e.status}


def test_partition_larger_than_comm(comm):
    with pytest.raises(ladle.LadleError) as e:
        ladle.Partition(comm, [comm.size + 1])
    all_ranks_raise(comm, e, e.value.name)
    assert e.value.name in ("LADLE_ERR_PARTITION", "LADLE_ERR_ARG")


def test_bad_broadcast(comm):
    p = ladle.Partition(comm, [comm.size])
    with pytest.raises(ladle.LadleError) as e:
        ladle.broadcast(p, p, (4, -2))
    all_ranks_raise(comm, e, e.value.name)
    if comm.size >= 3:
        # extents 2 -> 3: neither equal nor 1, illegal on every rank
        p_x = ladle.Partition(comm, [2], ranks=[0, 1])
        p_y = ladle.Partition(comm, [3], ranks=[0, 1, 2])
        with pytest.raises(ladle.LadleError) as e:
            ladle.broadcast(p_x, p_y, (4,))
        all_ranks_raise(comm, e, "LADLE_ERR_PARTITION")


def test_bad_shape_in_forward(comm):
    p = ladle.Partition(comm, [comm.size])
    with ladle.all_sum_reduce(p, [0], (4, 4)) as op:
        with pytest.raises(ladle.LadleError) as e:
            op.forward(np.zeros((4, 5)), np.zeros((4, 4)))
        all_ranks_raise(comm, e, "LADLE_ERR_SHAPE")
        assert "shape" in str(e.value)


def test_wrong_dtype_in_forward(comm):
    p = ladle.Partition(comm, [comm.size])
    with ladle.all_sum_reduce(p, [0], (4,)) as op:
        with pytest.raises(ladle.LadleError) as e:
            op.forward(np.zeros(4, dtype=np.float32), np.zeros(4))
        all_ranks_raise(comm, e, "LADLE_ERR_DTYPE")


def test_sequential_layer_errors_carry_message():
    with pytest.raises(ladle.LadleError) as e:
        ladle.Linear((2, 3), 0)
    assert e.value.message and e.value.name.startswith("LADLE_ERR_")
    lin = ladle.Linear((2, 3), 4)
    with pytest.raises(ladle.LadleError) as e:
        lin.forward(np.zeros((2, 5)))
    assert e.value.name == "LADLE_ERR_SHAPE"
    assert str(e.value).startswith("LADLE_ERR_SHAPE: ")


def test_unknown_names_are_ladle_errors():
    with pytest.raises(ladle.LadleError) as e:
        ladle.Activation((2,), kind="swish")
    assert e.value.name == "LADLE_ERR_ARG" and "swish" in e.value.message


def test_closed_op_is_refused(comm):
    p = ladle.Partition(comm, [comm.size])
    op = ladle.all_sum_reduce(p, [0], (2,))
    op.close()
    op.close()  # twice is fine
    with pytest.raises(ValueError):
        op.forward(np.zeros(2))
