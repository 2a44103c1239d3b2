/*
 * Batch normalisation over every dimension but the channels. Statistics are
 * two-pass (mean, then the mean of squared deviations), summed in blocks in
 * the data type and in double across blocks. The ctx keeps mean and 1/std
 * per channel; x-hat is recomputed from the saved x. With m values per
 * channel:
 *   training  dx = gamma / std / m * (m dy - sum(dy) - x-hat sum(dy x-hat))
 *   running   dx = gamma / std_running * dy
 *   dgamma = sum(dy x-hat),  dbeta = sum(dy)
 * The two sums serve backward and backward_weight alike: whichever comes
 * first computes them into the ctx, the other reuses them (same dy).
 */
#include <math.h>
#include <string.h>

#include "layers/sequential/bn_impl.h"
#include "layers/sequential/layer_impl.h"

typedef struct bn {
    int64_t c, inner; /* channels, and the positions per channel of one sample */
    double eps, momentum;
    int affine, track;
    int64_t batches_seen;
    ladle_tensor *running_mean, *running_var;
    /* host workspace, c each: mean, 1/std, variance, the coefficients of
     * the elementwise passes, gamma and beta (or 1 and 0), the running
     * statistics, and a stage for moving a per-channel tensor */
    double *mean, *invstd, *var, *ca, *cb, *cc, *g, *bt, *rm, *rv, *stage;
    /* device workspace, c doubles each: mean, two sums, and a, b, k of
     * bn_affine */
    double *dev;
} bn;

/* What one forward records, in the ctx's impl (host memory): per channel
 * mean and 1/std, whether they are batch statistics, and the backward's
 * sums once computed (for dy). */
typedef struct saved {
    int batch_stats;
    const void *sums_of; /* the dy the sums belong to; NULL when none */
    double stats[];      /* mean[c], invstd[c], sum(dy)[c], sum(dy x-hat)[c] */
} saved;

/* The to_host and to_device copies are queued on a device; batch norm's
 * host arrays are read or rewritten right after them, so both wait. */
ladle_status ladle__bn_fetch(const ladle_backend *be, size_t bytes, const void *dev,
                             void *host)
{
    ladle_status st = LADLE_OK;
    LADLE_CALL(be->fn->to_host(be, bytes, dev, host));
    LADLE_CALL(be->fn->synchronize(be));
fail:
    return st;
}

ladle_status ladle__bn_send(const ladle_backend *be, size_t bytes, const void *host,
                            void *dev)
{
    ladle_status st = LADLE_OK;
    LADLE_CALL(be->fn->to_device(be, bytes, host, dev));
    LADLE_CALL(be->fn->synchronize(be));
fail:
    return st;
}

ladle_status ladle__bn_read(const ladle_backend *be, const ladle_tensor *t, int64_t c,
                            void *stage, double *out)
{
    ladle_status st = LADLE_OK;
    LADLE_CALL(ladle__bn_fetch(be, (size_t)c * ladle_dtype_size(t->dtype), t->data, stage));
    for (int64_t i = 0; i < c; i++)
        out[i] = t->dtype == LADLE_F32 ? ((const float *)stage)[i] : ((const double *)stage)[i];
fail:
    return st;
}

ladle_status ladle__bn_write(const ladle_backend *be, ladle_tensor *t, int64_t c,
                             const double *in, void *stage)
{
    for (int64_t i = 0; i < c; i++)
        if (t->dtype == LADLE_F32)
            ((float *)stage)[i] = (float)in[i];
        else
            ((double *)stage)[i] = in[i];
    return ladle__bn_send(be, (size_t)c * ladle_dtype_size(t->dtype), stage, t->data);
}

ladle_status ladle__bn_moment(const ladle_op *op, int64_t n, int64_t c, int64_t inner,
                              const void *x, const double *mean, double *s, double *dev)
{
    ladle_status st = LADLE_OK;
    const ladle_backend *be = op->be;
    size_t bytes = sizeof(double) * (size_t)c;
    double *dmean = dev + LADLE__BN_DMEAN * c, *ds = dev + LADLE__BN_DS1 * c;
    if (mean)
        LADLE_CALL(ladle__bn_send(be, bytes, mean, dmean));
    LADLE_CALL(be->fn->bn_moment(be, op->dtype, n, c, inner, x, mean ? dmean : NULL, ds));
    LADLE_CALL(ladle__bn_fetch(be, bytes, ds, s));
fail:
    return st;
}

ladle_status ladle__bn_dsums(const ladle_op *op, int64_t n, int64_t c, int64_t inner,
                             const void *x, const void *dy, const double *mean, double *s1,
                             double *s2, double *dev)
{
    ladle_status st = LADLE_OK;
    const ladle_backend *be = op->be;
    size_t bytes = sizeof(double) * (size_t)c;
    double *dmean = dev + LADLE__BN_DMEAN * c, *ds1 = dev + LADLE__BN_DS1 * c,
           *ds2 = dev + LADLE__BN_DS2 * c;
    LADLE_CALL(ladle__bn_send(be, bytes, mean, dmean));
    LADLE_CALL(be->fn->bn_dsums(be, op->dtype, n, c, inner, x, dy, dmean, ds1, ds2));
    LADLE_CALL(ladle__bn_fetch(be, bytes, ds1, s1));
    LADLE_CALL(ladle__bn_fetch(be, bytes, ds2, s2));
fail:
    return st;
}

ladle_status ladle__bn_affine(const ladle_op *op, int64_t n, int64_t c, int64_t inner,
                              const void *u, const void *w, void *out, const double *a,
                              const double *b, const double *k, double *dev)
{
    ladle_status st = LADLE_OK;
    const ladle_backend *be = op->be;
    size_t bytes = sizeof(double) * (size_t)c;
    double *da = dev + LADLE__BN_DA * c, *db = dev + LADLE__BN_DB * c,
           *dk = dev + LADLE__BN_DK * c;
    LADLE_CALL(ladle__bn_send(be, bytes, a, da));
    if (b)
        LADLE_CALL(ladle__bn_send(be, bytes, b, db));
    LADLE_CALL(ladle__bn_send(be, bytes, k, dk));
    LADLE_CALL(be->fn->bn_affine(be, op->dtype, n, c, inner, u, w, out, da, b ? db : NULL, dk));
fail:
    return st;
}

static ladle_status moment(const ladle_op *op, const ladle_tensor *x, int64_t n,
                           const double *mean, double *s)
{
    const bn *v = op->impl;
    return ladle__bn_moment(op, n, v->c, v->inner, x->data, mean, s, v->dev);
}

static ladle_status affine(const ladle_op *op, const ladle_tensor *u, const ladle_tensor *w,
                           ladle_tensor *out, int64_t n, const double *a, const double *b,
                           const double *k)
{
    const bn *v = op->impl;
    return ladle__bn_affine(op, n, v->c, v->inner, u->data, w ? w->data : NULL, out->data, a,
                            b, k, v->dev);
}

ladle_status ladle__bn_update_running(const ladle_backend *be, int64_t c, double momentum,
                                      int64_t *batches_seen, const double *mean,
                                      const double *var, double count,
                                      ladle_tensor *running_mean, ladle_tensor *running_var,
                                      double *rm, double *rv, void *stage)
{
    ladle_status st = LADLE_OK;
    double mom = momentum;
    ++*batches_seen;
    if (mom < 0)
        mom = 1.0 / (double)*batches_seen; /* a cumulative average */
    LADLE_CALL(ladle__bn_read(be, running_mean, c, stage, rm));
    LADLE_CALL(ladle__bn_read(be, running_var, c, stage, rv));
    for (int64_t ch = 0; ch < c; ch++) {
        rm[ch] = (1 - mom) * rm[ch] + mom * mean[ch];
        rv[ch] = (1 - mom) * rv[ch] + mom * var[ch] * count / (count - 1);
    }
    LADLE_CALL(ladle__bn_write(be, running_mean, c, rm, stage));
    LADLE_CALL(ladle__bn_write(be, running_var, c, rv, stage));
fail:
    return st;
}

static ladle_status update_running(const ladle_op *op, bn *v, double m)
{
    return ladle__bn_update_running(op->be, v->c, v->momentum, &v->batches_seen, v->mean,
                                    v->var, m, v->running_mean, v->running_var, v->rm, v->rv,
                                    v->stage);
}

/* gamma and beta into v->g and v->bt (1 and 0 without them) */
static ladle_status gamma_beta(const ladle_op *op, bn *v, int beta)
{
    ladle_status st = LADLE_OK;
    if (!v->affine) {
        for (int64_t ch = 0; ch < v->c; ch++) {
            v->g[ch] = 1.0;
            v->bt[ch] = 0.0;
        }
        return LADLE_OK;
    }
    LADLE_CALL(ladle__bn_read(op->be, op->params[0], v->c, v->stage, v->g));
    if (beta)
        LADLE_CALL(ladle__bn_read(op->be, op->params[1], v->c, v->stage, v->bt));
fail:
    return st;
}

static ladle_status bn_forward(ladle_op *op, ladle_ctx *ctx, const ladle_tensor *x,
                               ladle_tensor *y, int64_t n)
{
    ladle_status st = LADLE_OK;
    bn *v = op->impl;
    double m = (double)(n * v->inner);
    int batch_stats = op->training || !v->track;
    if (batch_stats) {
        if (op->training && m <= 1)
            return ladle__raise(LADLE_ERR_SHAPE, "ladle_layer_forward",
                                "batch norm in training needs more than one value per channel");
        /* two passes: the mean, then the mean squared deviation */
        LADLE_CALL(moment(op, x, n, NULL, v->mean));
        for (int64_t ch = 0; ch < v->c; ch++)
            v->mean[ch] /= m;
        LADLE_CALL(moment(op, x, n, v->mean, v->var));
        for (int64_t ch = 0; ch < v->c; ch++) {
            v->var[ch] /= m;
            v->invstd[ch] = 1.0 / sqrt(v->var[ch] + v->eps);
        }
        if (op->training && v->track)
            LADLE_CALL(update_running(op, v, m));
    } else {
        LADLE_CALL(ladle__bn_read(op->be, v->running_mean, v->c, v->stage, v->mean));
        LADLE_CALL(ladle__bn_read(op->be, v->running_var, v->c, v->stage, v->rv));
        for (int64_t ch = 0; ch < v->c; ch++)
            v->invstd[ch] = 1.0 / sqrt(v->rv[ch] + v->eps);
    }
    /* y = scale x + shift */
    LADLE_CALL(gamma_beta(op, v, 1));
    for (int64_t ch = 0; ch < v->c; ch++) {
        v->ca[ch] = v->g[ch] * v->invstd[ch];
        v->cc[ch] = v->bt[ch] - v->mean[ch] * v->ca[ch];
    }
    LADLE_CALL(affine(op, x, NULL, y, n, v->ca, NULL, v->cc));
    if (ctx) {
        saved *sv = ctx->impl;
        sv->batch_stats = batch_stats;
        sv->sums_of = NULL;
        memcpy(sv->stats, v->mean, sizeof(double) * (size_t)v->c);
        memcpy(sv->stats + v->c, v->invstd, sizeof(double) * (size_t)v->c);
    }
fail:
    return st;
}

/* Per channel sums of dy and dy * x-hat, computed once per ctx and dy: the
 * input and the weight gradient both need them. */
static ladle_status sums(const ladle_op *op, ladle_ctx *ctx, const ladle_tensor *dy, int64_t n,
                         const double **out)
{
    ladle_status st = LADLE_OK;
    const bn *v = op->impl;
    saved *sv = ctx->impl;
    double *mean = sv->stats, *invstd = mean + v->c, *sdy = invstd + v->c, *sdyx = sdy + v->c;
    if (sv->sums_of != dy->data) {
        LADLE_CALL(ladle__bn_dsums(op, n, v->c, v->inner, ctx->x->data, dy->data, mean, sdy,
                                   sdyx, v->dev));
        for (int64_t ch = 0; ch < v->c; ch++)
            sdyx[ch] *= invstd[ch];
        sv->sums_of = dy->data;
    }
    *out = sdy;
fail:
    return st;
}

static ladle_status bn_backward(ladle_op *op, ladle_ctx *ctx, const ladle_tensor *dy,
                                ladle_tensor *dx, int64_t n)
{
    ladle_status st = LADLE_OK;
    bn *v = op->impl;
    const saved *sv = ctx->impl;
    const double *mean = sv->stats, *invstd = mean + v->c, *sdy, *sdyx;
    double m = (double)(n * v->inner);
    if (dx == NULL)
        return LADLE_OK;
    LADLE_CALL(gamma_beta(op, v, 0));
    if (!sv->batch_stats) {
        /* fixed statistics: dx = gamma / std dy */
        for (int64_t ch = 0; ch < v->c; ch++) {
            v->ca[ch] = v->g[ch] * invstd[ch];
            v->cc[ch] = 0;
        }
        return affine(op, dy, NULL, dx, n, v->ca, NULL, v->cc);
    }
    /* dx = k (m dy - sdy - x-hat sdyx), k = gamma / std / m, as
     * dx = a dy + b x + c per channel */
    LADLE_CALL(sums(op, ctx, dy, n, &sdy));
    sdyx = sdy + v->c;
    for (int64_t ch = 0; ch < v->c; ch++) {
        double k = v->g[ch] * invstd[ch] / m;
        double b = -k * invstd[ch] * sdyx[ch];
        v->ca[ch] = k * m;
        v->cb[ch] = b;
        v->cc[ch] = -k * sdy[ch] - b * mean[ch];
    }
    LADLE_CALL(affine(op, dy, ctx->x, dx, n, v->ca, v->cb, v->cc));
fail:
    return st;
}

static ladle_status bn_backward_weight(ladle_op *op, ladle_ctx *ctx, const ladle_tensor *dy,
                                       int64_t n)
{
    ladle_status st = LADLE_OK;
    bn *v = op->impl;
    const double *sdy, *sdyx;
    LADLE_CALL(sums(op, ctx, dy, n, &sdy));
    sdyx = sdy + v->c;
    /* the gradients accumulate: dgamma += sum dy x-hat, dbeta += sum dy */
    LADLE_CALL(ladle__bn_read(op->be, op->grads[0], v->c, v->stage, v->rm));
    LADLE_CALL(ladle__bn_read(op->be, op->grads[1], v->c, v->stage, v->rv));
    for (int64_t ch = 0; ch < v->c; ch++) {
        v->rm[ch] += sdyx[ch];
        v->rv[ch] += sdy[ch];
    }
    LADLE_CALL(ladle__bn_write(op->be, op->grads[0], v->c, v->rm, v->stage));
    LADLE_CALL(ladle__bn_write(op->be, op->grads[1], v->c, v->rv, v->stage));
fail:
    return st;
}

static ladle_status bn_ctx_init(const ladle_op *op, ladle_ctx *ctx)
{
    const bn *v = op->impl;
    ctx->impl = ladle__calloc(1, sizeof(saved) + sizeof(double) * (size_t)(4 * v->c));
    if (ctx->impl == NULL)
        return ladle__raise(LADLE_ERR_ALLOC, "ladle_ctx_create", "out of memory");
    return LADLE_OK;
}

static const ladle__part bn_parts[] = {
    LADLE__PART_TENSOR(bn, running_mean), LADLE__PART_TENSOR(bn, running_var),
    LADLE__PART_HOST(bn, mean), LADLE__PART_DEVICE(bn, dev), LADLE__PARTS_END};

static void bn_destroy(ladle_op *op) { ladle__parts_free(op->impl, bn_parts, op->be); }

static int bn_num_buffers(const ladle_op *op)
{
    return ((const bn *)op->impl)->track ? 2 : 0;
}

static ladle_tensor *bn_buffer_at(const ladle_op *op, int i, ladle__pinfo *info)
{
    const bn *v = op->impl;
    ladle_tensor *t = i == 0 ? v->running_mean : v->running_var;
    memset(info, 0, sizeof *info);
    info->ndim = 1;
    info->global[0] = t->shape[0];
    info->owner = 1;
    return t;
}

static const ladle_op_vtable bn_vt = {
    .kind = LADLE_OP_BATCHNORM,
    .name = "batchnorm",
    .destroy = bn_destroy,
    .layer_forward = bn_forward,
    .layer_backward = bn_backward,
    .layer_backward_weight = bn_backward_weight,
    .ctx_init = bn_ctx_init,
    .ctx_fini = ladle__layer_ctx_free_impl,
    .num_buffers = bn_num_buffers,
    .buffer_at = bn_buffer_at,
};

void ladle_batchnorm_desc_init(ladle_batchnorm_desc *d, int64_t num_features)
{
    if (!LADLE_DESC_START(d))
        return;
    d->num_features = num_features;
    d->eps = 1e-5;
    d->momentum = 0.1;
    d->affine = 1;
    d->track_running_stats = 1;
    d->sync = LADLE_BN_SYNC_GLOBAL;
    d->group_size = 0;
    d->flags = 0;
}

/* The checks of the descriptor against x (its size checked already),
 * raised for func. Local. */
static ladle_status check(const ladle_batchnorm_desc *d, int ndim, const int64_t *x_shape,
                          ladle_dtype dtype, const char *func)
{
    ladle_status st = ladle__layer_check_args(func, dtype, ndim, x_shape, 2);
    if (st != LADLE_OK)
        return st;
    if (ndim > 5)
        return ladle__raise(LADLE_ERR_SHAPE, func, "batch norm takes 2 to 5 dimensions, not %d",
                            ndim);
    if (!(x_shape[1] == d->num_features && d->num_features >= 1))
        return ladle__raise(LADLE_ERR_SHAPE, func, "x has %lld channels, the layer %lld features",
                            (long long)x_shape[1], (long long)d->num_features);
    if (!(d->eps > 0 && isfinite(d->eps) && d->momentum <= 1))
        return ladle__raise(LADLE_ERR_ARG, func,
                            "eps %g must be finite and > 0 and momentum %g at most 1", d->eps,
                            d->momentum);
    /* one rank: the distributed fields change nothing, but stay checked so
     * that a descriptor is good or bad for both creates alike */
    if (!(d->sync >= LADLE_BN_SYNC_GLOBAL && d->sync <= LADLE_BN_SYNC_GROUP))
        return ladle__raise(LADLE_ERR_ARG, func, "unknown sync mode %d", (int)d->sync);
    if (d->flags & ~(unsigned)LADLE_CHECKED)
        return ladle__raise(LADLE_ERR_ARG, func, "unknown flags 0x%x", d->flags);
    return LADLE_OK;
}

ladle_status ladle_batchnorm_create(const ladle_batchnorm_desc *d, int ndim,
                                    const int64_t x_shape[], ladle_dtype dtype, ladle_device device,
                                    ladle_op **out)
{
    ladle_status st = LADLE_OK;
    ladle_op *op = NULL;
    bn *v = NULL;
    LADLE__CHECK_DESC(d);
    LADLE_NOT_NULL(out);
    LADLE_CALL(check(d, ndim, x_shape, dtype, __func__));
    v = ladle__calloc(1, sizeof *v);
    LADLE_CHECK(v != NULL, LADLE_ERR_ALLOC, "out of memory");
    v->c = d->num_features;
    v->inner = 1;
    for (int i = 2; i < ndim; i++)
        v->inner *= x_shape[i];
    v->eps = d->eps;
    v->momentum = d->momentum;
    v->affine = d->affine;
    v->track = d->track_running_stats;
    v->mean = ladle__calloc((size_t)(11 * v->c), sizeof(double));
    LADLE_CHECK(v->mean != NULL, LADLE_ERR_ALLOC, "out of memory");
    double **host[] = {&v->invstd, &v->var, &v->ca, &v->cb, &v->cc,
                       &v->g,      &v->bt,  &v->rm, &v->rv, &v->stage};
    for (int i = 0; i < 10; i++)
        *host[i] = v->mean + (i + 1) * v->c;
    /* the layer first: it refuses a device ladle has no backend for */
    LADLE_CALL(
        ladle__layer_new(&bn_vt, dtype, device, ndim, x_shape, ndim, x_shape, 1, &op, __func__));
    LADLE_CALL(ladle_tensor_create(dtype, device, 1, &v->c, &v->running_mean));
    LADLE_CALL(ladle_tensor_create(dtype, device, 1, &v->c, &v->running_var));
    LADLE_CALL(ladle_tensor_fill(v->running_var, 1.0));
    op->impl = v;
    v = NULL;
    void *dv = NULL;
    size_t dev_bytes = sizeof(double) * (size_t)(LADLE__BN_NDEV * d->num_features);
    LADLE_CALL(op->be->fn->alloc(op->be, dev_bytes, &dv));
    ((bn *)op->impl)->dev = dv;
    if (d->affine) {
        ladle_tensor *gamma = NULL;
        LADLE_CALL(ladle__layer_add_param(op, "weight", 1, &d->num_features, &gamma));
        LADLE_CALL(ladle_tensor_fill(gamma, 1.0));
        LADLE_CALL(ladle__layer_add_param(op, "bias", 1, &d->num_features, NULL));
    }
    *out = op;
    return LADLE_OK;
fail:
    ladle__parts_free(v, bn_parts, NULL); /* before the op took it: no device buffer yet */
    ladle_op_destroy(&op);
    return st;
}

/* Both batch norms keep their running statistics as buffers 0 and 1, so one
 * accessor serves them through the vtable. */
ladle_status ladle_batchnorm_running_stats(const ladle_op *op, ladle_tensor **mean,
                                           ladle_tensor **var)
{
    ladle_status st = LADLE_OK;
    LADLE_NOT_NULL(op);
    ladle_op_kind kind = op->vt->kind;
    LADLE_CHECK(kind == LADLE_OP_BATCHNORM || kind == LADLE_OP_DIST_BATCHNORM, LADLE_ERR_ARG,
                "the %s op is not a batch norm", op->vt->name);
    ladle__pinfo info;
    ladle_tensor *t[2];
    for (int i = 0; i < 2; i++) {
        t[i] = op->vt->buffer_at(op, i, &info);
        if (t[i] != NULL && t[i]->numel == 0) /* a rank without channels */
            t[i] = NULL;
    }
    if (mean)
        *mean = t[0];
    if (var)
        *var = t[1];
fail:
    return st;
}
