/*
 * Vocabulary-parallel token embedding (see ladle/distributed.h): the
 * weight V x E split by rows over p->w (P ranks, balanced), the ids
 * replicated on every rank of p->w, y on the one rank of p->y:
 *
 *   y = R (sum over r of L_r w_r),      dw_r += L_r* (R* dy)
 *
 * L_r looks up the ids that fall in rank r's rows (a zero row for the
 * others), so the partial outputs add up to w[ids] exactly: every id has
 * one owner and the other terms are 0. R is the sum-reduce p_w -> p_y and
 * R* the broadcast of dy back; L_r* is the scatter-add of the broadcast
 * rows into the rank's own rows. The ids are checked at every forward,
 * and the ranks agree on the verdict before the sum-reduce, so a bad id
 * fails every rank alike instead of leaving p_y waiting.
 *
 * On the CPU the lookup and its adjoint are host loops over the ids. On
 * another device the layer copies the ids to the host (they are checked
 * there anyway), lists the positions i of the ids this rank owns and their
 * rows k = id - voff, moves the two lists across, and runs the backend's
 * embedding slots on them through a compact buffer of rows:
 *   forward   rows[j] = w[k_j],   then yp = 0 and yp[i_j] += rows[j];
 *   backward  rows[j] = dyp[i_j], then dw[k_j] += rows[j] (in order of j,
 *             which is the order of i: the CPU's sums, the same bits).
 * The one difference is the sign of a zero row (0 + -0 is +0), which the
 * sum-reduce over two or more ranks gives on the CPU as well.
 */
#include <string.h>

#include "layers/distributed/dist.h"
#include "layers/sequential/layer_impl.h"

typedef struct vembed {
    ladle__dist_base base; /* param[0], grad[0]: the rank's rows (zero volume elsewhere) */
    int64_t vocab, dim, count; /* V, E and the ids of a call */
    int64_t voff, vr;          /* the rank's first row and its rows (0 outside p_w) */
    int member;                /* in p_w */
    ladle_op *reduce;          /* R: p_w -> p_y */
    ladle_tensor *yp, *dyp;    /* the partial y and the broadcast dy on p_w */
    /* off the CPU (else NULL): the ids, positions and rows on the host,
     * the positions and rows on the device, and the compact rows */
    ladle_tensor *hids, *hpos, *hk, *dpos, *dk, *rows;
} vembed;

static const ladle__part vembed_parts[] = {
    LADLE__PART_DIST_BASE(vembed), LADLE__PART_OP(vembed, reduce),
    LADLE__PART_TENSOR(vembed, yp), LADLE__PART_TENSOR(vembed, dyp),
    LADLE__PART_TENSOR(vembed, hids), LADLE__PART_TENSOR(vembed, hpos),
    LADLE__PART_TENSOR(vembed, hk), LADLE__PART_TENSOR(vembed, dpos),
    LADLE__PART_TENSOR(vembed, dk), LADLE__PART_TENSOR(vembed, rows), LADLE__PARTS_END};

/* The first id outside 0..V-1, or -1. */
static int64_t first_bad(const vembed *v, const int64_t *ids)
{
    for (int64_t i = 0; i < v->count; i++)
        if (ids[i] < 0 || ids[i] >= v->vocab)
            return i;
    return -1;
}

/* L_r: the rows of the ids this rank owns, zero rows for the others. */
static void lookup(const vembed *v, ladle_dtype dt, const int64_t *ids, const void *w,
                   void *y)
{
    size_t es = ladle_dtype_size(dt), row = (size_t)v->dim * es;
    for (int64_t i = 0; i < v->count; i++) {
        int64_t k = ids[i] - v->voff;
        char *dst = (char *)y + (size_t)i * row;
        if (k >= 0 && k < v->vr)
            memcpy(dst, (const char *)w + (size_t)k * row, row);
        else
            memset(dst, 0, row);
    }
}

/* L_r*: dw[id - voff] += dy[i] for the ids this rank owns, in order of i. */
static void scatter_add(const vembed *v, ladle_dtype dt, const int64_t *ids, const void *dy,
                        void *dw)
{
    for (int64_t i = 0; i < v->count; i++) {
        int64_t k = ids[i] - v->voff;
        if (k < 0 || k >= v->vr)
            continue;
        if (dt == LADLE_F64) {
            const double *s = (const double *)dy + i * v->dim;
            double *d = (double *)dw + k * v->dim;
            for (int64_t j = 0; j < v->dim; j++)
                d[j] += s[j];
        } else {
            const float *s = (const float *)dy + i * v->dim;
            float *d = (float *)dw + k * v->dim;
            for (int64_t j = 0; j < v->dim; j++)
                d[j] += s[j];
        }
    }
}

/* Off the CPU: the device's ids (count of them) into the host copy. */
static ladle_status stage_ids(const ladle_op *op, const vembed *v, const ladle_tensor *ids)
{
    ladle_status st = LADLE_OK;
    const ladle_backend *be = op->be;
    LADLE_CALL(be->fn->to_host(be, (size_t)v->count * sizeof(int64_t), ids->data,
                               v->hids->data));
    LADLE_CALL(be->fn->synchronize(be));
fail:
    return st;
}

/* Off the CPU, from the staged ids: the positions and rows of the ids the
 * rank owns, on the device, and their number in *own. The copies finish
 * before the next staging (which synchronizes), so the host lists are
 * not rewritten under them. */
static ladle_status own_lists(const ladle_op *op, const vembed *v, int64_t *own)
{
    ladle_status st = LADLE_OK;
    const ladle_backend *be = op->be;
    const int64_t *ids = v->hids->data;
    int64_t *pos = v->hpos->data, *k = v->hk->data, n = 0;
    for (int64_t i = 0; i < v->count; i++) {
        int64_t r = ids[i] - v->voff;
        if (r >= 0 && r < v->vr) {
            pos[n] = i;
            k[n++] = r;
        }
    }
    size_t bytes = (size_t)n * sizeof(int64_t);
    if (n > 0) {
        LADLE_CALL(be->fn->to_device(be, bytes, pos, v->dpos->data));
        LADLE_CALL(be->fn->to_device(be, bytes, k, v->dk->data));
    }
    *own = n;
fail:
    return st;
}

/* L_r off the CPU: rows[j] = w[k_j], yp = 0, yp[i_j] += rows[j]. */
static ladle_status device_lookup(const ladle_op *op, const vembed *v)
{
    ladle_status st = LADLE_OK;
    const ladle_backend *be = op->be;
    int64_t n = 0;
    LADLE_CALL(own_lists(op, v, &n));
    LADLE_CALL(ladle_tensor_fill(v->yp, 0.0));
    if (n > 0) {
        LADLE_CALL(be->fn->embed_forward(be, op->dtype, n, v->dim, v->dk->data,
                                         v->base.param[0]->data, v->rows->data));
        LADLE_CALL(be->fn->embed_backward(be, op->dtype, n, v->dim, v->dpos->data,
                                          v->rows->data, v->yp->data));
    }
fail:
    return st;
}

/* L_r* off the CPU: rows[j] = dyp[i_j], dw[k_j] += rows[j]. */
static ladle_status device_scatter_add(const ladle_op *op, const vembed *v,
                                       const ladle_tensor *ids)
{
    ladle_status st = LADLE_OK;
    const ladle_backend *be = op->be;
    int64_t n = 0;
    LADLE_CALL(stage_ids(op, v, ids));
    LADLE_CALL(own_lists(op, v, &n));
    if (n > 0) {
        LADLE_CALL(be->fn->embed_forward(be, op->dtype, n, v->dim, v->dpos->data,
                                         v->dyp->data, v->rows->data));
        LADLE_CALL(be->fn->embed_backward(be, op->dtype, n, v->dim, v->dk->data,
                                          v->rows->data, v->base.grad[0]->data));
    }
fail:
    return st;
}

static ladle_status ve_forward(ladle_op *op, ladle_ctx *ctx, const ladle_tensor *x,
                               ladle_tensor *y, int64_t n)
{
    ladle_status st = LADLE_OK, local = LADLE_OK;
    vembed *v = op->impl;
    (void)ctx, (void)n;
    if (v->member && v->hids != NULL)
        local = stage_ids(op, v, x);
    int64_t bad = v->member && local == LADLE_OK ? first_bad(v, v->hids ? v->hids->data : x->data)
                                                : -1;
    if (bad >= 0)
        local = ladle__raise(LADLE_ERR_ARG, "ladle_layer_forward",
                             "token id %lld at flat index %lld is outside 0 .. %lld "
                             "(num_embeddings %lld)",
                             (long long)((const int64_t *)x->data)[bad], (long long)bad,
                             (long long)(v->vocab - 1), (long long)v->vocab);
    LADLE_CALL(ladle__agree_code(op->comm, local, "ladle_layer_forward"));
    if (v->member && v->hids != NULL)
        LADLE_CALL(device_lookup(op, v));
    else if (v->member)
        lookup(v, op->dtype, x->data, v->base.param[0]->data, v->yp->data);
    LADLE_CALL(ladle_op_forward(v->reduce, v->yp, y));
fail:
    return st;
}

static ladle_status ve_backward_weight(ladle_op *op, ladle_ctx *ctx, const ladle_tensor *dy,
                                       int64_t n)
{
    ladle_status st = LADLE_OK;
    vembed *v = op->impl;
    (void)n;
    LADLE_CALL(ladle_op_adjoint(v->reduce, dy, v->dyp));
    if (v->member && v->hids != NULL)
        LADLE_CALL(device_scatter_add(op, v, ctx->x));
    else if (v->member)
        scatter_add(v, op->dtype, ctx->x->data, v->dyp->data, v->base.grad[0]->data);
fail:
    return st;
}

static void ve_param_info(const ladle_op *op, int i, ladle__pinfo *info)
{
    const vembed *v = op->impl;
    (void)i;
    info->ndim = 2;
    info->global[0] = v->vocab;
    info->global[1] = v->dim;
    info->offset[0] = v->member ? v->voff : 0;
    info->offset[1] = 0;
    info->owner = v->member;
    ladle__dist_sync_info(NULL, NULL, NULL, info);
}

static void ve_destroy(ladle_op *op) { ladle__parts_free(op->impl, vembed_parts, NULL); }

static const ladle_op_vtable vembed_vt = {
    .kind = LADLE_OP_DIST_VOCAB_EMBEDDING,
    .name = "vocabulary-parallel embedding",
    .destroy = ve_destroy,
    .layer_forward = ve_forward,
    .layer_backward = ladle__layer_ids_backward,
    .layer_backward_weight = ve_backward_weight,
    .ctx_init = ladle__dist_ctx_init,
    .ctx_held = ladle__dist_ctx_held,
    .ctx_fini = ladle__dist_ctx_fini,
    .num_params = ladle__dist_num_params,
    .param_at = ladle__dist_param_at,
    .param_info = ve_param_info,
};

/* The checks every rank makes alike, from global facts only. */
static ladle_status validate(const ladle_dist_partitions *p, int ndim,
                             const int64_t *ids_shape, int64_t vocab, int64_t dim,
                             ladle_dtype dtype, ladle_device device, unsigned flags,
                             const char *f)
{
    const ladle_partition *p_w = p->w, *p_y = p->y;
    ladle_status st = ladle__make_check_kind(dtype, flags, f);
    if (st != LADLE_OK)
        return st;
    if (p->x != NULL)
        return ladle__raise(LADLE_ERR_PARTITION, f,
                            "p->x must be NULL: the ids are whole on every rank of p->w "
                            "(the layer takes p->w and p->y only)");
    if (ladle_partition_ndim(p_w) != 1)
        return ladle__raise(LADLE_ERR_PARTITION, f,
                            "p_w has %d dimensions: it must be 1-D (the vocabulary ranks)",
                            ladle_partition_ndim(p_w));
    if (ladle_partition_ndim(p_y) != 1 || ladle_partition_size(p_y) != 1)
        return ladle__raise(LADLE_ERR_PARTITION, f,
                            "p_y must be one rank (a 1-D partition of extent 1), not %d "
                            "dimensions of %d ranks",
                            ladle_partition_ndim(p_y), ladle_partition_size(p_y));
    if (ndim < 1 || ndim >= LADLE_MAX_NDIM)
        return ladle__raise(LADLE_ERR_SHAPE, f, "the ids have %d dimensions: 1 .. %d", ndim,
                            LADLE_MAX_NDIM - 1);
    if (vocab < 1 || dim < 1)
        return ladle__raise(LADLE_ERR_ARG, f,
                            "num_embeddings %lld and embedding_dim %lld must be at least 1",
                            (long long)vocab, (long long)dim);
    if (vocab < ladle_partition_size(p_w))
        return ladle__raise(LADLE_ERR_SHAPE, f,
                            "%lld rows over %d vocabulary ranks: every rank needs at least "
                            "one row",
                            (long long)vocab, ladle_partition_size(p_w));
    int64_t ys[LADLE_MAX_NDIM], numel;
    memcpy(ys, ids_shape, sizeof(int64_t) * (size_t)ndim);
    ys[ndim] = dim;
    st = ladle__check_shape(f, ndim + 1, ys, &numel);
    if (st == LADLE_OK)
        st = ladle__check_shape(f, 2, (int64_t[]){vocab, dim}, &numel);
    for (int d = 0; st == LADLE_OK && d < ndim; d++)
        if (ids_shape[d] < 1)
            st = ladle__raise(LADLE_ERR_SHAPE, f, "ids extent %lld in dimension %d",
                              (long long)ids_shape[d], d);
    return st;
}

/* The layouts (ids whole on every rank of p_w, y whole on p_y), the
 * rank's rows, its shard of the weight initialised as the sequential
 * layer's rows voff .. voff + vr - 1 (normal(0, 1) keyed by the global
 * index) and the buffers. Local. */
static ladle_status plan(ladle__make *m, vembed *v, const ladle_partition *p_w,
                         const ladle_partition *p_y, int ndim, const int64_t *ids_shape,
                         uint64_t seed)
{
    ladle_status st = LADLE_OK;
    int64_t ys[LADLE_MAX_NDIM], ws[2] = {0, v->dim}, ps[LADLE_MAX_NDIM] = {0};
    int p = ladle_partition_size(p_w), r = ladle_partition_rank(p_w);
    memcpy(ys, ids_shape, sizeof(int64_t) * (size_t)ndim);
    ys[ndim] = v->dim;
    v->count = 1;
    for (int d = 0; d < ndim; d++)
        v->count *= ids_shape[d];
    v->member = r >= 0;
    if (v->member) {
        v->voff = ladle__balanced_start(v->vocab, p, r);
        v->vr = ladle__balanced_size(v->vocab, p, r);
        ws[0] = v->vr;
        memcpy(ps, ys, sizeof ys);
    } else {
        ws[1] = 0;
    }
    LADLE_CALL(ladle_layout_create_block(p_w, ndim, ids_shape, &m->lx));
    LADLE_CALL(ladle_layout_create_block(p_y, ndim + 1, ys, &m->ly));
    LADLE_CALL(ladle__dist_param(m->dtype, m->device, 2, ws, &v->base.param[0]));
    LADLE_CALL(ladle__dist_grad(m->dtype, m->device, 2, ws, &v->base.grad[0]));
    LADLE_CALL(ladle__dist_tensor(m->dtype, m->device, ndim + 1, ps, &v->yp));
    LADLE_CALL(ladle__dist_tensor(m->dtype, m->device, ndim + 1, ps, &v->dyp));
    v->base.nparams = 1;
    if (v->member && m->device != LADLE_CPU) { /* the lists a device's layer stages */
        int64_t c = v->count, rs[2] = {v->count, v->dim};
        const ladle_backend *be = NULL;
        LADLE_CALL(ladle__backend_get(m->device, m->func, &be));
        LADLE_CHECK(be->fn->embed_forward != NULL && be->fn->embed_backward != NULL,
                    LADLE_ERR_DEVICE, "the %s backend has no embedding kernels",
                    ladle_device_name(m->device));
        LADLE_CALL(ladle__dist_tensor(LADLE_I64, LADLE_CPU, 1, &c, &v->hids));
        LADLE_CALL(ladle__dist_tensor(LADLE_I64, LADLE_CPU, 1, &c, &v->hpos));
        LADLE_CALL(ladle__dist_tensor(LADLE_I64, LADLE_CPU, 1, &c, &v->hk));
        LADLE_CALL(ladle__dist_tensor(LADLE_I64, m->device, 1, &c, &v->dpos));
        LADLE_CALL(ladle__dist_tensor(LADLE_I64, m->device, 1, &c, &v->dk));
        LADLE_CALL(ladle__dist_tensor(m->dtype, m->device, 2, rs, &v->rows));
    }
    if (v->member) {
        ladle_init_desc d = {.ndim = 2, .gaussian = 1, .scale = 1.0, .seed = seed};
        const ladle_backend *be = NULL;
        LADLE_CALL(ladle__backend_get(m->device, m->func, &be));
        for (int k = 0; k < 2; k++) {
            d.shape[k] = ws[k];
            d.strides[k] = k == 0 ? v->dim : 1;
        }
        d.global[0] = v->vocab;
        d.global[1] = v->dim;
        d.offset[0] = v->voff;
        LADLE_CALL(be->fn->fill_init(be, m->dtype, &d, v->base.param[0]->data));
    }
fail:
    return st;
}

ladle_status ladle_dist_vocab_embedding_create(const ladle_embedding_desc *d,
                                               const ladle_dist_partitions *p,
                                               const int64_t ids_shape[2],
                                               ladle_dtype dtype, ladle_device device,
                                               uint64_t seed, ladle_op **out)
{
    const char *f = __func__;
    ladle_status st = LADLE_OK, local;
    ladle__make m = {f, dtype, device, 0, MPI_COMM_NULL, NULL, NULL};
    ladle_op *op = NULL;
    vembed *v = NULL;
    LADLE_NOT_NULL(d);
    LADLE_CHECK_SIZE(d);
    LADLE_NOT_NULL(p);
    const ladle_partition *p_w = p->w, *p_y = p->y;
    LADLE_NOT_NULL(p_w);
    LADLE_NOT_NULL(p_y);
    LADLE_NOT_NULL(ids_shape);
    LADLE_NOT_NULL(out);
    /* the ids are N x T (a batch of sequences); the layer itself takes any ndim */
    const int ndim = 2;
    int64_t num_embeddings = d->num_embeddings, embedding_dim = d->embedding_dim;
    unsigned flags = d->flags;
    m.flags = flags;
    const ladle_partition *parts[2] = {p_w, p_y};
    local = validate(p, ndim, ids_shape, num_embeddings, embedding_dim, dtype, device,
                     flags, f);
    int64_t args[5 + LADLE_MAX_NDIM] = {ndim, num_embeddings, embedding_dim, (int64_t)dtype,
                                        (int64_t)flags};
    for (int k = 0; k < ndim; k++)
        args[5 + k] = ids_shape[k];
    uint64_t h = ladle__make_hash(LADLE_HASH_INIT, 2, parts, 5 + LADLE_MAX_NDIM, args);
    h = ladle__hash(h, &seed, sizeof seed);
    LADLE_CALL(ladle__make_open(&m, 2, parts, local, h));

    v = ladle__calloc(1, sizeof *v);
    local = ladle__make_alloc_ok(&m, v != NULL);
    if (local == LADLE_OK) {
        v->vocab = num_embeddings;
        v->dim = embedding_dim;
        local = plan(&m, v, p_w, p_y, ndim, ids_shape, seed);
    }
    LADLE_CALL(ladle__make_step(m.comm, local, f));
    int64_t ys[LADLE_MAX_NDIM];
    memcpy(ys, ids_shape, sizeof(int64_t) * (size_t)ndim);
    ys[ndim] = embedding_dim;
    ladle_broadcast_desc rd;
    ladle_broadcast_desc_init(&rd, ndim + 1, ys);
    rd.flags = flags;
    LADLE_CALL(ladle__make_step(
        m.comm, ladle_sum_reduce_create(&rd, p_w, p_y, dtype, device, &v->reduce), f));
    local = ladle__make_layer(&m, LADLE_OK, &vembed_vt, v, NULL, &op);
    if (local == LADLE_OK) {
        v = NULL;
        op->x_ids = 1;
    }
    st = ladle__make_end(&m, &op, local, out);
fail:
    ladle_op_destroy(&op);
    ladle__make_close(&m);
    ladle__parts_free(v, vembed_parts, NULL);
    return st;
}
