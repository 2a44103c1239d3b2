/*
 * Distributed loss (see ladle/distributed.h): each rank computes the loss
 * of its block with the sequential loss, whose mean divides by the global
 * count; one all-sum-reduce over the partition adds the blocks' values, so
 * every member holds the loss of the whole batch. The same reduction
 * carries a flag per rank, so a rank that rejects its input (NaN, a label
 * out of range) fails every rank instead of leaving them waiting. A block
 * whose loss is not finite is no such failure: its value goes into the
 * sum, and every member finds the batch's loss non-finite alike
 * (LADLE_ERR_NUMERIC, with the same message). The backward needs no
 * message: d(sum of blocks)/d(block) is the block's own gradient, already
 * scaled by the global count. A mean that divides by the labels' weight
 * (class weights, ignore_index) cannot know its divisor before the sum:
 * each block's loss is then its sum, the reduction carries the blocks'
 * label weights beside the values, and the quotient's divisor goes into
 * the block's ctx for the backward.
 */
#include <math.h>
#include <string.h>

#include "layers/distributed/dist.h"
#include "layers/sequential/loss_impl.h"

typedef struct distloss {
    ladle__dist_base base; /* local: the block's loss; NULL outside the partition */
    ladle_op *reduce;     /* all-sum-reduce of (value, weight, failed) over the partition */
    ladle_tensor *pair;   /* its three doubles */
    ladle_tensor *value;  /* the block's loss (mean and sum) */
    ladle_reduction reduction;
    int label_divisor; /* the mean divides by the labels' global weight */
} distloss;

static const ladle__part distloss_parts[] = {
    LADLE__PART_DIST_BASE(distloss), LADLE__PART_OP(distloss, reduce),
    LADLE__PART_TENSOR(distloss, pair), LADLE__PART_TENSOR(distloss, value),
    LADLE__PARTS_END};

/* The loss tensor's checks (local: the members agree on the sum). */
static ladle_status check_out(const ladle_op *op, int none, const ladle_tensor *out)
{
    if (out == NULL)
        return ladle__raise(LADLE_ERR_NULL, "ladle_loss_forward", "loss is NULL");
    if (!none && (out->numel != 1 || out->dtype != op->dtype))
        return ladle__raise(LADLE_ERR_SHAPE, "ladle_loss_forward",
                            "the loss must be one %s value", ladle_dtype_name(op->dtype));
    if (out->device != op->be->device)
        return ladle__raise(LADLE_ERR_DEVICE, "ladle_loss_forward",
                            "loss is on %s but the distributed loss is on %s",
                            ladle_device_name(out->device), ladle_device_name(op->be->device));
    return LADLE_OK;
}

/* The verdict on the summed loss (pair: value, weight; out holds the
 * value): pair is the same on every member, bit for bit, so is the
 * verdict. */
static ladle_status verdict(const ladle_op *op, int none, int weighed, const double *pair,
                            const ladle_tensor *out)
{
    ladle_status st = LADLE_OK;
    double value = 0.0;
    if (none && !isfinite(pair[0]))
        return ladle__raise(LADLE_ERR_NUMERIC, "ladle_loss_forward",
                            "the loss of an element of the batch is not finite: an input "
                            "is not finite or its terms overflow");
    /* the value as stored: an f64 sum may overflow f32 */
    if (!none)
        LADLE_CALL(ladle_tensor_get(out, 0, &value));
    if (weighed && pair[1] == 0)
        return ladle__raise(LADLE_ERR_NUMERIC, "ladle_loss_forward",
                            "the loss of the whole batch is %g: every sample is ignored or "
                            "weighs 0, so its mean is 0/0",
                            value);
    if (!none && !isfinite(value))
        return ladle__raise(LADLE_ERR_NUMERIC, "ladle_loss_forward",
                            "the loss of the whole batch is %g: an input is not finite or "
                            "its terms overflow %s",
                            value, ladle_dtype_name(op->dtype));
fail:
    return st;
}

static ladle_status dl_forward(ladle_op *op, ladle_ctx *ctx, const ladle_tensor *input,
                               const ladle_tensor *target, ladle_tensor *out)
{
    ladle_status st = LADLE_OK, local = LADLE_OK;
    distloss *v = op->impl;
    ladle__dist_ctx *c = ctx ? ctx->impl : NULL;
    if (ctx != NULL && ctx->op != op)
        return ladle__raise(LADLE_ERR_ARG, "ladle_loss_forward", "the ctx belongs to another op");
    if (v->base.local == NULL)
        return LADLE_OK; /* outside the partition */
    int none = v->reduction == LADLE_REDUCE_NONE;
    local = check_out(op, none, out);
    double wsum = 0;
    if (local == LADLE_OK)
        local = ladle__loss_forward_weight(v->base.local, c ? c->local : NULL, input, target,
                                           none ? out : v->value, &wsum);
    /* a non-finite block is no failure of this rank: the sum decides below,
     * so that every member reaches the same verdict */
    int numeric = local == LADLE_ERR_NUMERIC;
    if (numeric)
        local = LADLE_OK;
    /* the pair crosses to the host and back through the backend: the loss
     * value is the host's to see */
    double pair[3] = {0.0, 0.0, local != LADLE_OK}, value = 0.0;
    if (local == LADLE_OK && !none)
        local = ladle_tensor_get(v->value, 0, &value);
    pair[0] = local != LADLE_OK ? 0.0 : none ? (numeric ? NAN : 0.0) : value;
    pair[1] = local != LADLE_OK ? 0.0 : wsum;
    pair[2] = local != LADLE_OK;
    LADLE_CALL(ladle_tensor_write(v->pair, pair));
    LADLE_CALL(ladle_op_forward(v->reduce, v->pair, v->pair));
    LADLE_CALL(ladle_tensor_read(v->pair, pair));
    if (local != LADLE_OK)
        return local;
    if (pair[2] != 0)
        return ladle__raise(LADLE_ERR_REMOTE, "ladle_loss_forward",
                            "the loss failed on another rank; see that rank's message");
    int weighed = v->label_divisor && !none;
    if (weighed) {
        pair[0] /= pair[1]; /* 0/0 when nothing counts: NaN, as PyTorch gives */
        ladle__loss_ctx_divisor(c ? c->local : NULL, pair[1]);
    }
    if (!none)
        LADLE_CALL(ladle_tensor_set(out, 0, pair[0]));
    if (ctx) {
        ctx->x = input;
        ctx->target = target;
        ctx->ready = 1;
    }
    return verdict(op, none, weighed, pair, out);
fail:
    return st;
}

static ladle_status dl_backward(ladle_op *op, ladle_ctx *ctx, const ladle_tensor *dloss,
                                ladle_tensor *dinput)
{
    distloss *v = op->impl;
    if (ctx == NULL)
        return ladle__raise(LADLE_ERR_NULL, "ladle_loss_backward", "ctx is NULL");
    if (ctx->op != op)
        return ladle__raise(LADLE_ERR_ARG, "ladle_loss_backward", "the ctx belongs to another op");
    if (v->base.local == NULL)
        return LADLE_OK;
    return ladle_loss_backward(v->base.local, ((ladle__dist_ctx *)ctx->impl)->local, dloss,
                               dinput);
}

static void dl_destroy(ladle_op *op) { ladle__parts_free(op->impl, distloss_parts, NULL); }

static const ladle_op_vtable dloss_vt = {
    .kind = LADLE_OP_DIST_LOSS,
    .name = "distributed loss",
    .destroy = dl_destroy,
    .layer_forward = ladle__dist_loss_no_layer,
    .ctx_init = ladle__dist_ctx_init,
    .ctx_held = ladle__dist_ctx_held,
    .ctx_fini = ladle__dist_ctx_fini,
    .loss_forward = dl_forward,
    .loss_backward = dl_backward,
};

/* The checks every rank makes alike. */
static ladle_status validate(const ladle_loss_desc *dsc, const ladle_partition *p_x,
                             int ndim, const int64_t *input_shape, const char *f)
{
    ladle_status local = ladle__loss_check_desc(dsc, f);
    if (local != LADLE_OK)
        return local;
    int classify = dsc->kind == LADLE_LOSS_CROSS_ENTROPY || dsc->kind == LADLE_LOSS_NLL;
    if (ndim < 1 || ndim > LADLE_MAX_NDIM)
        local = ladle__raise(LADLE_ERR_SHAPE, f, "ndim %d is outside 1..%d", ndim,
                             LADLE_MAX_NDIM);
    else if (classify && ndim >= 2 && ladle_partition_shape(p_x)[1] != 1)
        local = ladle__raise(LADLE_ERR_PARTITION, f,
                             "p_x splits the classes (dimension 1): a classification loss "
                             "needs every class of a sample on one rank");
    else if (dsc->weights != NULL && (ndim < 2 || dsc->num_weights != input_shape[1]))
        local = ladle__raise(LADLE_ERR_SHAPE, f, "%lld class weights for %lld classes",
                             (long long)dsc->num_weights,
                             (long long)(ndim >= 2 ? input_shape[1] : 0));
    for (int d = 0; local == LADLE_OK && d < ndim; d++)
        if (input_shape[d] < ladle_partition_shape(p_x)[d])
            local = ladle__raise(LADLE_ERR_SHAPE, f,
                                 "input extent %lld in dimension %d is below the grid's %d",
                                 (long long)input_shape[d], d, ladle_partition_shape(p_x)[d]);
    return local;
}

/* The block's loss on members, dividing by the whole batch's count
 * (samples for a classification, else elements), and the reduction's
 * buffers. Local. */
static ladle_status allocate(ladle__make *m, distloss *v, const ladle_loss_desc *dsc,
                             const ladle_partition *p_x, int ndim,
                             const int64_t *input_shape)
{
    ladle_status st = LADLE_OK;
    int classify = dsc->kind == LADLE_LOSS_CROSS_ENTROPY || dsc->kind == LADLE_LOSS_NLL;
    int64_t box[LADLE_MAX_NDIM] = {0}, three = 3, one = 1;
    ladle_layout_box(m->lx, LADLE_SELF, NULL, box);
    if (ladle_partition_active(p_x)) {
        double count = 1;
        LADLE_CALL(ladle_loss_create(dsc, ndim, box, m->dtype, m->device, &v->base.local));
        for (int d = 0; d < ndim; d++)
            if (!(classify && d == 1))
                count *= (double)input_shape[d];
        v->label_divisor = ladle__loss_label_divisor(v->base.local);
        LADLE_CALL(ladle__loss_set_divisor(v->base.local, count));
    }
    LADLE_CALL(ladle__dist_tensor(LADLE_F64, m->device, 1, &three, &v->pair));
    LADLE_CALL(ladle__dist_tensor(m->dtype, m->device, 1, &one, &v->value));
fail:
    return st;
}

ladle_status ladle_dist_loss_create(const ladle_loss_desc *dsc, const ladle_partition *p_x,
                                    const int64_t input_shape[], ladle_dtype dtype,
                                    ladle_device device, ladle_op **out)
{
    const char *f = __func__;
    ladle_status st = LADLE_OK, local = LADLE_OK;
    ladle__make m = {f, dtype, device, 0, MPI_COMM_NULL, NULL, NULL};
    ladle_op *op = NULL;
    distloss *v = NULL;
    LADLE_NOT_NULL(dsc);
    LADLE_NOT_NULL(p_x);
    LADLE_NOT_NULL(input_shape);
    LADLE_NOT_NULL(out);
    const ladle_partition *parts[1] = {p_x};
    int ndim = ladle_partition_ndim(p_x);
    /* the flags are read only once the descriptor's size is known good */
    local = validate(dsc, p_x, ndim, input_shape, f);
    unsigned flags = local == LADLE_OK ? dsc->flags : 0;
    m.flags = flags;
    int64_t args[13] = {dsc->kind, dsc->reduction, ndim, (int64_t)dtype, (int64_t)flags,
                        dsc->ignore_index, dsc->num_weights};
    for (int d = 0; d < ndim && d < 6; d++)
        args[7 + d] = input_shape[d];
    uint64_t h = ladle__make_hash(LADLE_HASH_INIT, 1, parts, 13, args);
    LADLE_CALL(ladle__make_open(&m, 1, parts, local, ladle__dist_loss_hash(h, dsc, local)));

    v = ladle__calloc(1, sizeof *v);
    local = ladle__make_alloc_ok(&m, v != NULL);
    if (local == LADLE_OK) {
        v->reduction = dsc->reduction;
        local = ladle_layout_create_balanced(p_x, ndim, input_shape, &m.lx);
    }
    if (local == LADLE_OK)
        local = allocate(&m, v, dsc, p_x, ndim, input_shape);
    LADLE_CALL(ladle__make_step(m.comm, local, f));
    int axes[LADLE_MAX_NDIM];
    int64_t three = 3;
    for (int d = 0; d < ndim; d++)
        axes[d] = d;
    ladle_all_sum_reduce_desc rd;
    ladle_all_sum_reduce_desc_init(&rd, ndim, axes, 1, &three);
    rd.flags = flags;
    LADLE_CALL(ladle__make_step(
        m.comm, ladle_all_sum_reduce_create(&rd, p_x, LADLE_F64, device, &v->reduce), f));
    m.ly = ladle__layout_retain(m.lx);
    local = ladle__make_layer(&m, LADLE_OK, &dloss_vt, v, NULL, &op);
    if (local == LADLE_OK) {
        ladle__dist_hold(op, v->reduce);
        v = NULL;
    }
    st = ladle__make_end(&m, &op, local, out);
fail:
    ladle_op_destroy(&op);
    ladle__make_close(&m);
    ladle__parts_free(v, distloss_parts, NULL);
    return st;
}

/* 0.1's name (include/ladle/deprecated.h): the flags go into a copy of
 * the descriptor, and ndim must be p_x's. */
ladle_status ladle_dist_loss_create_ex(const ladle_loss_desc *dsc,
                                       const ladle_partition *p_x, int ndim,
                                       const int64_t input_shape[], ladle_dtype dtype,
                                       ladle_device device, unsigned flags, ladle_op **out)
{
    ladle_status st = LADLE_OK;
    LADLE_NOT_NULL(dsc);
    LADLE_NOT_NULL(p_x);
    LADLE_CHECK(ndim == ladle_partition_ndim(p_x), LADLE_ERR_PARTITION,
                "the input has %d dimensions, p_x %d", ndim, ladle_partition_ndim(p_x));
    /* a descriptor that never went through its _init is refused there */
    if (dsc->size != sizeof *dsc)
        return ladle_dist_loss_create(dsc, p_x, input_shape, dtype, device, out);
    ladle_loss_desc d = *dsc;
    d.flags = flags;
    st = ladle_dist_loss_create(&d, p_x, input_shape, dtype, device, out);
fail:
    return st;
}

ladle_status ladle__dist_loss_local(const ladle_op *op, ladle_op **local)
{
    if (op == NULL || op->vt != &dloss_vt)
        return ladle__raise(LADLE_ERR_ARG, "ladle__dist_loss_local", "not a distributed loss");
    *local = ((const distloss *)op->impl)->base.local;
    return LADLE_OK;
}
