/*
 * Distributed batch normalisation (see ladle/distributed.h). x is split over
 * p_x along any dimensions; the ranks holding the same channels (the peers)
 * share statistics within groups: every peer (global), each rank alone
 * (local), or consecutive groups of g peers in partition rank order.
 *
 * Forward (training): each rank computes its count m_r, mean_r and
 * M2_r = sum (x - mean_r)^2 per channel in two passes, the group exchanges
 * them in one all-sum-reduce (rank k of the group writes slot k, the other
 * slots are zero, so the sums are exact) and every member merges the slots
 * in slot order with Chan's formula:
 *   n = n_a + n_b,  d = mean_b - mean_a,
 *   mean = mean_a + d n_b / n,  M2 = M2_a + M2_b + d^2 n_a n_b / n
 * so all members get bitwise the same mean and variance, correct for any
 * counts. Backward: one all-sum-reduce of the per-channel sums of dy and
 * dy (x - mean); dx as in the sequential layer with the group's sums and
 * count. gamma and beta are replicated on every peer: backward_weight adds
 * the rank's own sums, ladle_layer_sync_gradients sums them over the peers.
 */
#include <math.h>
#include <string.h>

#include "layers/distributed/dist.h"
#include "layers/sequential/bn_impl.h"

typedef struct dbn {
    /* param/grad: gamma and beta (there is no local layer); sync[0]: the
     * sum of both gradients over the peers, with gid[0] and cnt[0] its
     * groups (by channel coordinate) and counts */
    ladle__dist_base base;
    int64_t c, c_off;   /* this rank's channels and the first one */
    int64_t n, inner;   /* its batch and positions per channel */
    int group, slot;    /* statistics group size and this rank's slot */
    double eps, momentum;
    int affine, track;
    int64_t batches_seen;
    ladle_op *stats, *dred; /* all-sum-reduces over the group (NULL alone) */
    ladle_tensor *running_mean, *running_var;
    ladle_tensor *slots; /* group x (1 + 2c) doubles */
    ladle_tensor *red;   /* 2c doubles */
    /* host, c each: the statistics, the coefficients, gamma and beta (or 1
     * and 0), two more per-channel values, a stage for moving a per-channel
     * tensor; then the host side of slots (group x (1 + 2c) doubles) */
    double *mean, *invstd, *var, *ca, *cb, *cc, *g, *bt, *t0, *t1, *stage, *hslots;
    double *dev; /* device: the bn_* slots' workspace (layers/sequential/bn_impl.h) */
} dbn;

/* per microbatch, in the ctx's impl (host memory): the statistics used
 * and the backward's sums */
typedef struct saved {
    int batch_stats;
    double count;        /* the group's values per channel */
    const void *sums_of; /* the dy the sums belong to */
    int group_sums;      /* the group's sums are in place */
    double v[];          /* mean, invstd, own sdy, own sdyx, group sdy, group sdyx */
} saved;

static const ladle__part dbn_parts[] = {
    LADLE__PART_DEVICE(dbn, dev),         LADLE__PART_DIST_BASE(dbn),
    LADLE__PART_OP(dbn, stats),           LADLE__PART_OP(dbn, dred),
    LADLE__PART_TENSOR(dbn, running_mean), LADLE__PART_TENSOR(dbn, running_var),
    LADLE__PART_TENSOR(dbn, slots),       LADLE__PART_TENSOR(dbn, red),
    LADLE__PART_HOST(dbn, mean),          LADLE__PARTS_END};

static int member(const ladle_op *op)
{
    return ladle_partition_active(ladle_layout_partition(op->x_layout));
}

/* The group's mean, variance (biased) and count. */
static ladle_status statistics(ladle_op *op, const ladle_tensor *x, double *count)
{
    ladle_status st = LADLE_OK;
    dbn *v = op->impl;
    int64_t c = v->c, w = 1 + 2 * c;
    size_t bytes = sizeof(double) * (size_t)(v->group * w);
    double m = (double)(v->n * v->inner), *s = v->hslots;
    /* this rank's mean and squared deviations, two passes */
    LADLE_CALL(ladle__bn_moment(op, v->n, c, v->inner, x->data, NULL, v->mean, v->dev));
    for (int64_t ch = 0; ch < c; ch++)
        v->mean[ch] = m > 0 ? v->mean[ch] / m : 0.0;
    LADLE_CALL(ladle__bn_moment(op, v->n, c, v->inner, x->data, v->mean, v->var, v->dev));
    if (v->group == 1) {
        *count = m;
        return LADLE_OK;
    }
    /* the slots are laid out on the host and reduced on the device */
    memset(s, 0, bytes);
    double *mine = s + v->slot * w;
    mine[0] = m;
    memcpy(mine + 1, v->mean, sizeof(double) * (size_t)c);
    memcpy(mine + 1 + c, v->var, sizeof(double) * (size_t)c);
    LADLE_CALL(ladle__bn_send(op->be, bytes, s, v->slots->data));
    LADLE_CALL(ladle_op_forward(v->stats, v->slots, v->slots));
    LADLE_CALL(ladle__bn_fetch(op->be, bytes, v->slots->data, s));
    /* Chan's merge in slot order: the same arithmetic on every member */
    double n = s[0];
    memcpy(v->mean, s + 1, sizeof(double) * (size_t)c);
    memcpy(v->var, s + 1 + c, sizeof(double) * (size_t)c);
    for (int k = 1; k < v->group; k++) {
        const double *b = s + k * w;
        double nb = b[0], nab = n + nb;
        if (nb == 0)
            continue;
        for (int64_t ch = 0; ch < c; ch++) {
            double d = b[1 + ch] - v->mean[ch];
            v->mean[ch] += d * nb / nab;
            v->var[ch] += b[1 + c + ch] + d * d * n * nb / nab;
        }
        n = nab;
    }
    *count = n;
fail:
    return st;
}

static ladle_status update_running(ladle_op *op, double count)
{
    dbn *v = op->impl;
    return ladle__bn_update_running(op->be, v->c, v->momentum, &v->batches_seen, v->mean,
                                    v->var, count, v->running_mean, v->running_var, v->t0,
                                    v->t1, v->stage);
}

/* gamma and beta (beta only if asked) into v->g and v->bt, 1 and 0 without
 * them */
static ladle_status gamma_beta(ladle_op *op, int beta)
{
    ladle_status st = LADLE_OK;
    dbn *v = op->impl;
    if (!v->affine) {
        for (int64_t ch = 0; ch < v->c; ch++) {
            v->g[ch] = 1.0;
            v->bt[ch] = 0.0;
        }
        return LADLE_OK;
    }
    LADLE_CALL(ladle__bn_read(op->be, v->base.param[0], v->c, v->stage, v->g));
    if (beta)
        LADLE_CALL(ladle__bn_read(op->be, v->base.param[1], v->c, v->stage, v->bt));
fail:
    return st;
}

static ladle_status dbn_forward(ladle_op *op, ladle_ctx *ctx, const ladle_tensor *x,
                                ladle_tensor *y, int64_t nb)
{
    ladle_status st = LADLE_OK;
    dbn *v = op->impl;
    int64_t c = v->c;
    double count = 0;
    int batch_stats = op->training || !v->track;
    (void)nb;
    if (!member(op))
        return LADLE_OK;
    if (batch_stats) {
        LADLE_CALL(statistics(op, x, &count));
        if (op->training && count <= 1)
            return ladle__raise(LADLE_ERR_SHAPE, "ladle_layer_forward",
                                "batch norm in training needs more than one value per channel");
        for (int64_t ch = 0; ch < c; ch++) {
            v->var[ch] = count > 0 ? v->var[ch] / count : 0.0;
            v->invstd[ch] = 1.0 / sqrt(v->var[ch] + v->eps);
        }
        if (op->training && v->track)
            LADLE_CALL(update_running(op, count));
    } else {
        LADLE_CALL(ladle__bn_read(op->be, v->running_mean, c, v->stage, v->mean));
        LADLE_CALL(ladle__bn_read(op->be, v->running_var, c, v->stage, v->t1));
        for (int64_t ch = 0; ch < c; ch++)
            v->invstd[ch] = 1.0 / sqrt(v->t1[ch] + v->eps);
    }
    LADLE_CALL(gamma_beta(op, 1));
    for (int64_t ch = 0; ch < c; ch++) {
        v->ca[ch] = v->g[ch] * v->invstd[ch];
        v->cc[ch] = v->bt[ch] - v->mean[ch] * v->ca[ch];
    }
    LADLE_CALL(ladle__bn_affine(op, v->n, c, v->inner, x->data, NULL, y->data, v->ca, NULL,
                                v->cc, v->dev));
    if (ctx) {
        saved *sv = ctx->impl;
        sv->batch_stats = batch_stats;
        sv->count = count;
        sv->sums_of = NULL;
        sv->group_sums = 0;
        memcpy(sv->v, v->mean, sizeof(double) * (size_t)c);
        memcpy(sv->v + c, v->invstd, sizeof(double) * (size_t)c);
    }
fail:
    return st;
}

/* This rank's sums of dy and dy x-hat (once per ctx and dy), and with
 * group != 0 the group's. */
static ladle_status sums(ladle_op *op, ladle_ctx *ctx, const ladle_tensor *dy, int group)
{
    ladle_status st = LADLE_OK;
    dbn *v = op->impl;
    saved *sv = ctx->impl;
    int64_t c = v->c;
    size_t bytes = sizeof(double) * (size_t)(2 * c);
    double *mean = sv->v, *invstd = mean + c, *own = invstd + c, *grp = own + 2 * c;
    if (sv->sums_of != dy->data) {
        LADLE_CALL(ladle__bn_dsums(op, v->n, c, v->inner, ctx->x->data, dy->data, mean, own,
                                   own + c, v->dev));
        for (int64_t ch = 0; ch < c; ch++)
            own[c + ch] *= invstd[ch];
        sv->sums_of = dy->data;
        sv->group_sums = 0;
    }
    if (group && !sv->group_sums) {
        memcpy(grp, own, bytes);
        if (v->dred) {
            LADLE_CALL(ladle__bn_send(op->be, bytes, own, v->red->data));
            LADLE_CALL(ladle_op_forward(v->dred, v->red, v->red));
            LADLE_CALL(ladle__bn_fetch(op->be, bytes, v->red->data, grp));
        }
        sv->group_sums = 1;
    }
fail:
    return st;
}

static ladle_status dbn_backward(ladle_op *op, ladle_ctx *ctx, const ladle_tensor *dy,
                                 ladle_tensor *dx, int64_t nb)
{
    ladle_status st = LADLE_OK;
    dbn *v = op->impl;
    saved *sv = ctx->impl;
    int64_t c = v->c;
    const double *mean = sv->v, *invstd = mean + c;
    (void)nb;
    if (dx == NULL || !member(op))
        return LADLE_OK;
    LADLE_CALL(gamma_beta(op, 0));
    if (!sv->batch_stats) {
        for (int64_t ch = 0; ch < c; ch++) {
            v->ca[ch] = v->g[ch] * invstd[ch];
            v->cc[ch] = 0;
        }
        return ladle__bn_affine(op, v->n, c, v->inner, dy->data, NULL, dx->data, v->ca, NULL,
                                v->cc, v->dev);
    }
    LADLE_CALL(sums(op, ctx, dy, 1));
    const double *sdy = sv->v + 4 * c, *sdyx = sdy + c;
    double m = sv->count;
    for (int64_t ch = 0; ch < c; ch++) {
        double k = v->g[ch] * invstd[ch] / m;
        double b = -k * invstd[ch] * sdyx[ch];
        v->ca[ch] = k * m;
        v->cb[ch] = b;
        v->cc[ch] = -k * sdy[ch] - b * mean[ch];
    }
    LADLE_CALL(ladle__bn_affine(op, v->n, c, v->inner, dy->data, ctx->x->data, dx->data, v->ca,
                                v->cb, v->cc, v->dev));
fail:
    return st;
}

static ladle_status dbn_backward_weight(ladle_op *op, ladle_ctx *ctx, const ladle_tensor *dy,
                                        int64_t nb)
{
    ladle_status st = LADLE_OK;
    dbn *v = op->impl;
    saved *sv = ctx->impl;
    int64_t c = v->c;
    (void)nb;
    if (!member(op))
        return LADLE_OK;
    LADLE_CALL(sums(op, ctx, dy, 0));
    const double *sdy = sv->v + 2 * c, *sdyx = sdy + c;
    /* the rank's own sums accumulate into the replicated gradients */
    LADLE_CALL(ladle__bn_read(op->be, v->base.grad[0], c, v->stage, v->t0));
    LADLE_CALL(ladle__bn_read(op->be, v->base.grad[1], c, v->stage, v->t1));
    for (int64_t ch = 0; ch < c; ch++) {
        v->t0[ch] += sdyx[ch];
        v->t1[ch] += sdy[ch];
    }
    LADLE_CALL(ladle__bn_write(op->be, v->base.grad[0], c, v->t0, v->stage));
    LADLE_CALL(ladle__bn_write(op->be, v->base.grad[1], c, v->t1, v->stage));
fail:
    return st;
}

static ladle_status dbn_sync(ladle_op *op)
{
    dbn *v = op->impl;
    return ladle__dist_channel_sync(&v->base, v->affine ? 2 : 0);
}

static void dbn_param_info(const ladle_op *op, int i, ladle__pinfo *info)
{
    const dbn *v = op->impl;
    (void)i;
    ladle__dist_channel_param_info(op, &v->base, v->c_off, info);
}

static void dbn_destroy(ladle_op *op) { ladle__parts_free(op->impl, dbn_parts, op->be); }

static ladle_status dbn_ctx_init(const ladle_op *op, ladle_ctx *ctx)
{
    const dbn *v = op->impl;
    ctx->impl = ladle__calloc(1, sizeof(saved) + sizeof(double) * (size_t)(6 * v->c + 1));
    if (ctx->impl == NULL)
        return ladle__raise(LADLE_ERR_ALLOC, "ladle_ctx_create", "out of memory");
    return LADLE_OK;
}

static void dbn_ctx_fini(ladle_ctx *ctx)
{
    ladle__free(ctx->impl);
    ctx->impl = NULL;
}

static int dbn_num_buffers(const ladle_op *op) { return ((const dbn *)op->impl)->track ? 2 : 0; }

static ladle_tensor *dbn_buffer_at(const ladle_op *op, int i, ladle__pinfo *info)
{
    const dbn *v = op->impl;
    memset(info, 0, sizeof *info);
    dbn_param_info(op, 0, info); /* the channel block, as gamma's */
    info->sync = NULL;
    info->sync_p = NULL;
    return i == 0 ? v->running_mean : v->running_var;
}

static const ladle_op_vtable dbn_vt = {
    .kind = LADLE_OP_DIST_BATCHNORM,
    .name = "distributed batch norm",
    .destroy = dbn_destroy,
    .layer_forward = dbn_forward,
    .layer_backward = dbn_backward,
    .layer_backward_weight = dbn_backward_weight,
    .ctx_init = dbn_ctx_init,
    .ctx_fini = dbn_ctx_fini,
    .num_params = ladle__dist_num_params,
    .param_at = ladle__dist_param_at,
    .param_info = dbn_param_info,
    .sync_grads = dbn_sync,
    .num_buffers = dbn_num_buffers,
    .buffer_at = dbn_buffer_at,
};

/* The checks every rank makes alike; *peers gets the ranks that share
 * each channel block and *group the statistics group's size. */
static ladle_status validate(const ladle_batchnorm_desc *d, const ladle_partition *p_x,
                             int ndim, const int64_t *x_shape, ladle_dtype dtype,
                             int *peers, int *group, const char *f)
{
    ladle_status local = LADLE_OK;
    ladle_bn_sync sync = d->sync;
    unsigned flags = d->flags;
    int size = ladle_partition_size(p_x);
    const int *shape = ladle_partition_shape(p_x);
    if (!ladle__is_real(dtype))
        local = ladle__raise(LADLE_ERR_DTYPE, f, "dtype %s is not f32 or f64",
                             ladle_dtype_name(dtype));
    else if (ndim < 2 || ndim > 5)
        local = ladle__raise(LADLE_ERR_PARTITION, f,
                             "p_x has %d dimensions: batch norm takes 2 to 5", ndim);
    else if (x_shape[1] != d->num_features || !(d->eps > 0 && isfinite(d->eps)) ||
             !(d->momentum <= 1))
        local = ladle__raise(x_shape[1] != d->num_features ? LADLE_ERR_SHAPE : LADLE_ERR_ARG, f,
                             "x has %lld channels for %lld features (eps %g, momentum %g)",
                             (long long)x_shape[1], (long long)d->num_features, d->eps,
                             d->momentum);
    else if (flags & ~(unsigned)LADLE_CHECKED)
        local = ladle__raise(LADLE_ERR_ARG, f, "unknown flags 0x%x", flags);
    if (local != LADLE_OK)
        return local;
    for (int i = 0; i < ndim; i++)
        if (x_shape[i] < shape[i])
            local = ladle__raise(LADLE_ERR_SHAPE, f,
                                 "x extent %lld in dimension %d is below the grid's %d",
                                 (long long)x_shape[i], i, shape[i]);
    *peers = size / shape[1];
    *group = sync == LADLE_BN_SYNC_GLOBAL  ? *peers
             : sync == LADLE_BN_SYNC_LOCAL ? 1
                                           : d->group_size;
    if (local == LADLE_OK &&
        (sync < LADLE_BN_SYNC_GLOBAL || sync > LADLE_BN_SYNC_GROUP || *group < 1 ||
         *peers % *group != 0))
        local = ladle__raise(LADLE_ERR_ARG, f,
                             "groups of %d do not divide the %d ranks that share each "
                             "channel block (sync mode %d)",
                             *group, *peers, (int)sync);
    return local;
}

/* x's layout, this rank's block, and the groups: the peers of a channel
 * block in partition rank order, cut into consecutive groups of `group`
 * (gid; cid is the channel block). Local. */
static ladle_status plan_groups(ladle__make *m, dbn *v, const ladle_batchnorm_desc *d,
                                const ladle_partition *p_x, int ndim,
                                const int64_t *x_shape, int peers, int *gid, int *cid)
{
    ladle_status st = LADLE_OK;
    int size = ladle_partition_size(p_x), group = v->group, c[LADLE_MAX_NDIM];
    int *seen = NULL;
    int64_t off[LADLE_MAX_NDIM], box[LADLE_MAX_NDIM];
    LADLE_CALL(ladle_layout_create_balanced(p_x, ndim, x_shape, &m->lx));
    seen = ladle__calloc((size_t)ladle_partition_shape(p_x)[1], sizeof(int));
    LADLE_MAKE_CHECK(m, seen != NULL, LADLE_ERR_ALLOC, "out of memory");
    for (int r = 0; r < size; r++) {
        ladle_partition_coords_of(p_x, r, c);
        int k = seen[c[1]]++;
        cid[r] = c[1];
        gid[r] = c[1] * (peers / group) + k / group;
        if (r == ladle_partition_rank(p_x))
            v->slot = k % group;
    }
    v->eps = d->eps;
    v->momentum = d->momentum;
    v->affine = d->affine;
    v->track = d->track_running_stats;
    v->base.nparams = d->affine ? 2 : 0;
    ladle_layout_box(m->lx, LADLE_SELF, off, box);
    v->c = box[1];
    v->c_off = off[1];
    v->n = box[0];
    v->inner = 1;
    for (int i = 2; i < ndim; i++)
        v->inner *= box[i];
fail:
    ladle__free(seen);
    return st;
}

/* counts[r]: rank r's channels times per + base. */
static void channel_counts(const ladle_layout *lx, int size, int64_t per, int64_t base,
                           int64_t *counts)
{
    int64_t cbox[LADLE_MAX_NDIM];
    for (int r = 0; r < size; r++) {
        ladle_layout_box(lx, r, NULL, cbox);
        counts[r] = base + per * cbox[1];
    }
}

/* The group's reductions (the statistics and the backward's sums travel in
 * double whatever the dtype) and the sum of gamma's and beta's gradients
 * over the peers, which takes cid and counts (then NULL). */
static ladle_status plan_reductions(ladle__make *m, dbn *v, const ladle_partition *p_x,
                                    const int *gid, int **cid, int64_t **counts)
{
    ladle_status st = LADLE_OK;
    const char *f = m->func;
    int size = ladle_partition_size(p_x), group = v->group;
    if (group > 1) {
        channel_counts(m->lx, size, 2 * group, group, *counts);
        LADLE_CALL(
            ladle__make_step(m->comm,
                             ladle__all_sum_reduce_groups(p_x, gid, *counts, LADLE_F64,
                                                          m->device, m->flags, &v->stats),
                             f));
        channel_counts(m->lx, size, 2, 0, *counts);
        LADLE_CALL(
            ladle__make_step(m->comm,
                             ladle__all_sum_reduce_groups(p_x, gid, *counts, LADLE_F64,
                                                          m->device, m->flags, &v->dred),
                             f));
    }
    if (v->affine)
        st = ladle__dist_channel_sync_plan(m, &v->base, p_x, cid, counts);
fail:
    return st;
}

/* gamma (1) and beta (0) with their gradients, the running statistics (0
 * and 1), the reductions' buffers and the host arrays. Local. */
static ladle_status allocate(ladle__make *m, dbn *v)
{
    ladle_status st = LADLE_OK;
    ladle_dtype dt = m->dtype;
    ladle_device dev = m->device;
    int64_t cs = v->c, sl = (int64_t)v->group * (1 + 2 * v->c), rs = 2 * v->c;
    for (int i = 0; i < 2; i++) {
        LADLE_CALL(ladle__dist_param(dt, dev, 1, &cs, &v->base.param[i]));
        LADLE_CALL(ladle__dist_grad(dt, dev, 1, &cs, &v->base.grad[i]));
    }
    LADLE_CALL(ladle_tensor_fill(v->base.param[0], 1.0));
    LADLE_CALL(ladle__dist_tensor(dt, dev, 1, &cs, &v->running_mean));
    LADLE_CALL(ladle__dist_tensor(dt, dev, 1, &cs, &v->running_var));
    LADLE_CALL(ladle_tensor_fill(v->running_var, 1.0));
    LADLE_CALL(ladle__dist_tensor(LADLE_F64, dev, 1, &sl, &v->slots));
    LADLE_CALL(ladle__dist_tensor(LADLE_F64, dev, 1, &rs, &v->red));
    v->mean = ladle__calloc((size_t)(11 * cs + sl + 1), sizeof(double));
    LADLE_MAKE_CHECK(m, v->mean != NULL, LADLE_ERR_ALLOC, "out of memory");
    double **host[] = {&v->invstd, &v->var, &v->ca, &v->cb,    &v->cc,    &v->g,
                       &v->bt,     &v->t0,  &v->t1, &v->stage, &v->hslots};
    for (int i = 0; i < 11; i++)
        *host[i] = v->mean + (i + 1) * cs;
fail:
    return st;
}

/* The arguments every rank of p_x must pass alike (group: the size of the
 * statistics' groups). */
static uint64_t args_hash(const ladle_batchnorm_desc *d, const ladle_partition *const *parts,
                          int ndim, const int64_t *x_shape, int group, ladle_dtype dtype)
{
    int64_t args[12] = {ndim,
                        d->sync,
                        group,
                        (int64_t)dtype,
                        (int64_t)d->flags,
                        d->affine,
                        d->track_running_stats};
    for (int i = 0; i < ndim && i < 5; i++)
        args[7 + i] = x_shape[i];
    uint64_t h = ladle__make_hash(LADLE_HASH_INIT, 1, parts, 12, args);
    h = ladle__hash(h, &d->eps, sizeof d->eps);
    return ladle__hash(h, &d->momentum, sizeof d->momentum);
}

ladle_status ladle_dist_batchnorm_create(const ladle_batchnorm_desc *d,
                                         const ladle_partition *p_x,
                                         const int64_t x_shape[], ladle_dtype dtype,
                                         ladle_device device, ladle_op **out)
{
    const char *f = __func__;
    ladle_status st = LADLE_OK, local = LADLE_OK;
    ladle__make m = {f, dtype, device, 0, MPI_COMM_NULL, NULL, NULL};
    ladle_op *op = NULL;
    dbn *v = NULL;
    int *gid = NULL, *cid = NULL;
    int64_t *counts = NULL;
    LADLE_NOT_NULL(d);
    LADLE_CHECK_SIZE(d);
    LADLE_NOT_NULL(p_x);
    LADLE_NOT_NULL(x_shape);
    LADLE_NOT_NULL(out);
    const ladle_partition *parts[1] = {p_x};
    int size = ladle_partition_size(p_x), peers = 0, group = 1;
    int ndim = ladle_partition_ndim(p_x);
    local = validate(d, p_x, ndim, x_shape, dtype, &peers, &group, f);
    unsigned flags = d->flags;
    m.flags = flags;
    LADLE_CALL(ladle__make_open(&m, 1, parts, local,
                                args_hash(d, parts, ndim, x_shape, group, dtype)));

    v = ladle__calloc(1, sizeof *v);
    gid = ladle__calloc((size_t)size, sizeof(int));
    cid = ladle__calloc((size_t)size, sizeof(int));
    counts = ladle__calloc((size_t)size, sizeof(int64_t));
    local = ladle__make_alloc_ok(&m, v && gid && cid && counts);
    if (local == LADLE_OK) {
        v->group = group;
        local = plan_groups(&m, v, d, p_x, ndim, x_shape, peers, gid, cid);
    }
    LADLE_CALL(ladle__make_step(m.comm, local, f));
    LADLE_CALL(plan_reductions(&m, v, p_x, gid, &cid, &counts));
    local = allocate(&m, v);
    if (local == LADLE_OK)
        m.ly = ladle__layout_retain(m.lx);
    local = ladle__make_layer(&m, local, &dbn_vt, v, NULL, &op);
    if (local == LADLE_OK) {
        void *dv = NULL;
        local = op->be->fn->alloc(op->be, sizeof(double) * (size_t)(LADLE__BN_NDEV * v->c), &dv);
        v->dev = dv;
        v = NULL;
    }
    st = ladle__make_end(&m, &op, local, out);
fail:
    ladle_op_destroy(&op);
    ladle__make_close(&m);
    ladle__parts_free(v, dbn_parts, NULL);
    ladle__free(gid);
    ladle__free(cid);
    ladle__free(counts);
    return st;
}
