/*
 * Batch normalisation over every dimension but the channels. Statistics are
 * two-pass (mean, then the mean of squared deviations) and accumulated in
 * double. The ctx keeps mean and 1/std per channel; x-hat is recomputed
 * from the saved x. With m values per channel:
 *   training  dx = gamma / std / m * (m dy - sum(dy) - x-hat sum(dy x-hat))
 *   running   dx = gamma / std_running * dy
 *   dgamma = sum(dy x-hat),  dbeta = sum(dy)
 */
#include <math.h>
#include <string.h>

#include "../src/op_impl.h"

typedef struct bn {
    int64_t c, inner; /* channels, and the positions per channel of one sample */
    double eps, momentum;
    int affine, track;
    int64_t batches_seen;
    ladle_tensor *running_mean, *running_var;
    double *scratch; /* 3 x C: mean, 1/std, variance of the current call */
} bn;

/* What one forward records: per channel mean and 1/std, and whether they
 * are batch statistics. */
typedef struct saved {
    int batch_stats;
    double stats[]; /* mean[c], invstd[c] */
} saved;

static double get(const void *p, ladle_dtype dt, int64_t i)
{
    return dt == LADLE_F32 ? ((const float *)p)[i] : ((const double *)p)[i];
}

static void put(void *p, ladle_dtype dt, int64_t i, double v)
{
    if (dt == LADLE_F32)
        ((float *)p)[i] = (float)v;
    else
        ((double *)p)[i] = v;
}

/* Visit the elements of channel ch in a batch of n. */
#define FOR_CHANNEL(v, n, ch, i)                                                         \
    for (int64_t s_ = 0; s_ < (n); s_++)                                                  \
        for (int64_t i = (s_ * (v)->c + (ch)) * (v)->inner,                              \
                     e_ = i + (v)->inner;                                                \
             i < e_; i++)

static void batch_statistics(const bn *v, const ladle_tensor *x, int64_t n, double *mean,
                             double *invstd, double *var)
{
    double m = (double)(n * v->inner);
    for (int64_t ch = 0; ch < v->c; ch++) {
        double s = 0, q = 0;
        FOR_CHANNEL(v, n, ch, i)
        s += get(x->data, x->dtype, i);
        double mu = s / m;
        FOR_CHANNEL(v, n, ch, i)
        {
            double dlt = get(x->data, x->dtype, i) - mu;
            q += dlt * dlt;
        }
        mean[ch] = mu;
        var[ch] = q / m;
        invstd[ch] = 1.0 / sqrt(var[ch] + v->eps);
    }
}

static void update_running(bn *v, const double *mean, const double *var, double m)
{
    double mom = v->momentum;
    v->batches_seen++;
    if (mom < 0)
        mom = 1.0 / (double)v->batches_seen; /* a cumulative average */
    for (int64_t ch = 0; ch < v->c; ch++) {
        double rm = get(v->running_mean->data, v->running_mean->dtype, ch);
        double rv = get(v->running_var->data, v->running_var->dtype, ch);
        put(v->running_mean->data, v->running_mean->dtype, ch, (1 - mom) * rm + mom * mean[ch]);
        put(v->running_var->data, v->running_var->dtype, ch,
            (1 - mom) * rv + mom * var[ch] * m / (m - 1));
    }
}

static ladle_status bn_forward(ladle_op *op, ladle_ctx *ctx, const ladle_tensor *x,
                               ladle_tensor *y, int64_t n)
{
    bn *v = op->impl;
    double *mean = v->scratch, *invstd = mean + v->c, *var = invstd + v->c;
    double m = (double)(n * v->inner);
    int batch_stats = op->training || !v->track;
    if (batch_stats) {
        if (op->training && m <= 1)
            return ladle__raise(LADLE_ERR_SHAPE, "ladle_layer_forward",
                                "batch norm in training needs more than one value per channel");
        batch_statistics(v, x, n, mean, invstd, var);
        if (op->training && v->track)
            update_running(v, mean, var, m);
    } else {
        for (int64_t ch = 0; ch < v->c; ch++) {
            mean[ch] = get(v->running_mean->data, op->dtype, ch);
            invstd[ch] = 1.0 / sqrt(get(v->running_var->data, op->dtype, ch) + v->eps);
        }
    }
    for (int64_t ch = 0; ch < v->c; ch++) {
        double g = v->affine ? get(op->params[0]->data, op->dtype, ch) : 1.0;
        double b = v->affine ? get(op->params[1]->data, op->dtype, ch) : 0.0;
        double scale = g * invstd[ch], shift = b - mean[ch] * scale;
        FOR_CHANNEL(v, n, ch, i)
        put(y->data, op->dtype, i, get(x->data, op->dtype, i) * scale + shift);
    }
    if (ctx) {
        saved *sv = ctx->buf;
        sv->batch_stats = batch_stats;
        memcpy(sv->stats, mean, sizeof(double) * (size_t)(2 * v->c));
    }
    return LADLE_OK;
}

/* Per channel sums of dy and dy * x-hat. */
static void sums(const bn *v, const ladle_tensor *x, const ladle_tensor *dy, int64_t n,
                 const saved *sv, int64_t ch, double *sdy, double *sdyx)
{
    double mean = sv->stats[ch], invstd = sv->stats[v->c + ch];
    *sdy = *sdyx = 0;
    FOR_CHANNEL(v, n, ch, i)
    {
        double g = get(dy->data, dy->dtype, i);
        *sdy += g;
        *sdyx += g * (get(x->data, x->dtype, i) - mean) * invstd;
    }
}

static ladle_status bn_backward(ladle_op *op, ladle_ctx *ctx, const ladle_tensor *dy,
                                ladle_tensor *dx, int64_t n)
{
    const bn *v = op->impl;
    const saved *sv = ctx->buf;
    const ladle_tensor *x = ctx->x;
    double m = (double)(n * v->inner);
    if (dx == NULL)
        return LADLE_OK;
    for (int64_t ch = 0; ch < v->c; ch++) {
        double g = v->affine ? get(op->params[0]->data, op->dtype, ch) : 1.0;
        double mean = sv->stats[ch], invstd = sv->stats[v->c + ch];
        if (!sv->batch_stats) {
            FOR_CHANNEL(v, n, ch, i)
            put(dx->data, op->dtype, i, get(dy->data, op->dtype, i) * g * invstd);
            continue;
        }
        double sdy, sdyx;
        sums(v, x, dy, n, sv, ch, &sdy, &sdyx);
        double k = g * invstd / m;
        FOR_CHANNEL(v, n, ch, i)
        {
            double xh = (get(x->data, op->dtype, i) - mean) * invstd;
            put(dx->data, op->dtype, i, k * (m * get(dy->data, op->dtype, i) - sdy - xh * sdyx));
        }
    }
    return LADLE_OK;
}

static ladle_status bn_backward_weight(ladle_op *op, ladle_ctx *ctx, const ladle_tensor *dy,
                                       int64_t n)
{
    const bn *v = op->impl;
    for (int64_t ch = 0; ch < v->c; ch++) {
        double sdy, sdyx;
        sums(v, ctx->x, dy, n, ctx->buf, ch, &sdy, &sdyx);
        put(op->grads[0]->data, op->dtype, ch, get(op->grads[0]->data, op->dtype, ch) + sdyx);
        put(op->grads[1]->data, op->dtype, ch, get(op->grads[1]->data, op->dtype, ch) + sdy);
    }
    return LADLE_OK;
}

static void bn_destroy(ladle_op *op)
{
    bn *v = op->impl;
    if (v == NULL)
        return;
    ladle_tensor_destroy(&v->running_mean);
    ladle_tensor_destroy(&v->running_var);
    ladle__free(v->scratch);
    ladle__free(v);
}

static const ladle_op_vtable bn_vt = {
    .name = "batchnorm",
    .destroy = bn_destroy,
    .layer_forward = bn_forward,
    .layer_backward = bn_backward,
    .layer_backward_weight = bn_backward_weight,
};

void ladle_batchnorm_desc_init(ladle_batchnorm_desc *d, int64_t num_features)
{
    if (d == NULL)
        return;
    d->num_features = num_features;
    d->eps = 1e-5;
    d->momentum = 0.1;
    d->affine = 1;
    d->track_running_stats = 1;
}

ladle_status ladle_batchnorm_create(const ladle_batchnorm_desc *d, int ndim,
                                    const int64_t x_shape[], ladle_dtype dtype, ladle_op **out)
{
    ladle_status st = LADLE_OK;
    ladle_op *op = NULL;
    bn *v = NULL;
    LADLE_NOT_NULL(d);
    LADLE_NOT_NULL(out);
    LADLE_CALL(ladle__layer_check_args(__func__, dtype, ndim, x_shape, 2));
    LADLE_CHECK(ndim <= 5, LADLE_ERR_SHAPE, "batch norm takes 2 to 5 dimensions, not %d", ndim);
    LADLE_CHECK(x_shape[1] == d->num_features && d->num_features >= 1, LADLE_ERR_SHAPE,
                "x has %lld channels, the layer %lld features", (long long)x_shape[1],
                (long long)d->num_features);
    LADLE_CHECK(d->eps > 0 && d->momentum <= 1, LADLE_ERR_ARG,
                "eps %g must be > 0 and momentum %g at most 1", d->eps, d->momentum);
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
    v->scratch = ladle__calloc((size_t)(3 * v->c), sizeof(double));
    LADLE_CHECK(v->scratch != NULL, LADLE_ERR_ALLOC, "out of memory");
    LADLE_CALL(ladle_tensor_create(dtype, 1, &v->c, &v->running_mean));
    LADLE_CALL(ladle_tensor_create(dtype, 1, &v->c, &v->running_var));
    LADLE_CALL(ladle_tensor_fill(v->running_var, 1.0));
    LADLE_CALL(ladle__layer_new(&bn_vt, dtype, ndim, x_shape, ndim, x_shape, 1, &op));
    op->impl = v;
    v = NULL;
    op->ctx_bytes = sizeof(saved) + sizeof(double) * (size_t)(2 * d->num_features);
    if (d->affine) {
        ladle_tensor *gamma = NULL;
        LADLE_CALL(ladle__layer_add_param(op, "weight", 1, &d->num_features, &gamma));
        LADLE_CALL(ladle_tensor_fill(gamma, 1.0));
        LADLE_CALL(ladle__layer_add_param(op, "bias", 1, &d->num_features, NULL));
    }
    *out = op;
    return LADLE_OK;
fail:
    if (v != NULL) {
        ladle_tensor_destroy(&v->running_mean);
        ladle_tensor_destroy(&v->running_var);
        ladle__free(v->scratch);
        ladle__free(v);
    }
    ladle_op_destroy(&op);
    return st;
}

ladle_tensor *ladle_batchnorm_running_mean(const ladle_op *op)
{
    return op && op->vt == &bn_vt ? ((bn *)op->impl)->running_mean : NULL;
}

ladle_tensor *ladle_batchnorm_running_var(const ladle_op *op)
{
    return op && op->vt == &bn_vt ? ((bn *)op->impl)->running_var : NULL;
}
