/*
 * ladle/layers.h - sequential layers with hand-written backward passes.
 *
 * A layer is a ladle_op with parameters. Its calls are:
 *
 *   ladle_layer_forward(op, ctx, x, y)        y = f(x); saves into ctx what
 *                                             the backward needs
 *   ladle_layer_backward(op, ctx, dy, dx)     dx = (df/dx)^T dy
 *   ladle_layer_backward_weight(op, ctx, dy)  dW += (df/dW)^T dy, the same
 *                                             for every parameter
 *
 * backward and backward_weight are separate calls, so a pipeline can defer
 * the weight gradient (zero-bubble schedules). Either may come first, and
 * each may be skipped; both take the same dy, unchanged in between.
 *
 * A ladle_ctx belongs to one op and holds one microbatch's saved state:
 * references to that forward call's x and y, plus anything the op keeps
 * itself (max-pool winners, batch-norm statistics, the dropout step). Create
 * one ctx per microbatch in flight. The caller keeps the forward's x and y
 * alive and unchanged until the backward calls of that ctx are done. Ops
 * keep no per-call state, so any number of ctxs may be alive at once.
 *
 * Layers work on tensors in NC... layout (batch, channels, spatial), in f32
 * or f64. The shape given at creation fixes every dimension. The batch, the
 * first dimension, may be smaller in any call, which serves the short last
 * batch of an epoch. Creation plans and allocates; the calls never allocate.
 * Every create takes, right after the dtype, the device the layer lives on:
 * its parameters, gradients and planned buffers are allocated there, and
 * every call takes tensors of that device only (LADLE_ERR_DEVICE, naming
 * both devices). Creating a layer on a device ladle was built without
 * returns LADLE_ERR_DEVICE.
 * ladle_op_forward(op, x, y) runs a layer in inference form without a ctx.
 * For layers that are linear in their input (linear and convolution without
 * bias, average pooling, reshape), ladle_op_adjoint(op, dy, dx) is the
 * backward, so ladle_adjoint_test applies to them.
 *
 * Sequential layers are local: none of these calls communicates, and every
 * create below is local. The calls shared with the distributed layers
 * (ladle_layer_*, ladle_ctx_*, ladle_op_*, ladle_loss_*) are local on a
 * sequential layer and, where their comment says so, collective over a
 * distributed layer's communicator (all ranks of its partitions).
 */
#ifndef LADLE_LAYERS_H
#define LADLE_LAYERS_H

#include "core.h"
#include "op.h"
#include "tensor.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct ladle_ctx ladle_ctx;

/* The threads the CPU kernels (OpenBLAS's GEMM) may use in this process.
 * Several ranks on one node should share the cores: with one rank per core,
 * 1. This is process-wide (it is OpenBLAS's setting); the default is
 * OpenBLAS's own (OPENBLAS_NUM_THREADS, else every core). Local; not for
 * calling while another thread runs ladle kernels. Returns LADLE_ERR_ARG
 * for n < 1. */
LADLE_API ladle_status ladle_set_num_threads(int n);
LADLE_API int ladle_get_num_threads(void);

/* A context for one microbatch of op; its buffers are sized for the op's
 * largest batch. Local. Returns LADLE_ERR_NULL, LADLE_ERR_ARG (op is no
 * layer), LADLE_ERR_ALLOC. */
LADLE_API ladle_status ladle_ctx_create(const ladle_op *op, ladle_ctx **ctx);
/* Free it and set *ctx to NULL; accepts NULL. Local. */
LADLE_API ladle_status ladle_ctx_destroy(ladle_ctx **ctx);

/* The three calls (see above). Collective over a distributed layer's
 * communicator (all ranks of its partitions), local for a sequential layer; a
 * container's calls are collective where one of its layers' are. ctx may be
 * NULL for forward when no backward follows. dx may be NULL in backward when
 * the input gradient is not needed (the first layer). backward_weight
 * accumulates into the gradients; after a backward of the same ctx it takes
 * the same dy, unchanged (layers may reuse the backward's work for it: the
 * attention its dQKV, the tensor-parallel layers the gathered dy).
 * Returns LADLE_ERR_NULL, LADLE_ERR_SHAPE, LADLE_ERR_DTYPE, LADLE_ERR_ARG
 * (a ctx of another op, or overlapping tensors where the layer does not work
 * in place), LADLE_ERR_STATE (backward before forward). */
LADLE_API ladle_status ladle_layer_forward(ladle_op *op, ladle_ctx *ctx,
                                           const ladle_tensor *x, ladle_tensor *y);
LADLE_API ladle_status ladle_layer_backward(ladle_op *op, ladle_ctx *ctx,
                                            const ladle_tensor *dy, ladle_tensor *dx);
LADLE_API ladle_status ladle_layer_backward_weight(ladle_op *op, ladle_ctx *ctx,
                                                   const ladle_tensor *dy);

/* Parameters: the number, and parameter i with its gradient and name
 * ("weight", "bias"). Borrowed; they live as long as the op. Gradients
 * accumulate until ladle_op_zero_grad. Local. */
LADLE_API int ladle_op_num_params(const ladle_op *op);
LADLE_API ladle_tensor *ladle_op_param(const ladle_op *op, int i);
LADLE_API ladle_tensor *ladle_op_grad(const ladle_op *op, int i);
LADLE_API const char *ladle_op_param_name(const ladle_op *op, int i);
LADLE_API ladle_status ladle_op_zero_grad(ladle_op *op);

/* Where parameter i's local shard sits in the global parameter: its ndim,
 * global shape and offset, and whether this rank owns the shard (the one
 * rank that writes it to a checkpoint; other ranks may hold copies). Every
 * rank of a distributed layer reports the same parameters and global
 * shapes; a rank without a shard holds a zero-volume tensor. A sequential
 * layer's parameters are whole and owned. Any output pointer may be NULL.
 * Local. Returns LADLE_ERR_NULL, LADLE_ERR_ARG. */
LADLE_API ladle_status ladle_op_param_shard(const ladle_op *op, int i, int *ndim,
                                            int64_t global_shape[], int64_t offset[],
                                            int *owner);

/* Sum the gradients of replicated parameters (a distributed layer's weights
 * that several ranks hold copies of, such as a spatially partitioned
 * convolution's) over their copies. backward_weight only accumulates each
 * rank's own contribution, so microbatches accumulate without a message;
 * call this once before reading the gradients or stepping the optimizer (a
 * ladle_network does it for its layers). Collective over the layer's ranks;
 * nothing to do for sequential layers. Returns LADLE_ERR_NULL,
 * LADLE_ERR_ARG, LADLE_ERR_MPI. */
LADLE_API ladle_status ladle_layer_sync_gradients(ladle_op *op);

/* training nonzero: training mode (the default); 0: evaluation. Batch norm
 * uses batch statistics and updates its running ones only in training;
 * dropout is the identity in evaluation. Local; every rank of a distributed
 * layer should set the same mode. Returns LADLE_ERR_NULL, LADLE_ERR_ARG
 * (not a layer). */
LADLE_API ladle_status ladle_layer_set_training(ladle_op *op, int training);

/* ---- initialisation ---------------------------------------------------- */

/* How a weight is drawn. Values come from a counter-based generator keyed by
 * (seed, the parameter's global element index), and the bounds use the
 * global fan-in and fan-out, so a layer sharded over ranks starts from
 * exactly the weights of its sequential twin. */
typedef enum ladle_init {
    /* PyTorch's default for linear and conv weights: kaiming_uniform with
     * a = sqrt(5), i.e. U(-1/sqrt(fan_in), 1/sqrt(fan_in)); biases the same */
    LADLE_INIT_DEFAULT = 0,
    LADLE_INIT_KAIMING_UNIFORM = 1, /* U(-b, b), b = sqrt(6 / fan_in) (ReLU gain) */
    LADLE_INIT_KAIMING_NORMAL = 2,  /* N(0, 2 / fan_in) */
    LADLE_INIT_XAVIER_UNIFORM = 3,  /* U(-b, b), b = sqrt(6 / (fan_in + fan_out)) */
    LADLE_INIT_XAVIER_NORMAL = 4,   /* N(0, 2 / (fan_in + fan_out)) */
    LADLE_INIT_ZEROS = 5
} ladle_init;

/* Re-draw the weights (and biases, which always take the default rule) of a
 * linear or convolution layer (sequential or distributed: every rank
 * draws its own shard of the same global weights). Local. Returns
 * LADLE_ERR_NULL, LADLE_ERR_ARG (an unknown init, naming the value; a
 * layer without weights). */
LADLE_API ladle_status ladle_layer_init(ladle_op *op, ladle_init init, uint64_t seed);

/* ---- the layers -------------------------------------------------------- */

/* Linear: y = x W^T + b over any leading dimensions, as PyTorch's
 * nn.Linear(in_features, out_features, bias). W is out_features x
 * in_features. One descriptor makes the sequential layer and its
 * distributed twins (ladle_dist_linear_create, ladle_dist_tp_linear_create). */
typedef struct ladle_linear_desc {
    size_t size; /* sizeof(ladle_linear_desc), set by ladle_linear_desc_init (checked) */
    int64_t in_features;  /* >= 1 */
    int64_t out_features; /* >= 1 */
    int bias;             /* nonzero (the default): with a bias b */
    unsigned flags;       /* the distributed layers': LADLE_CHECKED, LADLE_TP_ROW; 0 */
} ladle_linear_desc;

/* in_features, out_features, with a bias, no flags. Accepts NULL. Local. */
LADLE_API void ladle_linear_desc_init(ladle_linear_desc *d, int64_t in_features,
                                      int64_t out_features);
/* x has ndim >= 1 dimensions and its last extent is d->in_features; y has
 * d->out_features there. flags may hold the distributed layers' bits, which
 * change nothing on one rank. Saves: x. Local. Returns LADLE_ERR_NULL,
 * LADLE_ERR_ARG (the descriptor's size, an unknown flag), LADLE_ERR_SHAPE
 * (x's last extent is not in_features, features below 1 or above 2^31),
 * LADLE_ERR_DTYPE, LADLE_ERR_DEVICE, LADLE_ERR_ALLOC. */
LADLE_API ladle_status ladle_linear_create(const ladle_linear_desc *d, int ndim,
                                           const int64_t x_shape[], ladle_dtype dtype,
                                           ladle_device device, uint64_t seed,
                                           ladle_op **op);

/* How a convolution pads (PyTorch's padding_mode): with zeros, or with the
 * input itself read back from the edge (reflect: x[-i] = x[i], without
 * repeating the edge; replicate: x[-i] = x[0]; circular: x[-i] = x[S - i]).
 * Every dimension is padded in turn, so the corners are the composition. */
typedef enum ladle_padding_mode {
    LADLE_PAD_ZEROS = 0,
    LADLE_PAD_REFLECT = 1,
    LADLE_PAD_REPLICATE = 2,
    LADLE_PAD_CIRCULAR = 3
} ladle_padding_mode;

/* Convolution over 1 to 3 spatial dimensions, as the frameworks define it
 * (cross-correlation; padding on both sides, zeros unless padding_mode
 * says otherwise). x is N x C_in x S...,
 * W is C_out x C_in/groups x K..., y is N x C_out x O... with
 * O = floor((S + 2p - d(k - 1) - 1) / s) + 1. Saves: x. */
typedef struct ladle_conv_desc {
    size_t size; /* sizeof(ladle_conv_desc), set by ladle_conv_desc_init (checked by the calls that take it) */
    int nd;               /* spatial dimensions: 1, 2 or 3 */
    int64_t in_channels;
    int64_t out_channels;
    int64_t groups;       /* both channel counts divisible by it */
    int64_t kernel[3];
    int64_t stride[3];
    int64_t padding[3];
    int64_t dilation[3];
    int bias; /* nonzero: with a bias per output channel */
    ladle_padding_mode padding_mode; /* LADLE_PAD_ZEROS by default */
    int same; /* nonzero: PyTorch's padding='same' (stride 1, padding 0); 0 by default */
    unsigned flags; /* the distributed layer's: LADLE_CHECKED, LADLE_OVERLAP_HALO; 0 */
} ladle_conv_desc;

/* nd spatial dims, kernel k in each, stride 1, padding 0, dilation 1,
 * groups 1, with bias, zero padding, no flags. Local. */
LADLE_API void ladle_conv_desc_init(ladle_conv_desc *d, int nd, int64_t in_channels,
                                    int64_t out_channels, int64_t kernel);
/* A convolution over x of x_shape (N x C x spatial). same nonzero is
 * PyTorch's padding='same' (stride 1 only; the descriptor's padding must be
 * 0): per dimension the total padding is d(k - 1), left = total / 2
 * (rounded down) and right = total - left, so an even kernel pads one more
 * on the right. Otherwise the descriptor's padding p goes on both sides.
 * padding_mode applies to whichever padding results; reflect needs every
 * padding below the input extent, circular at most the extent. A layer with
 * another padding mode or uneven padding pads x into a buffer (in each ctx,
 * which therefore holds a padded copy of x) and convolves that without
 * padding; the backward folds the padding's gradient back onto the cells it
 * was read from (the adjoint of the padding). flags may hold the bits of
 * ladle_dist_conv_create, which change nothing on one rank. Local.
 * Returns LADLE_ERR_NULL, LADLE_ERR_DTYPE, LADLE_ERR_ARG (bad channel
 * counts or groups, a kernel, stride or dilation below 1 or a negative
 * padding, and values so large that the output length would overflow:
 * the padded input, the dilated kernel and the stride may not pass 2^57;
 * a weight of more than 2^57 elements), LADLE_ERR_SHAPE (x's channels, a
 * kernel larger than the padded input, an output too large, matrices
 * above 2^31 rows or columns), LADLE_ERR_ALLOC; LADLE_ERR_ARG also for an
 * unknown padding mode or flag, same with a stride above 1 or a nonzero
 * padding, and a padding the mode cannot take (naming the dimension, the
 * padding and the extent). */
LADLE_API ladle_status ladle_conv_create(const ladle_conv_desc *d, const int64_t x_shape[],
                                         ladle_dtype dtype, ladle_device device, uint64_t seed,
                                         ladle_op **op);

/* Transposed convolution over 1 to 3 spatial dimensions, as PyTorch's
 * ConvTranspose1d/2d/3d: the convolution's adjoint as a layer. x is
 * N x C_in x S..., W is C_in x C_out/groups x K..., y is N x C_out x O...
 * with O = (S - 1) s - 2p + d (K - 1) + output_padding + 1. Its forward is
 * the backward (input gradient) of the convolution from C_out to C_in
 * channels of the same kernel, stride, padding, dilation, groups and
 * weight, taken from y's extents O to x's S; its backward is that
 * convolution's forward, and its weight gradient that convolution's with
 * the roles of x and dy exchanged. The bias (C_out) is added per output
 * channel. Zeroed fields take defaults: groups, stride and dilation 0
 * mean 1. Saves: x. */
typedef struct ladle_conv_transpose_desc {
    size_t size; /* sizeof(ladle_conv_transpose_desc), set by its _init (checked) */
    int nd;      /* spatial dimensions: 1, 2 or 3 */
    int64_t in_channels;
    int64_t out_channels;
    int64_t groups; /* both channel counts divisible by it; 0 means 1 */
    int64_t kernel[3];
    int64_t stride[3];         /* 0 means 1 */
    int64_t padding[3];        /* removed from both ends of the full output */
    int64_t output_padding[3]; /* added at the far end; below stride or dilation */
    int64_t dilation[3];       /* 0 means 1 */
    int bias;                  /* nonzero: with a bias per output channel */
    ladle_padding_mode padding_mode; /* LADLE_PAD_ZEROS only (as PyTorch) */
    unsigned flags; /* the distributed layer's: LADLE_CHECKED, LADLE_OVERLAP_HALO; 0 */
} ladle_conv_transpose_desc;

/* nd spatial dims, kernel k in each, stride 1, padding 0, output padding
 * 0, dilation 1, groups 1, with bias, zero padding, no flags. Accepts NULL.
 * Local. */
LADLE_API void ladle_conv_transpose_desc_init(ladle_conv_transpose_desc *d, int nd,
                                              int64_t in_channels, int64_t out_channels,
                                              int64_t kernel);
/* A transposed convolution over x of x_shape (N x C_in x S...). flags may
 * hold the bits of ladle_dist_conv_transpose_create, which change nothing
 * on one rank. Local. Returns LADLE_ERR_NULL, LADLE_ERR_DTYPE,
 * LADLE_ERR_ARG (the descriptor's size,
 * bad channel counts or groups, a kernel, stride or dilation below 1, a
 * negative padding or output padding, an output padding not below the
 * stride or the dilation, as PyTorch; an unknown flag or padding mode, and
 * sizes whose output length overflows), LADLE_ERR_SHAPE (x's channels, an
 * output length below 1, matrices above 2^31 rows or columns),
 * LADLE_ERR_UNSUPPORTED (a padding mode other than zeros), LADLE_ERR_DEVICE,
 * LADLE_ERR_ALLOC. An output padding of at least the stride (below the
 * dilation) zero-extends x at the far ends into a planned buffer first. */
LADLE_API ladle_status ladle_conv_transpose_create(const ladle_conv_transpose_desc *d,
                                                   const int64_t x_shape[], ladle_dtype dtype,
                                                   ladle_device device, uint64_t seed,
                                                   ladle_op **op);

/* Max and average pooling over 1 to 3 spatial dimensions. stride 0 means
 * the kernel size. Max pooling pads with -inf, supports dilation and
 * ceil_mode, and saves the winning index of each output (the first maximum in
 * the window, as the frameworks). Average pooling supports ceil_mode and
 * count_include_pad (whether padded cells count in the divisor; windows that
 * start in the right padding of ceil mode never count it). */
typedef enum ladle_pool_kind { LADLE_POOL_MAX = 0, LADLE_POOL_AVG = 1 } ladle_pool_kind;

typedef struct ladle_pool_desc {
    size_t size; /* sizeof(ladle_pool_desc), set by ladle_pool_desc_init (checked by the calls that take it) */
    ladle_pool_kind kind;
    int nd;
    int64_t kernel[3];
    int64_t stride[3];
    int64_t padding[3];
    int64_t dilation[3];   /* max pooling only */
    int ceil_mode;         /* nonzero: output lengths round up */
    int count_include_pad; /* average pooling only; nonzero (the default): the
                              padding counts in the divisor */
    unsigned flags; /* the distributed layer's: LADLE_CHECKED, LADLE_OVERLAP_HALO; 0 */
} ladle_pool_desc;

/* kernel k in each of nd dims, stride k, padding 0, dilation 1, no ceil
 * mode, count_include_pad 1. Local. */
LADLE_API void ladle_pool_desc_init(ladle_pool_desc *d, ladle_pool_kind kind, int nd,
                                    int64_t kernel);
/* Local. Returns LADLE_ERR_NULL, LADLE_ERR_DTYPE, LADLE_ERR_ARG
 * (an unknown kind, a window value out of range or so large that the
 * output length would overflow, padding above half the kernel, dilation in
 * average pooling), LADLE_ERR_SHAPE (a window larger than the padded
 * input, an output too large), LADLE_ERR_ALLOC. */
LADLE_API ladle_status ladle_pool_create(const ladle_pool_desc *d, const int64_t x_shape[],
                                         ladle_dtype dtype, ladle_device device, ladle_op **op);

/* Global average pooling: N x C x S... -> N x C (ndim - 2 spatial dims).
 * Local. Returns the codes of ladle_pool_create. */
LADLE_API ladle_status ladle_global_avg_pool_create(int ndim, const int64_t x_shape[],
                                                    ladle_dtype dtype, ladle_device device,
                                                    ladle_op **op);

/* Adaptive average pooling, as PyTorch's AdaptiveAvgPool1d/2d/3d: x of
 * ndim 3 to 5 (N x C and 1 to 3 spatial dimensions) to N x C x
 * out_size[0..ndim-3]. Output o of a dimension of input extent L and
 * output extent O averages the inputs [floor(o L / O), ceil((o + 1) L / O)):
 * the windows overlap where O does not divide L, and O may exceed L. Linear
 * in x: its backward is the adjoint (each dy spread evenly over its
 * window), so ladle_adjoint_test applies. Devices whose backend has no
 * adaptive pooling kernels (CUDA) refuse it with LADLE_ERR_DEVICE. Local.
 * Returns LADLE_ERR_NULL, LADLE_ERR_DTYPE, LADLE_ERR_SHAPE (ndim outside
 * 3..5, an empty input, an output size below 1, an extent above 2^31),
 * LADLE_ERR_DEVICE, LADLE_ERR_ALLOC. */
LADLE_API ladle_status ladle_adaptive_avg_pool_create(int ndim, const int64_t x_shape[],
                                                      const int64_t out_size[],
                                                      ladle_dtype dtype, ladle_device device,
                                                      ladle_op **op);

/* Adaptive max pooling, as PyTorch's AdaptiveMaxPool1d/2d/3d: the shapes
 * and windows of ladle_adaptive_avg_pool_create, y[o] the largest x of o's
 * window. Of equal values the first in row-major order of the window wins
 * (as PyTorch); a NaN wins over any number, so y is NaN where the window
 * holds one (the first NaN is the winner). The forward saves each output's
 * winner in the ctx (an int64 per element of y); the backward overwrites
 * dx with zeros plus, at each winner, the dy of every output it won. Not
 * linear (use ladle_layer_backward; ladle_gradient_test applies away from
 * ties). Devices whose backend has no adaptive max kernels refuse it with
 * LADLE_ERR_DEVICE. Local. Returns the codes of
 * ladle_adaptive_avg_pool_create. */
LADLE_API ladle_status ladle_adaptive_max_pool_create(int ndim, const int64_t x_shape[],
                                                      const int64_t out_size[],
                                                      ladle_dtype dtype,
                                                      ladle_device device, ladle_op **op);

/*
 * Interpolation (upsampling) of N x C x S... over nd = 1 to 3 spatial
 * dimensions, as PyTorch's interpolate: each output index o of a dimension
 * with input extent in and output extent out reads
 *
 *   nearest   i = floor(o in / out) (exact integer arithmetic; PyTorch's
 *             'nearest', not 'nearest-exact')
 *   linear    the source coordinate x = o (in - 1) / (out - 1) (0 when out
 *             is 1) with align_corners, else max((o + 1/2) in / out - 1/2,
 *             0); i0 = floor(x), i1 = min(i0 + 1, in - 1), and the weights
 *             1 - (x - i0) and x - i0 (bilinear, trilinear: the products
 *             of the dimensions' weights)
 *
 * The output extents are out_size[d] when given (nonzero), else in times
 * the integer scale[d]. The layer is linear in x; its backward is the
 * adjoint (each dy spread back onto the taps it was read from, times their
 * weights). Devices whose backend has no interpolation kernels (CUDA)
 * refuse it with LADLE_ERR_DEVICE.
 */
typedef enum ladle_interp_mode {
    LADLE_INTERP_NEAREST = 0,
    LADLE_INTERP_LINEAR = 1 /* linear, bilinear, trilinear by nd */
} ladle_interp_mode;

typedef struct ladle_interp_desc {
    size_t size; /* sizeof(ladle_interp_desc), set by ladle_interp_desc_init */
    ladle_interp_mode mode;
    int nd;              /* spatial dimensions, 1 to 3 */
    int64_t out_size[3]; /* output extents; 0: in x scale */
    int64_t scale[3];    /* integer scale factors >= 1, used where out_size is 0 */
    int align_corners;   /* linear only: 0 or 1 */
    unsigned flags;      /* the distributed layer's: LADLE_CHECKED; 0 */
} ladle_interp_desc;

/* mode, nd dims, scale factor `scale` in each, no explicit sizes,
 * align_corners 0. Local. */
LADLE_API void ladle_interp_desc_init(ladle_interp_desc *d, ladle_interp_mode mode, int nd,
                                      int64_t scale);
/* Local. Returns LADLE_ERR_NULL, LADLE_ERR_DTYPE, LADLE_ERR_ARG (an unknown
 * mode, nd outside 1..3, a scale below 1, a negative size, align_corners
 * other than 0 or 1 or given with nearest, a bad descriptor size),
 * LADLE_ERR_SHAPE (x of other than 2 + nd dimensions, an empty input, an
 * extent or output above 2^31 per dimension or too large in all),
 * LADLE_ERR_DEVICE (a device without the kernels), LADLE_ERR_ALLOC. */
LADLE_API ladle_status ladle_interp_create(const ladle_interp_desc *d, const int64_t x_shape[],
                                           ladle_dtype dtype, ladle_device device,
                                           ladle_op **op);

/* Batch normalisation over every dimension but the channels (dimension 1):
 * 1d takes N x C or N x C x L, 2d N x C x H x W, 3d N x C x D x H x W.
 * Training: normalise with the batch mean and biased variance, and update
 * running_mean and running_var (unbiased) with momentum m:
 * r = (1 - m) r + m batch_stat. momentum < 0 means a cumulative average.
 * Evaluation: normalise with the running statistics (or with batch
 * statistics if they are not tracked). Parameters: gamma ("weight") and beta
 * ("bias") when affine. Saves: x (borrowed), mean and 1/std per channel,
 * and the sums of dy and dy x-hat once backward or backward_weight has
 * computed them (the other reuses them: both must get the same dy). */
/* Which ranks a distributed batch norm's statistics are reduced over
 * (among the ranks holding the same channels, the peers); a sequential
 * batch norm is one rank and reads none of it. */
typedef enum ladle_bn_sync {
    LADLE_BN_SYNC_GLOBAL = 0, /* every peer: the statistics of the whole batch */
    LADLE_BN_SYNC_LOCAL = 1,  /* each rank alone, on its own block */
    LADLE_BN_SYNC_GROUP = 2   /* consecutive groups of group_size peers */
} ladle_bn_sync;

typedef struct ladle_batchnorm_desc {
    size_t size; /* sizeof(ladle_batchnorm_desc), set by ladle_batchnorm_desc_init (checked by the calls that take it) */
    int64_t num_features;
    double eps;      /* default 1e-5 */
    double momentum; /* default 0.1 */
    int affine;      /* nonzero (the default): learn gamma and beta */
    int track_running_stats; /* nonzero (the default): keep running statistics */
    ladle_bn_sync sync;      /* distributed: the statistics' group; default GLOBAL */
    int group_size; /* the group's peers for LADLE_BN_SYNC_GROUP; default 0 (not grouped) */
    unsigned flags; /* distributed flags (LADLE_CHECKED); default 0 */
} ladle_batchnorm_desc;

/* The defaults above for num_features channels. Local. */
LADLE_API void ladle_batchnorm_desc_init(ladle_batchnorm_desc *d, int64_t num_features);
/* One rank: sync and group_size change nothing (they are checked only for
 * a known sync value), and flags may hold the bits the distributed batch
 * norm knows (LADLE_CHECKED). Local. Returns LADLE_ERR_NULL, LADLE_ERR_ARG
 * (a bad descriptor size, eps or momentum, an unknown sync value or flag
 * bit), LADLE_ERR_SHAPE, LADLE_ERR_DTYPE, LADLE_ERR_DEVICE, LADLE_ERR_ALLOC. */
LADLE_API ladle_status ladle_batchnorm_create(const ladle_batchnorm_desc *d, int ndim,
                                              const int64_t x_shape[], ladle_dtype dtype,
                                              ladle_device device, ladle_op **op);
/* The running statistics of a batch norm, sequential or distributed
 * (ladle_dist_batchnorm_create): this rank's channels, borrowed, living as
 * long as op, on op's device. A rank of a distributed batch norm that holds
 * no channels gets NULL. Without track_running_stats the tensors stay at
 * their initial 0 (mean) and 1 (var). Either output pointer may be NULL; the
 * outputs are set only on success. Local. Returns LADLE_ERR_NULL,
 * LADLE_ERR_ARG (op is not a batch norm). */
LADLE_API ladle_status ladle_batchnorm_running_stats(const ladle_op *op, ladle_tensor **mean,
                                                     ladle_tensor **var);

/*
 * Group normalisation (PyTorch's GroupNorm): x is n x c x spatial (0 to 3
 * spatial dimensions, ndim 2 to 5), the c channels are cut into
 * d->num_groups groups of cg = c / groups consecutive channels, and each
 * sample's group (cg channels, all their positions: M values) is
 * normalised on its own:
 *
 *   mean = sum x / M,  var = sum (x - mean)^2 / M (biased),
 *   y = (x - mean) / sqrt(var + eps) gamma[ch] + beta[ch]
 *
 * with gamma ("weight", ones) and beta ("bias", zeros) per channel when
 * affine. No running statistics: training and evaluation alike. groups = 1
 * normalises each sample over all its values (a layer norm with a per
 * channel affine), groups = c each channel alone (an instance norm). The
 * statistics are two passes, summed per channel on the device and folded
 * into groups in double on the host. Saves: x (borrowed), the mean and
 * 1/std per group, and the sums of dy and dy (x - mean) per sample and
 * channel once backward or backward_weight has computed them (the other
 * reuses them: both must get the same dy). Backward, with g = gamma dy and
 * group sums S1 = sum g, S2 = sum g (x - mean):
 *   dx = (g - S1 / M) / std - (x - mean) S2 / (M std^3)
 *   dgamma += sum dy x-hat,  dbeta += sum dy (over samples and positions).
 * The batch (dimension 0) may be smaller in a call. Runs on every device
 * (its kernels are batch norm's).
 */
typedef struct ladle_groupnorm_desc {
    size_t size; /* sizeof(ladle_groupnorm_desc), set by ladle_groupnorm_desc_init (checked by the calls that take it) */
    int64_t num_groups;   /* G >= 1, dividing num_channels */
    int64_t num_channels; /* C, x's extent in dimension 1 */
    double eps;           /* default 1e-5; finite and > 0 */
    int affine;           /* nonzero (the default): learn gamma and beta */
    unsigned flags;       /* distributed flags (LADLE_CHECKED); default 0 */
} ladle_groupnorm_desc;

/* num_groups groups of num_channels channels, eps 1e-5, affine, no flags.
 * Local. */
LADLE_API void ladle_groupnorm_desc_init(ladle_groupnorm_desc *d, int64_t num_groups,
                                         int64_t num_channels);
/* Local. Returns LADLE_ERR_NULL (d, x_shape or op NULL), LADLE_ERR_ARG (a
 * bad descriptor size; num_groups below 1 or not dividing num_channels;
 * eps not finite and > 0; an unknown flag bit), LADLE_ERR_SHAPE (ndim
 * outside 2 .. 5, x's channels not num_channels, a negative extent, an
 * empty spatial extent), LADLE_ERR_DTYPE (not f32 or f64),
 * LADLE_ERR_DEVICE, LADLE_ERR_ALLOC. The layer calls return what
 * ladle_layer_* return for any layer. */
LADLE_API ladle_status ladle_groupnorm_create(const ladle_groupnorm_desc *d, int ndim,
                                              const int64_t x_shape[], ladle_dtype dtype,
                                              ladle_device device, ladle_op **op);

/*
 * Layer normalisation over the last k dimensions of x (PyTorch's
 * normalized_shape: the trailing x_shape[ndim - k ..]), L values per row
 * (their product), every leading index a row of its own:
 *
 *   mean = sum x / L,  var = sum (x - mean)^2 / L (biased),
 *   xhat = (x - mean) / sqrt(var + eps),  y = xhat w + b
 *
 * with w ("weight", ones) and b ("bias", zeros) of the normalized shape
 * when elementwise_affine (b only when bias too). The statistics are two
 * passes summed in double, so f32 keeps them to double accuracy even for
 * data far from zero. Saves: x (borrowed), mean and 1/std per row (in the
 * ctx, allocated with it). Backward, with g = dy w and row means <.>:
 *   dx = (g - <g> - xhat <g xhat>) / sqrt(var + eps)
 *   dw += sum over rows of dy xhat,  db += sum over rows of dy.
 * The batch (dimension 0) may be smaller in a call, unless k = ndim (then
 * the whole tensor is one row and its shape is fixed). Devices whose
 * backend has no normalisation kernels (CUDA) refuse it with
 * LADLE_ERR_DEVICE.
 */
typedef struct ladle_layernorm_desc {
    size_t size;            /* sizeof(ladle_layernorm_desc), set by ladle_layernorm_desc_init */
    int normalized_ndim;    /* k: the trailing dimensions normalised together, 1 .. ndim */
    double eps;             /* default 1e-5; finite and > 0 */
    int elementwise_affine; /* nonzero (the default): learn w (and b) */
    int bias;               /* nonzero (the default): with elementwise_affine, learn b */
} ladle_layernorm_desc;

/* k trailing dimensions, eps 1e-5, affine with bias. Local. */
LADLE_API void ladle_layernorm_desc_init(ladle_layernorm_desc *d, int normalized_ndim);
/* Local. Returns LADLE_ERR_NULL (d, x_shape or op NULL), LADLE_ERR_ARG (a
 * bad descriptor size; eps not finite and > 0, NaN included; k outside
 * 1 .. ndim), LADLE_ERR_SHAPE (ndim outside 1 .. LADLE_MAX_NDIM, a
 * negative extent, a zero one in the normalized shape), LADLE_ERR_DTYPE
 * (not f32 or f64), LADLE_ERR_DEVICE (a device ladle was built without, or
 * whose backend has no normalisation kernels), LADLE_ERR_ALLOC. The layer
 * calls return what ladle_layer_* return for any layer. */
LADLE_API ladle_status ladle_layernorm_create(const ladle_layernorm_desc *d, int ndim,
                                              const int64_t x_shape[], ladle_dtype dtype,
                                              ladle_device device, ladle_op **op);

/*
 * RMS normalisation over the last k dimensions (PyTorch's RMSNorm), L values
 * per row:
 *
 *   r = 1 / sqrt(sum x^2 / L + eps),  xhat = x r,  y = xhat w
 *
 * with w ("weight", ones, of the normalized shape) when elementwise_affine.
 * Saves: x (borrowed) and r per row. Backward, with g = dy w:
 *   dx = r (g - xhat <g xhat>),  dw += sum over rows of dy xhat.
 * Batches, devices and the refusal on CUDA as for layer norm.
 */
typedef struct ladle_rmsnorm_desc {
    size_t size;            /* sizeof(ladle_rmsnorm_desc), set by ladle_rmsnorm_desc_init */
    int normalized_ndim;    /* k, 1 .. ndim */
    double eps;             /* default 1e-6 (PyTorch's default is the dtype's epsilon:
                               1.19e-7 for f32, 2.22e-16 for f64; set it to match) */
    int elementwise_affine; /* nonzero (the default): learn w */
} ladle_rmsnorm_desc;

/* k trailing dimensions, eps 1e-6, affine. Local. */
LADLE_API void ladle_rmsnorm_desc_init(ladle_rmsnorm_desc *d, int normalized_ndim);
/* Local. Returns the codes of ladle_layernorm_create. */
LADLE_API ladle_status ladle_rmsnorm_create(const ladle_rmsnorm_desc *d, int ndim,
                                            const int64_t x_shape[], ladle_dtype dtype,
                                            ladle_device device, ladle_op **op);

/*
 * Token embedding: x holds token ids (an LADLE_I64 tensor of ids_shape, any
 * ndim from 1, dimension 0 the batch), y = w[x] of shape ids_shape + [E]:
 * y[..., :] = w[id, :] with the weight w ("weight") d->num_embeddings x
 * d->embedding_dim (V x E), drawn from normal(0, 1) as PyTorch's nn.Embedding
 * (a counter-based generator keyed by seed, the same values on every
 * device). The forward refuses an id outside 0 .. V-1 with LADLE_ERR_ARG,
 * naming the id and its index, before it reads anything. The layer has no
 * gradient with respect to its integer input: ladle_layer_backward takes
 * dx NULL (LADLE_ERR_ARG otherwise) and does nothing. backward_weight
 * scatters dy back, dw[id, :] += dy[..., :] for every position in order, so
 * a repeated id accumulates. Saves: x (borrowed). ladle_layer_init does not
 * apply (its rules are fan-based): re-draw by creating the layer again, or
 * write the weight. Devices whose backend has no embedding kernels (CUDA)
 * refuse it with LADLE_ERR_DEVICE.
 */
/* The token embedding's options, shared by the sequential layer and the
 * vocabulary-parallel one (ladle_dist_vocab_embedding_create). */
typedef struct ladle_embedding_desc {
    size_t size; /* sizeof(ladle_embedding_desc), set by ladle_embedding_desc_init */
    int64_t num_embeddings; /* V: the weight's rows, the ids' range, >= 1 */
    int64_t embedding_dim;  /* E: the weight's columns, y's last extent, >= 1 */
    unsigned flags;         /* the distributed layer's: LADLE_CHECKED; 0 */
} ladle_embedding_desc;

/* V and E, no flags. Local; d NULL does nothing. */
LADLE_API void ladle_embedding_desc_init(ladle_embedding_desc *d, int64_t num_embeddings,
                                         int64_t embedding_dim);
/* The token embedding of d over ids of ids_shape (ndim dimensions). d->flags
 * are the distributed layer's (LADLE_CHECKED); here they change nothing.
 * Local. Returns LADLE_ERR_NULL (d, ids_shape or op NULL), LADLE_ERR_ARG (a
 * bad descriptor size; num_embeddings or embedding_dim below 1; a flag bit
 * other than LADLE_CHECKED), LADLE_ERR_SHAPE (ndim outside 1 ..
 * LADLE_MAX_NDIM - 1, a non-positive extent, y too large), LADLE_ERR_DTYPE
 * (dtype not f32 or f64; it is the weight's and y's), LADLE_ERR_DEVICE,
 * LADLE_ERR_ALLOC. The forward adds LADLE_ERR_DTYPE for x not LADLE_I64 and
 * LADLE_ERR_ARG for an id out of range. */
LADLE_API ladle_status ladle_embedding_create(const ladle_embedding_desc *d, int ndim,
                                              const int64_t ids_shape[], ladle_dtype dtype,
                                              ladle_device device, uint64_t seed,
                                              ladle_op **op);

/*
 * Learned positional embedding: x is N x T x E, the weight p ("weight") is
 * max_len x E (T <= max_len), and y[n, t, :] = x[n, t, :] + p[t, :].
 * Backward: dx = dy; dp[t, :] += sum over n of dy[n, t, :] for t < T (the
 * rows from T on get nothing). p is drawn from normal(0, 1) like the token
 * embedding's weight. Saves nothing; y may be x (in place). Every device:
 * it runs on the copy and bias slots every backend has.
 */
/* Local. Returns LADLE_ERR_NULL (x_shape or op NULL), LADLE_ERR_ARG
 * (max_len below 1), LADLE_ERR_SHAPE (ndim not 3, a non-positive extent, T
 * above max_len), LADLE_ERR_DTYPE, LADLE_ERR_DEVICE, LADLE_ERR_ALLOC. */
LADLE_API ladle_status ladle_pos_embedding_create(int ndim, const int64_t x_shape[],
                                                  int64_t max_len, ladle_dtype dtype,
                                                  ladle_device device, uint64_t seed,
                                                  ladle_op **op);
/* Make x's positions offset .. offset + T - 1 (0 at creation): rows offset
 * .. offset + T - 1 of p are added, and get the gradients. A sequence block
 * of a sequence-parallel model (ladle_dist_tp_attention_create) adds its
 * own positions this way. Local. Returns LADLE_ERR_NULL, LADLE_ERR_ARG (not
 * a positional embedding; offset + T above max_len, or negative). */
LADLE_API ladle_status ladle_pos_embedding_set_offset(ladle_op *op, int64_t offset);

/*
 * Multi-head self-attention (sequential): x and y are N x T x E, with H
 * heads of d = head_dim values each (H d need not be E: a tensor-parallel
 * shard holding H/P heads of a wider layer is this same layer). Parameters,
 * in this order (the biases only when asked for):
 *   "qkv_weight"  3 x H d x E  [0] the queries' rows, [1] the keys', [2]
 *                             the values' (PyTorch's in_proj_weight viewed
 *                             as 3 x H d x E, so that a head group is one
 *                             box: what tensor parallelism splits)
 *   "qkv_bias"    3 x H d
 *   "out_weight"  E x H d
 *   "out_bias"    E
 * Forward, per sample n and head h (Q, K, V the head's T x d columns):
 *   [Q K V] = x W_qkv^T + b_qkv,   S = scale Q K^T,  masked to keys t' <= t
 *   when causal,   P = softmax of each row of S,   O_h = P V,
 *   y = [O_1 .. O_H] W_out^T + b_out.
 * The T x T matrix P is never stored: the forward takes the softmax online
 * over tiles of `block` keys and saves, per ctx, qkv, O and the per-row
 * log-sum-exp (ladle_attention_memory gives the bytes, against the
 * N H T^2 elements P would take); the backward recomputes P tile by tile
 * from them. Backward, with dO = dy W_out and D = rowsum(dO o O):
 *   dV = P^T dO,  dS = P o (dO V^T - D),  dQ = scale dS K,  dK = scale dS^T Q,
 *   dx = [dQ dK dV] W_qkv;
 * backward_weight accumulates dW_out += dy^T O, db_out += column sums of dy,
 * dW_qkv += [dQ dK dV]^T x, db_qkv += column sums of [dQ dK dV]. Either
 * order works. backward_weight right after the backward of the same ctx
 * and dy reuses the backward's [dQ dK dV], which the op's workspace still
 * holds; otherwise (another call in between, as in zero-bubble schedules,
 * or the weight pass first) it recomputes the attention backward. Softmax
 * statistics and every dot product of the attention core are summed in
 * double, in f32 as well, unless f32_tiles asks for the tiles' products in
 * f32; the projections are the backend's GEMMs.
 * Initialisation: as PyTorch's nn.Linear for each projection (the three
 * of qkv as one E -> 3 H d linear, as GPT-2's c_attn): weights and biases
 * uniform in +-1/sqrt(fan_in), fan_in E for qkv and H d for out, from the
 * counter-based generator keyed by seed (streams 0 .. 3 for qkv_weight,
 * qkv_bias, out_weight, out_bias), the same values on every device.
 * (nn.MultiheadAttention draws Xavier weights and zero biases instead.)
 * Batches smaller than the created N are accepted. No allocation in the
 * calls: the workspace (ladle_op_workspace_bytes) is sized at creation
 * for N. Devices whose backend has no attention kernels (CUDA) refuse it
 * with LADLE_ERR_DEVICE.
 */
typedef struct ladle_attention_desc {
    size_t size;        /* sizeof(ladle_attention_desc), set by ladle_attention_desc_init */
    int64_t embed_dim;  /* E: the width of x and y, >= 1 */
    int64_t num_heads;  /* H >= 1 */
    int64_t head_dim;   /* d >= 1; default E / H (0 when H does not divide E: set it) */
    int causal;         /* nonzero (the default): query t sees keys 0 .. t only */
    int qkv_bias;       /* nonzero (the default): learn b_qkv */
    int out_bias;       /* nonzero (the default): learn b_out */
    double scale;       /* the scores' factor; 0 (the default) means 1 / sqrt(d); else
                           finite and > 0 */
    int64_t block;      /* the tile, queries and keys; 0 (the default) means 64; else
                           1 .. 4096. Results do not depend on it beyond rounding. */
    int f32_tiles;      /* an f32 layer's tile products (scores, P V and the backward's
                           five) in f32 GEMMs, about twice as fast, the softmax
                           statistics still in double: nonzero; 0 (the default): in
                           double, within one rounding of the f64 twin. Nothing in f64. */
    unsigned flags;     /* the distributed layer's (ladle_dist_tp_attention_create):
                           LADLE_CHECKED; 0 */
} ladle_attention_desc;

/* E, H, d = E / H (0 if H does not divide E, or H < 1), causal, both biases,
 * scale and block 0 (their defaults), f32_tiles 0, flags 0. Local. */
LADLE_API void ladle_attention_desc_init(ladle_attention_desc *d, int64_t embed_dim,
                                         int64_t num_heads);
/* x_shape is N x T x E (ndim 3). Local. Returns LADLE_ERR_NULL (d, x_shape
 * or op NULL), LADLE_ERR_ARG (a bad descriptor size; embed_dim, num_heads
 * or head_dim below 1, naming the value; a scale that is negative, NaN or
 * infinite; a block outside 0 .. 4096), LADLE_ERR_SHAPE (ndim not 3, an
 * extent below 1, x's last extent not embed_dim, sizes whose products
 * (3 H d E, N T 3 H d, the saved bytes) overflow or exceed the BLAS's int
 * sizes), LADLE_ERR_DTYPE (not f32 or f64), LADLE_ERR_DEVICE (a device
 * ladle was built without, or whose backend has no attention kernels),
 * LADLE_ERR_ALLOC. The layer calls return what ladle_layer_* return for
 * any layer. */
LADLE_API ladle_status ladle_attention_create(const ladle_attention_desc *d, int ndim,
                                              const int64_t x_shape[], ladle_dtype dtype,
                                              ladle_device device, uint64_t seed,
                                              ladle_op **op);
/* What an attention layer holds, in bytes (each pointer may be NULL):
 * saved, what each ctx keeps for the backward, for the created batch N,
 *   (3 H d + H d) N T elements (qkv and O) + 8 N H T (the log-sum-exp);
 * workspace, the op's scratch (ladle_op_workspace_bytes), also linear in T:
 *   (3 H d + H d) N T elements + 8 (N H T + 7 T d + T + 2 B^2 + B d + 2 B)
 *   with B = min(block, T);
 * probs, what storing P would take instead: N H T^2 elements (saturating
 * at SIZE_MAX). Local. Returns LADLE_ERR_NULL (op), LADLE_ERR_ARG (not an
 * attention layer). */
LADLE_API ladle_status ladle_attention_memory(const ladle_op *op, size_t *saved,
                                              size_t *workspace, size_t *probs);

/* Elementwise activations. LeakyReLU uses param as its slope for x <= 0:
 * any finite value, negative or above 1 included; NAN (math.h) asks for the
 * default 0.01 (before this release a negative param did, and is now a
 * negative slope). GELU is the exact one, x Phi(x). The others ignore param.
 * They work in place (x == y) except the GELUs and a leaky ReLU with a negative
 * slope (whose y is positive on both sides of 0, so its backward reads x).
 * Saves: x, or y where the derivative needs only y (ReLU, sigmoid, tanh, a
 * leaky ReLU with a slope >= 0). */
typedef enum ladle_activation {
    LADLE_RELU = 0,
    LADLE_LEAKY_RELU = 1,
    LADLE_SIGMOID = 2,
    LADLE_TANH = 3,
    LADLE_GELU = 4,
    /* PyTorch's GELU(approximate='tanh'): 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))) */
    LADLE_GELU_TANH = 5
} ladle_activation;

/* Local. Returns LADLE_ERR_NULL, LADLE_ERR_ARG (an unknown kind, naming the
 * value; an infinite leaky slope), LADLE_ERR_SHAPE, LADLE_ERR_DTYPE,
 * LADLE_ERR_DEVICE, LADLE_ERR_ALLOC. */
LADLE_API ladle_status ladle_activation_create(ladle_activation kind, double param, int ndim,
                                               const int64_t shape[], ladle_dtype dtype,
                                               ladle_device device, ladle_op **op);

typedef enum ladle_softmax_kind {
    LADLE_SOFTMAX = 0,    /* y_i = exp(x_i) / sum_j exp(x_j) */
    LADLE_LOG_SOFTMAX = 1 /* y_i = x_i - log sum_j exp(x_j) */
} ladle_softmax_kind;

/* Softmax or log-softmax along dimension dim (negative counts from the end).
 * Along the batch (dim 0), a call with a smaller batch normalises over the
 * rows it has. Saves: y. Local. Returns LADLE_ERR_NULL, LADLE_ERR_ARG (an unknown kind,
 * naming the value; dim out of range), LADLE_ERR_SHAPE, LADLE_ERR_DTYPE,
 * LADLE_ERR_DEVICE, LADLE_ERR_ALLOC. */
LADLE_API ladle_status ladle_softmax_create(int ndim, const int64_t shape[], int dim,
                                            ladle_softmax_kind kind, ladle_dtype dtype,
                                            ladle_device device, ladle_op **op);

/* Dropout with probability p: in training, element i is kept (and scaled by
 * 1/(1-p)) when a counter-based hash of (seed, step, offset + i) says so,
 * where i counts elements of the whole batch in row-major order and offset is
 * this shard's first global index (0 for a sequential layer). A distributed
 * run therefore drops exactly the elements its sequential twin drops. The
 * step advances with every training forward (set it to replay a run). In
 * evaluation, the identity. Saves: the step. Local, and so is set_step
 * (Returns LADLE_ERR_NULL, LADLE_ERR_ARG: not a dropout). */
LADLE_API ladle_status ladle_dropout_create(int ndim, const int64_t shape[], double p,
                                            ladle_dtype dtype, ladle_device device, uint64_t seed,
                                            ladle_op **op);
LADLE_API ladle_status ladle_dropout_set_step(ladle_op *op, uint64_t step);

/* Reshape (flatten is a special case): the same elements in a new shape of
 * equal volume. A reshape that keeps dimension 0 (the batch) takes any
 * smaller batch, as the other layers do; one that changes it (N x T x V to
 * N T x V, the rows a classification loss takes) takes exactly in_shape.
 * Local, and so is flatten. */
LADLE_API ladle_status ladle_reshape_create(int ndim_in, const int64_t in_shape[], int ndim_out,
                                            const int64_t out_shape[], ladle_dtype dtype,
                                            ladle_device device, ladle_op **op);
/* Flatten every dimension after the first: N x ... -> N x (product). Local. */
LADLE_API ladle_status ladle_flatten_create(int ndim, const int64_t shape[], ladle_dtype dtype,
                                            ladle_device device, ladle_op **op);

/* ---- containers ----------------------------------------------------------- */

/* A chain of n layers, itself a layer: forward runs them in order, backward
 * in reverse, and backward_weight hands each layer the output gradient that
 * backward computed for it (so it must follow backward of the same ctx).
 * Each layer's y must have the next layer's x shape, every dtype must
 * agree, and every layer must live on one device, which becomes the
 * container's (LADLE_ERR_DEVICE names two layers on different devices).
 * A chain that starts with a token embedding takes its ids as x and, like
 * the embedding, takes dx NULL in backward.
 * The container owns the layers from then on (destroying it
 * destroys them; on failure they stay the caller's). Its parameters are its
 * layers' parameters, in order; its ctx holds one ctx per layer and the
 * intermediate activations and gradients. The layers may be distributed
 * (ladle/distributed.h), on ranks that run all of them: the chain's x is
 * then the first layer's block of its layout and y the last one's
 * (ladle_op_x_layout, ladle_op_y_layout), its calls take whole blocks (no
 * smaller batch), ladle_layer_sync_gradients sums every layer's
 * replicated gradients, and graphs and checkpoints see each parameter's
 * shard and copies as they would see the layer alone. The container's own
 * shape checks in a call are local: give every rank tensors of its
 * blocks' shapes. Collective over the distributed layers' ranks when there
 * are any, which agree on the verdict over the first one's communicator (so
 * every rank fails alike); local for sequential layers (they exist already).
 * Returns LADLE_ERR_NULL, LADLE_ERR_ARG
 * (a layer that does not run on this rank, a sequential layer without a
 * batch dimension), LADLE_ERR_SHAPE, LADLE_ERR_DTYPE, LADLE_ERR_DEVICE,
 * LADLE_ERR_ALLOC. */
LADLE_API ladle_status ladle_sequential_create(int n, ladle_op *const layers[], ladle_op **seq);
/* The number of layers, and layer i (borrowed). Local. */
LADLE_API int ladle_sequential_size(const ladle_op *seq);
LADLE_API ladle_op *ladle_sequential_layer(const ladle_op *seq, int i);

/* A residual block, itself a layer: y = x + f(x), f the layer *body (any
 * sequential layer or container whose y has x's shape: a transformer's
 * "x + attention(norm(x))" is a residual over a sequential of the norm and
 * the attention). Its Jacobian is I + J_f, so the backward is dx = dy +
 * J_f^T dy (f's backward, plus dy) and the weight pass is f's with dy. On
 * success the block owns *body (destroying the block destroys it) and
 * *body becomes NULL; on failure it stays the caller's. Its parameters are
 * f's, its ctx holds f's ctx, and without a ctx its backward is the
 * adjoint when f is linear. A chain of residual blocks is what a pipeline
 * stage takes, so a transformer's blocks can be cut into stages
 * (ladle_gpt_layers). f may be distributed (a sequential container of
 * distributed layers: a tensor-parallel attention between copies of a
 * layer norm and a dropout) when its y lies as its x does: the same global
 * shape, and on every rank the same box, so the add is each rank's own;
 * the block then has f's layouts and its gradient sums. Collective over a
 * distributed body's ranks, which agree on the verdict (a box that differs
 * on one rank fails all); local for a sequential body. Returns
 * LADLE_ERR_NULL, LADLE_ERR_ARG (not a layer, a loss, a layer that takes
 * token ids, a layout on only one side), LADLE_ERR_SHAPE (y's shape is not
 * x's, or its box on this rank is another), LADLE_ERR_ALLOC. */
LADLE_API ladle_status ladle_residual_create(ladle_op **body, ladle_op **block);
/* The block's f (borrowed), or NULL when op is not a residual block. Local. */
LADLE_API ladle_op *ladle_residual_body(const ladle_op *block);

/* Activation recomputation: a layer with *inner's values and gradients
 * that keeps none of inner's saved state per microbatch. Its forward runs
 * inner in the current mode on one scratch ctx planned at creation and
 * saves in its own ctx only the steps of the ops under inner (a few bytes;
 * x is borrowed, as every ctx borrows it); its backward runs inner's
 * forward again from that x into the scratch, then inner's backward there.
 * The recomputation reproduces the first forward's bits: every op under
 * inner gets back the step its forward saw (dropout masks), and buffers
 * such as batch norm's running statistics are restored after it, so they
 * are updated once, as without the wrapper. Losses, gradients and running
 * statistics are then the same bits as inner's alone. The scratch is
 * shared by all of the wrapper's ctxs, which is why backwards of one
 * wrapper must not run concurrently (they never do in a network or
 * pipeline); a backward right after its own forward skips the rerun, and a
 * weight pass whose ctx lost the scratch to another microbatch reruns the
 * forward and the inner backward. Costs: one more forward of inner per
 * backward, and one ctx and y of inner per wrapper.
 * inner: any layer or container, sequential or distributed (its calls are
 * collective, so the rerun is too). On success the wrapper owns *inner and
 * *inner becomes NULL; on failure it stays the caller's. Collective over a
 * distributed inner's ranks, which agree on the verdict; local otherwise.
 * Returns LADLE_ERR_NULL, LADLE_ERR_ARG (not a layer, a loss, a layer that
 * saves nothing), LADLE_ERR_ALLOC. */
LADLE_API ladle_status ladle_recompute_create(ladle_op **inner, ladle_op **op);
/* The bytes of the wrapper's scratch (inner's ctx and y, the copies of the
 * buffers): a fixed cost, held once however many microbatches are in
 * flight, where inner alone holds its ctx once per microbatch; a block
 * shared with other wrappers (ladle_recompute_share) is counted in full.
 * 0 when op is not a wrapper. Local. */
LADLE_API size_t ladle_recompute_scratch_bytes(const ladle_op *op);
/* The wrapper's inner layer (borrowed), or NULL when op is not one. Local. */
LADLE_API ladle_op *ladle_recompute_inner(const ladle_op *op);
/* One scratch for every wrapper under ops[0..n-1] (the ops themselves,
 * the parts of containers and distributed layers, not a wrapper's inner
 * layer): a wrapper's scratch is live only from its forward or rerun to
 * the end of its backward, and those of one network never overlap, so one
 * block of the largest member's size serves them all. Memory: the sum of
 * the members' saved states and inner outputs becomes their maximum.
 * Time: a member whose microbatch another member's forward overwrote
 * reruns (with one microbatch, every member but the last one run). A
 * graph shares among its layers at ladle_graph_finalize; call this for a
 * chain or pipeline stage built from wrapped layers. A member's backward
 * also runs its inner weight pass (its own weight pass then does
 * nothing), so its gradients sum over microbatches in the order of the
 * backwards, and a backward accumulates them even when no weight pass
 * follows. Calling it again
 * moves the members to a new block. The members must not run
 * concurrently, nor belong to networks that do. Local. Returns
 * LADLE_ERR_NULL, LADLE_ERR_DEVICE (members on different devices),
 * LADLE_ERR_ALLOC; on failure each member keeps the scratch it had or has
 * the new one, and every call still gives the same bits. */
LADLE_API ladle_status ladle_recompute_share(int n, ladle_op *const ops[]);
/* The bytes of the scratch of every wrapper under ops[0..n-1], as
 * ladle_recompute_share finds them, each shared block counted once. Local.
 * 0 for a bad list. */
LADLE_API size_t ladle_recompute_total_bytes(int n, ladle_op *const ops[]);

/* ---- functions without parameters or saved state -------------------------*/

/* y = a + b elementwise (residual connections); y may be a or b. The
 * backward of each input is dy itself. Local. Returns LADLE_ERR_NULL,
 * LADLE_ERR_SHAPE, LADLE_ERR_DTYPE, LADLE_ERR_DEVICE. */
LADLE_API ladle_status ladle_add(const ladle_tensor *a, const ladle_tensor *b, ladle_tensor *y);

/* Concatenate n tensors along dimension dim (1 for channels) into y, and the
 * backward: split dy back into the n gradients. Local. Return
 * LADLE_ERR_NULL, LADLE_ERR_ARG, LADLE_ERR_SHAPE, LADLE_ERR_DTYPE,
 * LADLE_ERR_DEVICE. */
LADLE_API ladle_status ladle_concat(int n, const ladle_tensor *const xs[], int dim,
                                    ladle_tensor *y);
LADLE_API ladle_status ladle_concat_backward(const ladle_tensor *dy, int dim, int n,
                                             ladle_tensor *const dxs[]);

/* ---- losses ------------------------------------------------------------- */

typedef enum ladle_loss_kind {
    LADLE_LOSS_MSE = 0,
    LADLE_LOSS_L1 = 1,
    LADLE_LOSS_CROSS_ENTROPY = 2, /* logits N x C (x S...), i64 labels N (x S...) */
    LADLE_LOSS_NLL = 3,           /* log-probabilities, i64 labels */
    LADLE_LOSS_BCE_WITH_LOGITS = 4
} ladle_loss_kind;

typedef enum ladle_reduction {
    LADLE_REDUCE_MEAN = 0,
    LADLE_REDUCE_SUM = 1,
    LADLE_REDUCE_NONE = 2
} ladle_reduction;

/* No label is ignored (ladle_loss_desc's ignore_index by default). */
#define LADLE_LOSS_NO_IGNORE INT64_MIN

/*
 * A loss's options, as PyTorch's losses take them. label_smoothing (cross
 * entropy only) mixes the one-hot target with the uniform distribution.
 * For cross entropy and NLL:
 *   weights      num_weights = C class weights w (any finite values), copied
 *                at create (the caller's array may go right after); NULL
 *                and 0 for all 1
 *   ignore_index a label whose samples count for nothing: loss 0, gradient
 *                0, no share of the mean's divisor. It may be a class or lie
 *                outside 0..C-1 (PyTorch's default is -100); other labels
 *                outside 0..C-1 are refused at the forward
 * The loss of a sample of label t (not ignored) with log-probabilities
 * l_c = x_c - log sum_k exp(x_k) is, with label smoothing e,
 *   cross entropy  (1 - e) w_t (-l_t) + e / C sum_c w_c (-l_c)
 *   NLL            w_t (-x_t)
 * and the mean divides the sum of the samples' losses by the sum of w_t
 * over the samples not ignored (without weights: their number N x S...).
 * When every sample is ignored (or those left weigh 0 in all) the mean is
 * 0/0: NaN, as in PyTorch, which ladle_loss_forward reports as
 * LADLE_ERR_NUMERIC (the NaN written into loss). MSE, L1 and BCE with
 * logits take neither option. flags are those of a distributed loss
 * (LADLE_CHECKED); a sequential loss accepts them and they change nothing.
 */
typedef struct ladle_loss_desc {
    size_t size; /* sizeof(ladle_loss_desc), set by ladle_loss_desc_init */
    ladle_loss_kind kind;
    ladle_reduction reduction;
    double label_smoothing; /* cross entropy only, in [0, 1]; default 0 */
    int64_t ignore_index;   /* default LADLE_LOSS_NO_IGNORE */
    const double *weights;  /* num_weights class weights (host memory), or NULL */
    int64_t num_weights;
    unsigned flags; /* distributed flags (LADLE_CHECKED); default 0 */
} ladle_loss_desc;

/* kind and reduction, no smoothing, no weights, no ignored label, no
 * flags. Local. */
LADLE_API void ladle_loss_desc_init(ladle_loss_desc *d, ladle_loss_kind kind,
                                    ladle_reduction reduction);
/* A loss (the options of d) over inputs of input_shape. For MSE, L1 and
 * BCE-with-logits the target is a tensor of the input's shape and dtype;
 * for cross entropy and NLL it is an i64 tensor of class indices shaped as
 * the input without dimension 1. The loss tensor is a scalar (ndim 0) for
 * mean and sum, and the per-element (or per-sample for cross entropy and
 * NLL) losses for none. Local. Returns LADLE_ERR_NULL, LADLE_ERR_ARG (a bad
 * descriptor size, an unknown kind or reduction, naming the value;
 * label_smoothing outside [0, 1] or on another loss than cross entropy;
 * weights or ignore_index on a regression loss, a non-finite weight,
 * weights NULL with num_weights nonzero or the reverse; a flag bit other
 * than LADLE_CHECKED), LADLE_ERR_SHAPE (num_weights other than C),
 * LADLE_ERR_DTYPE, LADLE_ERR_DEVICE (weights or ignore_index on a device
 * whose backend has no kernels for them: CUDA), LADLE_ERR_ALLOC. */
LADLE_API ladle_status ladle_loss_create(const ladle_loss_desc *d, int ndim,
                                         const int64_t input_shape[], ladle_dtype dtype,
                                         ladle_device device, ladle_op **op);
/* loss = L(input, target); saves input and target references in ctx (may
 * be NULL). Collective over the partition for a distributed loss
 * (ladle_dist_loss_create), whose members all get the same status and
 * value; local for a sequential one. Returns LADLE_ERR_NULL, LADLE_ERR_ARG (labels out
 * of range other than ignore_index, naming the first; an op that is not a
 * loss), LADLE_ERR_DTYPE, LADLE_ERR_SHAPE,
 * LADLE_ERR_DEVICE (tensors not on the loss's device), and LADLE_ERR_NUMERIC when the
 * loss comes out infinite or NaN (an input that is NaN or infinite, or
 * terms that overflow the dtype): the call then still writes the
 * non-finite value(s) into loss, so a caller can print them, and ctx holds
 * the forward (a backward would give non-finite gradients);
 * ladle_network_loss refuses the backward after it. Every other failure
 * leaves loss and ctx as they were. A distributed loss decides
 * LADLE_ERR_NUMERIC after summing the blocks, so every member reports it
 * with the same message. */
LADLE_API ladle_status ladle_loss_forward(ladle_op *op, ladle_ctx *ctx,
                                          const ladle_tensor *input,
                                          const ladle_tensor *target, ladle_tensor *loss);
/* dinput = dL/dinput scaled by dloss (a scalar, or per element for none).
 * Local, for a distributed loss too: its backward sends no message (its
 * forward kept the sums it needs in ctx).
 * Returns LADLE_ERR_NULL, LADLE_ERR_ARG, LADLE_ERR_STATE (no forward has run
 * with ctx), LADLE_ERR_DTYPE, LADLE_ERR_SHAPE (dinput not the input's shape),
 * LADLE_ERR_DEVICE. */
LADLE_API ladle_status ladle_loss_backward(ladle_op *op, ladle_ctx *ctx,
                                           const ladle_tensor *dloss, ladle_tensor *dinput);

#ifdef __cplusplus
}
#endif

#endif /* LADLE_LAYERS_H */
