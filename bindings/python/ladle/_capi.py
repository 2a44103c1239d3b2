"""The C ABI of libladle through ctypes: finding and loading the library,
the structs the Python package fills, and a prototype (argtypes and restype)
for every function it calls.

Nothing here is compiled: the library is the one `make python` built
(against the MPI of mpi4py) or the one $LADLE_LIBRARY names. ladle.torch
and other bindings use these prototypes too; the classes in the other
modules are the friendly layer over them.

Handles (ladle_partition *, ladle_op *, ...) are plain c_void_p values.
"""

import ctypes
import os
from ctypes import (CFUNCTYPE, POINTER, Structure, c_char_p, c_double, c_int, c_int64,
                    c_size_t, c_uint, c_uint64, c_void_p)

# MPI_Fint is a C int in every MPI (the Fortran INTEGER); mpi4py's
# comm.py2f() gives one.
MPI_Fint = c_int


class Comm(Structure):
    """ladle_comm (include/ladle/comm.h): a communicator as every ladle call
    takes it, its Fortran handle. Comm.of(mpi4py_comm) makes one."""
    _fields_ = [("fortran", MPI_Fint)]

    @classmethod
    def of(cls, comm):
        return cls(comm.py2f())


status_t = c_int
handle = c_void_p
handle_p = POINTER(c_void_p)
i64_p = POINTER(c_int64)
int_p = POINTER(c_int)

MAX_NDIM = 8
SELF = -1

# ladle_status codes (include/ladle/core.h); names come from the library
OK = 0

# enums
F32, F64, I64, BF16, F16 = 1, 2, 3, 4, 5
CPU, CUDA, GUARDED = 0, 1, 2
TRANSPOSE_SRC, TRANSPOSE_DEST, CHECKED = 0x1, 0x2, 0x4
TP_ROW = 0x10


# ---- finding the library -------------------------------------------------

def _package_dir():
    return os.path.dirname(os.path.abspath(__file__))


def library_candidates():
    """The paths tried, in order: $LADLE_LIBRARY, then the build tree's
    python lib folder (bindings/python/ladle -> build/python/lib)."""
    env = os.environ.get("LADLE_LIBRARY")
    if env:
        return [env]
    root = os.path.normpath(os.path.join(_package_dir(), "..", "..", ".."))
    if not os.path.exists(os.path.join(root, "include", "ladle.h")):
        return []  # an installed package: only $LADLE_LIBRARY says where
    return [os.path.join(root, "build", "python", "lib", "libladle.so")]


def find_library():
    tried = library_candidates()
    for path in tried:
        if os.path.exists(path):
            return path
    raise ImportError(
        "ladle: libladle not found (%s). Build it with `make python` in the ladle "
        "source tree, and set LADLE_LIBRARY to the build's python/lib/libladle.so when "
        "the package is installed elsewhere." % ("tried " + ", ".join(tried) if tried else
                                                   "LADLE_LIBRARY is not set"))


# ---- structs ---------------------------------------------------------------

def _arr(t, n):
    return t * n


def _each(ctype, *names):
    """One field of ctype per name, in order."""
    return [(n, ctype) for n in names]


# the per-dimension triples of the convolutions and pools
_DIMS3 = _arr(c_int64, 3)


# descriptors start with their size, which their _init sets
_SZ = [("size", c_size_t)]


class ladle_broadcast_desc(Structure):
    _fields_ = _SZ + [("ndim", c_int), ("shape", POINTER(c_int64)), ("flags", c_uint)]


class ladle_all_sum_reduce_desc(Structure):
    _fields_ = _SZ + [("naxes", c_int), ("axes", POINTER(c_int)), ("ndim", c_int),
                      ("shape", POINTER(c_int64)), ("flags", c_uint)]


class ladle_window(Structure):
    _fields_ = (_SZ + [("ndim", c_int)]
                + _each(_arr(c_int64, MAX_NDIM), "kernel", "stride", "padding", "dilation")
                + [("ceil_mode", c_int), ("periodic", c_uint)])


class ladle_conv_desc(Structure):
    _fields_ = (_SZ + [("nd", c_int)]
                + _each(c_int64, "in_channels", "out_channels", "groups")
                + _each(_DIMS3, "kernel", "stride", "padding", "dilation")
                + _each(c_int, "bias", "padding_mode", "same") + [("flags", c_uint)])


class ladle_linear_desc(Structure):
    _fields_ = _SZ + [("in_features", c_int64),
                ("out_features", c_int64),
                ("bias", c_int),
                ("flags", c_uint)]


class ladle_dist_partitions(Structure):
    _fields_ = [("x", c_void_p), ("w", c_void_p), ("y", c_void_p)]


class ladle_pool_desc(Structure):
    _fields_ = (_SZ + _each(c_int, "kind", "nd")
                + _each(_DIMS3, "kernel", "stride", "padding", "dilation")
                + _each(c_int, "ceil_mode", "count_include_pad") + [("flags", c_uint)])


class ladle_batchnorm_desc(Structure):
    _fields_ = (_SZ + [("num_features", c_int64)] + _each(c_double, "eps", "momentum")
                + _each(c_int, "affine", "track_running_stats", "sync", "group_size")
                + [("flags", c_uint)])


class ladle_loss_desc(Structure):
    _fields_ = (_SZ + _each(c_int, "kind", "reduction")
                + [("label_smoothing", c_double), ("ignore_index", c_int64),
                   ("weights", POINTER(c_double)), ("num_weights", c_int64),
                   ("flags", c_uint)])


class ladle_optimizer_desc(Structure):
    _fields_ = (_SZ + [("kind", c_int)] + _each(c_double, "lr", "momentum", "dampening")
                + [("nesterov", c_int)]
                + _each(c_double, "beta1", "beta2", "eps", "weight_decay"))


class ladle_all_gather_desc(Structure):
    _fields_ = _SZ + [("axis", c_int), ("ndim", c_int), ("shape", POINTER(c_int64)),
                      ("dim", c_int), ("counts", POINTER(c_int64)), ("flags", c_uint)]


class ladle_conv_transpose_desc(Structure):
    _fields_ = (_SZ + [("nd", c_int)]
                + _each(c_int64, "in_channels", "out_channels", "groups")
                + _each(_DIMS3, "kernel", "stride", "padding", "output_padding", "dilation")
                + _each(c_int, "bias", "padding_mode") + [("flags", c_uint)])


class ladle_groupnorm_desc(Structure):
    _fields_ = (_SZ + _each(c_int64, "num_groups", "num_channels")
                + [("eps", c_double), ("affine", c_int), ("flags", c_uint)])


class ladle_layernorm_desc(Structure):
    _fields_ = (_SZ + [("normalized_ndim", c_int), ("eps", c_double)]
                + _each(c_int, "elementwise_affine", "bias"))


class ladle_rmsnorm_desc(Structure):
    _fields_ = _SZ + [("normalized_ndim", c_int), ("eps", c_double),
                      ("elementwise_affine", c_int)]


class ladle_embedding_desc(Structure):
    _fields_ = (_SZ + _each(c_int64, "num_embeddings", "embedding_dim")
                + [("flags", c_uint)])


class ladle_interp_desc(Structure):
    _fields_ = (_SZ + _each(c_int, "mode", "nd") + _each(_DIMS3, "out_size", "scale")
                + [("align_corners", c_int), ("flags", c_uint)])


class ladle_attention_desc(Structure):
    _fields_ = (_SZ + _each(c_int64, "embed_dim", "num_heads", "head_dim")
                + _each(c_int, "causal", "qkv_bias", "out_bias")
                + [("scale", c_double), ("block", c_int64), ("f32_tiles", c_int),
                   ("flags", c_uint)])


class ladle_adjoint_result(Structure):
    _fields_ = _each(c_double, "fx_y", "x_fty", "mismatch")


class ladle_gradient_result(Structure):
    _fields_ = [("input_error", c_double),
                ("param_error", _arr(c_double, 4)),
                ("max_param_error", c_double),
                ("nparams", c_int)]


# the callbacks of a user-defined operator (include/ladle/custom.h)
custom_forward_fn = CFUNCTYPE(c_int, c_void_p, c_void_p, c_void_p, c_void_p)
custom_adjoint_fn = CFUNCTYPE(c_int, c_void_p, c_void_p, c_void_p, c_void_p)
custom_backward_weight_fn = CFUNCTYPE(c_int, c_void_p, c_void_p, c_void_p)
custom_destroy_fn = CFUNCTYPE(None, c_void_p)


class ladle_custom_desc(Structure):
    _fields_ = [("size", c_size_t),
                ("name", c_char_p),
                ("dtype", c_int),
                ("device", c_int),
                ("x_layout", c_void_p),
                ("y_layout", c_void_p),
                ("x_ndim", c_int),
                ("x_shape", i64_p),
                ("y_ndim", c_int),
                ("y_shape", i64_p),
                ("linear", c_int),
                ("forward", custom_forward_fn),
                ("adjoint", custom_adjoint_fn),
                ("backward_weight", custom_backward_weight_fn),
                ("saved_bytes", c_size_t),
                ("num_params", c_int),
                ("params", POINTER(c_void_p)),
                ("grads", POINTER(c_void_p)),
                ("param_names", POINTER(c_char_p)),
                ("user", c_void_p),
                ("destroy", custom_destroy_fn),
                ("batched", c_int)]


# ---- prototypes ------------------------------------------------------------

S = status_t
H = handle
HP = handle_p

# (name, restype, argtypes)
PROTOTYPES = [
    # core
    ("ladle_version", c_char_p, []),
    ("ladle_version_number", c_int, []),
    ("ladle_mpi_library", c_char_p, []),
    ("ladle_status_string", c_char_p, [c_int]),
    ("ladle_status_name", c_char_p, [c_int]),
    ("ladle_error_message", c_char_p, []),
    ("ladle_error_clear", None, []),
    ("ladle_dtype_size", c_size_t, [c_int]),
    ("ladle_dtype_name", c_char_p, [c_int]),
    ("ladle_device_name", c_char_p, [c_int]),
    # tensors
    ("ladle_tensor_create", S, [c_int, c_int, c_int, i64_p, HP]),
    ("ladle_tensor_wrap", S, [c_int, c_int, c_int, i64_p, i64_p, c_void_p, HP]),
    ("ladle_tensor_set_data", S, [H, c_void_p]),
    ("ladle_tensor_destroy", S, [HP]),
    ("ladle_tensor_dtype", c_int, [H]),
    ("ladle_tensor_device", c_int, [H]),
    ("ladle_tensor_ndim", c_int, [H]),
    ("ladle_tensor_shape", i64_p, [H]),
    ("ladle_tensor_strides", i64_p, [H]),
    ("ladle_tensor_numel", c_int64, [H]),
    ("ladle_tensor_data", c_void_p, [H]),
    ("ladle_tensor_is_contiguous", c_int, [H]),
    ("ladle_tensor_fill", S, [H, c_double]),
    ("ladle_tensor_copy", S, [H, H]),
    ("ladle_tensor_convert", S, [H, H]),
    ("ladle_tensor_dot", S, [H, H, POINTER(c_double)]),
    ("ladle_tensor_fill_random", S, [H, c_uint64, c_uint64]),
    # partitions
    ("ladle_partition_create", S, [Comm, c_int, int_p, int_p, HP]),
    ("ladle_partition_create_subset", S, [H, c_int, int_p, int_p, HP]),
    ("ladle_partition_create_sub", S, [H, int_p, HP]),
    ("ladle_partition_create_union", S, [H, H, HP]),
    ("ladle_partition_destroy", S, [HP]),
    ("ladle_partition_active", c_int, [H]),
    ("ladle_partition_ndim", c_int, [H]),
    ("ladle_partition_shape", int_p, [H]),
    ("ladle_partition_size", c_int, [H]),
    ("ladle_partition_rank", c_int, [H]),
    ("ladle_partition_coords", int_p, [H]),
    ("ladle_partition_comm", Comm, [H]),
    # layouts
    ("ladle_layout_create_balanced", S, [H, c_int, i64_p, HP]),
    ("ladle_layout_create_split", S, [H, c_int, i64_p, POINTER(i64_p), HP]),
    ("ladle_layout_create_block", S, [H, c_int, i64_p, HP]),
    ("ladle_layout_destroy", S, [HP]),
    ("ladle_layout_partition", H, [H]),
    ("ladle_layout_ndim", c_int, [H]),
    ("ladle_layout_global_shape", i64_p, [H]),
    ("ladle_layout_is_decomposition", c_int, [H]),
    ("ladle_layout_box", S, [H, c_int, i64_p, i64_p]),
    ("ladle_layout_local_volume", c_int64, [H, c_int]),
    # operators
    ("ladle_op_forward", S, [H, H, H]),
    ("ladle_op_adjoint", S, [H, H, H]),
    ("ladle_op_x_layout", H, [H]),
    ("ladle_op_y_layout", H, [H]),
    ("ladle_op_x_shape", S, [H, int_p, i64_p]),
    ("ladle_op_y_shape", S, [H, int_p, i64_p]),
    ("ladle_op_dtype", c_int, [H]),
    ("ladle_op_device", c_int, [H]),
    ("ladle_op_name", c_char_p, [H]),
    ("ladle_op_kind_of", c_int, [H]),
    ("ladle_op_kind_name", c_char_p, [c_int]),
    ("ladle_op_active", c_int, [H]),
    ("ladle_op_is_local", c_int, [H]),
    ("ladle_op_workspace_bytes", c_size_t, [H]),
    ("ladle_op_destroy", S, [HP]),
    # primitives
    ("ladle_broadcast_desc_init", None, [POINTER(ladle_broadcast_desc), c_int, i64_p]),
    ("ladle_broadcast_create", S, [POINTER(ladle_broadcast_desc), H, H, c_int, c_int, HP]),
    ("ladle_sum_reduce_create", S, [POINTER(ladle_broadcast_desc), H, H, c_int, c_int, HP]),
    ("ladle_all_sum_reduce_desc_init", None,
     [POINTER(ladle_all_sum_reduce_desc), c_int, int_p, c_int, i64_p]),
    ("ladle_all_sum_reduce_create", S, [POINTER(ladle_all_sum_reduce_desc), H, c_int, c_int, HP]),
    ("ladle_repartition_create", S, [H, H, c_int, c_int, c_uint, HP]),
    ("ladle_window_init", None, [POINTER(ladle_window), c_int]),
    ("ladle_halo_exchange_create", S, [H, POINTER(ladle_window), c_int, c_int, c_uint, HP]),
    ("ladle_halo_exchange_bulk_layout", H, [H]),
    ("ladle_halo_exchange_output_layout", H, [H]),
    ("ladle_halo_exchange_begin", S, [H, H]),
    ("ladle_halo_exchange_end", S, [H, H]),
    ("ladle_halo_exchange_adjoint_begin", S, [H, H]),
    ("ladle_halo_exchange_adjoint_end", S, [H, H]),
    ("ladle_halo_exchange_progress", S, [H, int_p]),
    ("ladle_all_gather_desc_init", None,
     [POINTER(ladle_all_gather_desc), c_int, c_int, i64_p, c_int]),
    ("ladle_all_gather_create", S, [POINTER(ladle_all_gather_desc), H, c_int, c_int, HP]),
    ("ladle_reduce_scatter_create", S, [POINTER(ladle_all_gather_desc), H, c_int, c_int, HP]),
    # checks
    ("ladle_adjoint_test", S, [H, c_uint64, POINTER(ladle_adjoint_result)]),
    ("ladle_gradient_test", S, [H, c_uint64, c_int, POINTER(ladle_gradient_result)]),
    ("ladle_gradient_result_param_error", c_double, [POINTER(ladle_gradient_result), c_int]),
    ("ladle_adjoint_tolerance", c_double, [c_int]),
    # layers
    ("ladle_set_num_threads", S, [c_int]),
    ("ladle_get_num_threads", c_int, []),
    ("ladle_ctx_create", S, [H, HP]),
    ("ladle_ctx_destroy", S, [HP]),
    ("ladle_layer_forward", S, [H, H, H, H]),
    ("ladle_layer_backward", S, [H, H, H, H]),
    ("ladle_layer_backward_weight", S, [H, H, H]),
    ("ladle_op_num_params", c_int, [H]),
    ("ladle_op_param", H, [H, c_int]),
    ("ladle_op_grad", H, [H, c_int]),
    ("ladle_op_param_name", c_char_p, [H, c_int]),
    ("ladle_op_zero_grad", S, [H]),
    ("ladle_op_param_shard", S, [H, c_int, int_p, i64_p, i64_p, int_p]),
    ("ladle_layer_sync_gradients", S, [H]),
    ("ladle_layer_set_training", S, [H, c_int]),
    ("ladle_layer_init", S, [H, c_int, c_uint64]),
    ("ladle_linear_desc_init", None, [POINTER(ladle_linear_desc), c_int64, c_int64]),
    ("ladle_linear_create", S, [POINTER(ladle_linear_desc), c_int, i64_p, c_int, c_int, c_uint64,
                                HP]),
    ("ladle_conv_desc_init", None, [POINTER(ladle_conv_desc), c_int, c_int64, c_int64, c_int64]),
    ("ladle_conv_create", S, [POINTER(ladle_conv_desc), i64_p, c_int, c_int, c_uint64, HP]),
    ("ladle_pool_desc_init", None, [POINTER(ladle_pool_desc), c_int, c_int, c_int64]),
    ("ladle_pool_create", S, [POINTER(ladle_pool_desc), i64_p, c_int, c_int, HP]),
    ("ladle_global_avg_pool_create", S, [c_int, i64_p, c_int, c_int, HP]),
    ("ladle_batchnorm_desc_init", None, [POINTER(ladle_batchnorm_desc), c_int64]),
    ("ladle_batchnorm_create", S, [POINTER(ladle_batchnorm_desc), c_int, i64_p, c_int, c_int, HP]),
    ("ladle_batchnorm_running_stats", S, [H, HP, HP]),
    ("ladle_activation_create", S, [c_int, c_double, c_int, i64_p, c_int, c_int, HP]),
    ("ladle_softmax_create", S, [c_int, i64_p, c_int, c_int, c_int, c_int, HP]),
    ("ladle_dropout_create", S, [c_int, i64_p, c_double, c_int, c_int, c_uint64, HP]),
    ("ladle_dropout_set_step", S, [H, c_uint64]),
    ("ladle_reshape_create", S, [c_int, i64_p, c_int, i64_p, c_int, c_int, HP]),
    ("ladle_flatten_create", S, [c_int, i64_p, c_int, c_int, HP]),
    ("ladle_sequential_create", S, [c_int, POINTER(c_void_p), HP]),
    ("ladle_sequential_size", c_int, [H]),
    ("ladle_sequential_layer", H, [H, c_int]),
    ("ladle_loss_desc_init", None, [POINTER(ladle_loss_desc), c_int, c_int]),
    ("ladle_loss_create", S, [POINTER(ladle_loss_desc), c_int, i64_p, c_int, c_int, HP]),
    ("ladle_loss_forward", S, [H, H, H, H, H]),
    ("ladle_loss_backward", S, [H, H, H, H]),
    ("ladle_conv_transpose_desc_init", None,
     [POINTER(ladle_conv_transpose_desc), c_int, c_int64, c_int64, c_int64]),
    ("ladle_conv_transpose_create", S, [POINTER(ladle_conv_transpose_desc), i64_p, c_int, c_int,
                                        c_uint64, HP]),
    ("ladle_groupnorm_desc_init", None, [POINTER(ladle_groupnorm_desc), c_int64, c_int64]),
    ("ladle_groupnorm_create", S, [POINTER(ladle_groupnorm_desc), c_int, i64_p, c_int, c_int, HP]),
    ("ladle_adaptive_avg_pool_create", S, [c_int, i64_p, i64_p, c_int, c_int, HP]),
    ("ladle_adaptive_max_pool_create", S, [c_int, i64_p, i64_p, c_int, c_int, HP]),
    ("ladle_layernorm_desc_init", None, [POINTER(ladle_layernorm_desc), c_int]),
    ("ladle_layernorm_create", S, [POINTER(ladle_layernorm_desc), c_int, i64_p, c_int, c_int, HP]),
    ("ladle_rmsnorm_desc_init", None, [POINTER(ladle_rmsnorm_desc), c_int]),
    ("ladle_rmsnorm_create", S, [POINTER(ladle_rmsnorm_desc), c_int, i64_p, c_int, c_int, HP]),
    ("ladle_embedding_desc_init", None, [POINTER(ladle_embedding_desc), c_int64, c_int64]),
    ("ladle_embedding_create", S, [POINTER(ladle_embedding_desc), c_int, i64_p, c_int, c_int,
                                   c_uint64, HP]),
    ("ladle_interp_desc_init", None, [POINTER(ladle_interp_desc), c_int, c_int, c_int64]),
    ("ladle_interp_create", S, [POINTER(ladle_interp_desc), i64_p, c_int, c_int, HP]),
    ("ladle_attention_desc_init", None, [POINTER(ladle_attention_desc), c_int64, c_int64]),
    ("ladle_attention_create", S, [POINTER(ladle_attention_desc), c_int, i64_p, c_int, c_int,
                                   c_uint64, HP]),
    ("ladle_attention_memory", S, [H, POINTER(c_size_t), POINTER(c_size_t), POINTER(c_size_t)]),
    ("ladle_pos_embedding_create", S, [c_int, i64_p, c_int64, c_int, c_int, c_uint64, HP]),
    ("ladle_pos_embedding_set_offset", S, [H, c_int64]),
    ("ladle_residual_create", S, [HP, HP]),
    ("ladle_residual_body", H, [H]),
    ("ladle_add", S, [H, H, H]),
    ("ladle_concat", S, [c_int, POINTER(c_void_p), c_int, H]),
    ("ladle_concat_backward", S, [H, c_int, c_int, POINTER(c_void_p)]),
    # distributed layers
    ("ladle_dist_linear_create", S, [POINTER(ladle_linear_desc), POINTER(ladle_dist_partitions),
                                     i64_p, c_int, c_int, c_uint64, HP]),
    ("ladle_dist_conv_create", S, [POINTER(ladle_conv_desc), H, i64_p, c_int, c_int, c_uint64,
                                   HP]),
    ("ladle_dist_conv_grid_create", S, [POINTER(ladle_conv_desc), POINTER(ladle_dist_partitions),
                                        i64_p, c_int, c_int, c_uint64, HP]),
    ("ladle_dist_pool_create", S, [POINTER(ladle_pool_desc), H, i64_p, c_int, c_int, HP]),
    ("ladle_dist_batchnorm_create", S, [POINTER(ladle_batchnorm_desc), H, i64_p, c_int, c_int,
                                        HP]),
    ("ladle_dist_loss_create", S, [POINTER(ladle_loss_desc), H, i64_p, c_int, c_int, HP]),
    ("ladle_dist_flatten_create", S, [H, i64_p, H, c_int, c_int, c_uint, HP]),
    ("ladle_dist_conv_transpose_create", S, [POINTER(ladle_conv_transpose_desc), H, i64_p,
                                             c_int, c_int, c_uint64, HP]),
    ("ladle_dist_groupnorm_create", S, [POINTER(ladle_groupnorm_desc), H, i64_p, c_int, c_int,
                                        HP]),
    ("ladle_dist_adaptive_avg_pool_create", S, [H, i64_p, i64_p, c_int, c_int, c_uint, HP]),
    ("ladle_dist_adaptive_max_pool_create", S, [H, i64_p, i64_p, c_int, c_int, c_uint, HP]),
    ("ladle_dist_interp_create", S, [POINTER(ladle_interp_desc), H, i64_p, c_int, c_int, HP]),
    ("ladle_dist_global_avg_pool_create", S, [H, i64_p, H, c_int, c_int, c_uint, HP]),
    ("ladle_dist_tp_linear_create", S, [POINTER(ladle_linear_desc), H, i64_p, c_int, c_int,
                                        c_uint64, HP]),
    ("ladle_dist_tp_attention_create", S, [POINTER(ladle_attention_desc), H, i64_p, c_int, c_int,
                                           c_uint64, HP]),
    ("ladle_dist_vocab_embedding_create", S, [POINTER(ladle_embedding_desc),
                                              POINTER(ladle_dist_partitions), i64_p, c_int, c_int,
                                              c_uint64, HP]),
    ("ladle_dist_vocab_loss_create", S, [POINTER(ladle_loss_desc), H, i64_p, c_int, c_int, HP]),
    ("ladle_dist_replicate_create", S, [H, HP, c_uint, HP]),
    ("ladle_dist_replicate_create_on", S, [H, H, HP, c_uint, HP]),
    # optimizers
    ("ladle_optimizer_desc_init", None, [POINTER(ladle_optimizer_desc), c_int, c_double]),
    ("ladle_optimizer_create", S, [POINTER(ladle_optimizer_desc), HP]),
    ("ladle_optimizer_destroy", S, [HP]),
    ("ladle_optimizer_add_param", S, [H, H, H]),
    ("ladle_optimizer_add_op", S, [H, H]),
    ("ladle_optimizer_step", S, [H]),
    ("ladle_optimizer_zero_grad", S, [H]),
    ("ladle_optimizer_set_lr", S, [H, c_double]),
    ("ladle_optimizer_lr", c_double, [H]),
    ("ladle_optimizer_steps", c_int64, [H]),
    # networks
    ("ladle_network_create", S, [c_int, POINTER(c_void_p), H, c_size_t, HP]),
    ("ladle_network_destroy", S, [HP]),
    ("ladle_network_forward", S, [H, H, HP]),
    ("ladle_network_loss", S, [H, H, POINTER(c_double)]),
    ("ladle_network_backward", S, [H, c_int]),
    ("ladle_network_zero_grad", S, [H]),
    ("ladle_network_set_training", S, [H, c_int]),
    ("ladle_network_size", c_int, [H]),
    ("ladle_network_layer", H, [H, c_int]),
    ("ladle_network_loss_op", H, [H]),
    ("ladle_optimizer_add_network", S, [H, H]),
    # checkpoints
    ("ladle_checkpoint_save", S, [c_char_p, Comm, H, H, c_int, i64_p]),
    ("ladle_checkpoint_load", S, [c_char_p, Comm, H, H, c_int, i64_p, int_p]),
    ("ladle_checkpoint_read_meta", S, [c_char_p, Comm, c_int, i64_p, int_p]),
    ("ladle_checkpoint_check_path_f", S, [c_char_p, MPI_Fint]),
    # user-defined operators and caller-owned memory
    ("ladle_custom_desc_init", None, [POINTER(ladle_custom_desc)]),
    ("ladle_custom_create", S, [POINTER(ladle_custom_desc), HP]),
    ("ladle_custom_fail", c_int, [c_char_p]),
    ("ladle_op_bind_param", S, [H, c_int, c_void_p, c_void_p]),
    ("ladle_ctx_bytes", c_size_t, [H]),
    ("ladle_ctx_create_in", S, [H, c_void_p, c_size_t, HP]),
    ("ladle_op_set_workspace", S, [H, c_void_p, c_size_t]),
]


class _Missing:
    """Stands for a function this libladle lacks: calling it says which."""

    def __init__(self, name, path):
        self.name, self.path = name, path

    def __call__(self, *args):
        raise NotImplementedError("ladle: %s is not in %s (a libladle too old for this package?)"
                                  % (self.name, self.path))


def load(path=None):
    """Load libladle (path, or find_library()) and set every prototype.
    Returns the ctypes library object; functions the library lacks become
    _Missing stand-ins listed in lib._ladle_missing."""
    path = path or find_library()
    try:
        lib = ctypes.CDLL(path)
    except OSError as e:
        raise ImportError("ladle: cannot load %s: %s" % (path, e)) from e
    missing = []
    for name, restype, argtypes in PROTOTYPES:
        try:
            fn = getattr(lib, name)
        except AttributeError:
            missing.append(name)
            setattr(lib, name, _Missing(name, path))
            continue
        fn.restype = restype
        fn.argtypes = argtypes
    lib._ladle_path = path
    lib._ladle_missing = missing
    return lib


def i64_array(values):
    values = list(values)
    return (c_int64 * max(len(values), 1))(*values)


def int_array(values):
    values = list(values)
    return (c_int * max(len(values), 1))(*values)
