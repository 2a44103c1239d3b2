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

#include "src/op/op_impl.h"
#include "src/backends/cpu/simd.h"
#include "layers/bn_kernels.h"

typedef struct bn {
    int64_t c, inner; /* channels, and the positions per channel of one sample */
    double eps, momentum;
    int affine, track;
    int64_t batches_seen;
    ladle_tensor *running_mean, *running_var;
    /* workspace, C each: mean, 1/std, variance, and the coefficients of
     * the elementwise passes */
    double *mean, *invstd, *var, *ca, *cb, *cc;
} bn;

/* What one forward records: per channel mean and 1/std, whether they are
 * batch statistics, and the backward's sums once computed (for dy). */
typedef struct saved {
    int batch_stats;
    const void *sums_of; /* the dy the sums belong to; NULL when none */
    double stats[];      /* mean[c], invstd[c], sum(dy)[c], sum(dy x-hat)[c] */
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

/*
 * The kernels walk (sample, channel) rows of `inner` contiguous values.
 * Sums run over 16 lanes in the data type, flushed into double every 256
 * values, so they vectorise and stay accurate for long rows; rows of one
 * value (batch norm over (N, C)) go across the channels instead.
 */
#define LANES 16
#define BLOCK 256

#define DEFINE_BN(T, S)                                                                  \
    /* s1[ch] = sum x; with mean, s1[ch] = sum (x - mean)^2 */                           \
    LADLE_KERNEL static void moment_##S(const T *x, int64_t n, int64_t c, int64_t inner,   \
                                        const double *mean, double *s1)                  \
    {                                                                                    \
        memset(s1, 0, sizeof(double) * (size_t)c);                                       \
        for (int64_t sm = 0; sm < n; sm++)                                               \
            for (int64_t ch = 0; ch < c; ch++) {                                         \
                const T *r = x + (sm * c + ch) * inner;                                  \
                T mu = mean ? (T)mean[ch] : 0;                                           \
                double tot = 0;                                                          \
                for (int64_t i = 0; i < inner;) {                                        \
                    int64_t e = i + BLOCK < inner ? i + BLOCK : inner;                   \
                    T l[LANES] = {0};                                                    \
                    if (mean)                                                            \
                        for (; i + LANES <= e; i += LANES)                               \
                            for (int j = 0; j < LANES; j++)                              \
                                l[j] += (r[i + j] - mu) * (r[i + j] - mu);               \
                    else                                                                 \
                        for (; i + LANES <= e; i += LANES)                               \
                            for (int j = 0; j < LANES; j++)                              \
                                l[j] += r[i + j];                                        \
                    for (; i < e; i++)                                                   \
                        l[0] += mean ? (r[i] - mu) * (r[i] - mu) : r[i];                 \
                    for (int j = 0; j < LANES; j++)                                      \
                        tot += l[j];                                                     \
                }                                                                        \
                s1[ch] += tot;                                                           \
            }                                                                            \
    }                                                                                    \
    LADLE_KERNEL static void moment_cols_##S(const T *x, int64_t n, int64_t c,           \
                                             const double *mean, double *s1)             \
    {                                                                                    \
        memset(s1, 0, sizeof(double) * (size_t)c);                                       \
        for (int64_t sm = 0; sm < n; sm++) {                                             \
            const T *r = x + sm * c;                                                     \
            if (mean)                                                                    \
                for (int64_t ch = 0; ch < c; ch++)                                       \
                    s1[ch] += ((double)r[ch] - mean[ch]) * ((double)r[ch] - mean[ch]);   \
            else                                                                         \
                for (int64_t ch = 0; ch < c; ch++)                                       \
                    s1[ch] += (double)r[ch];                                             \
        }                                                                                \
    }                                                                                    \
    /* s1[ch] = sum dy, s2[ch] = sum dy (x - mean) */                                    \
    LADLE_KERNEL static void dsums_##S(const T *x, const T *dy, int64_t n, int64_t c,     \
                                       int64_t inner, const double *mean, double *s1,    \
                                       double *s2)                                       \
    {                                                                                    \
        memset(s1, 0, sizeof(double) * (size_t)c);                                       \
        memset(s2, 0, sizeof(double) * (size_t)c);                                       \
        for (int64_t sm = 0; sm < n; sm++)                                               \
            for (int64_t ch = 0; ch < c; ch++) {                                         \
                int64_t o = (sm * c + ch) * inner;                                       \
                const T *r = x + o, *g = dy + o;                                         \
                T mu = (T)mean[ch];                                                      \
                double t1 = 0, t2 = 0;                                                   \
                for (int64_t i = 0; i < inner;) {                                        \
                    int64_t e = i + BLOCK < inner ? i + BLOCK : inner;                   \
                    T l1[LANES] = {0}, l2[LANES] = {0};                                  \
                    for (; i + LANES <= e; i += LANES)                                   \
                        for (int j = 0; j < LANES; j++) {                                \
                            l1[j] += g[i + j];                                           \
                            l2[j] += g[i + j] * (r[i + j] - mu);                         \
                        }                                                                \
                    for (; i < e; i++) {                                                 \
                        l1[0] += g[i];                                                   \
                        l2[0] += g[i] * (r[i] - mu);                                     \
                    }                                                                    \
                    for (int j = 0; j < LANES; j++) {                                    \
                        t1 += l1[j];                                                     \
                        t2 += l2[j];                                                     \
                    }                                                                    \
                }                                                                        \
                s1[ch] += t1;                                                            \
                s2[ch] += t2;                                                            \
            }                                                                            \
    }                                                                                    \
    LADLE_KERNEL static void dsums_cols_##S(const T *x, const T *dy, int64_t n,          \
                                            int64_t c, const double *mean, double *s1,   \
                                            double *s2)                                  \
    {                                                                                    \
        memset(s1, 0, sizeof(double) * (size_t)c);                                       \
        memset(s2, 0, sizeof(double) * (size_t)c);                                       \
        for (int64_t sm = 0; sm < n; sm++)                                               \
            for (int64_t ch = 0; ch < c; ch++) {                                         \
                double g = dy[sm * c + ch];                                              \
                s1[ch] += g;                                                             \
                s2[ch] += g * ((double)x[sm * c + ch] - mean[ch]);                       \
            }                                                                            \
    }                                                                                    \
    /* out = a[ch] u + b[ch] w + k[ch], w and b optional */                              \
    LADLE_KERNEL static void affine_##S(const T *u, const T *w, T *out, int64_t n,        \
                                        int64_t c, int64_t inner, const double *a,       \
                                        const double *b, const double *k)                \
    {                                                                                    \
        for (int64_t sm = 0; sm < n; sm++)                                               \
            for (int64_t ch = 0; ch < c; ch++) {                                         \
                int64_t o = (sm * c + ch) * inner;                                       \
                const T *ur = u + o;                                                     \
                T *orow = out + o;                                                       \
                T ta = (T)a[ch], tk = (T)k[ch];                                          \
                if (w) {                                                                 \
                    const T *wr = w + o;                                                 \
                    T tb = (T)b[ch];                                                     \
                    for (int64_t i = 0; i < inner; i++)                                  \
                        orow[i] = ta * ur[i] + tb * wr[i] + tk;                          \
                } else {                                                                 \
                    for (int64_t i = 0; i < inner; i++)                                  \
                        orow[i] = ta * ur[i] + tk;                                       \
                }                                                                        \
            }                                                                            \
    }                                                                                    \
    LADLE_KERNEL static void affine_cols_##S(const T *u, const T *w, T *out, int64_t n,   \
                                             int64_t c, const double *a,                 \
                                             const double *b, const double *k)           \
    {                                                                                    \
        for (int64_t sm = 0; sm < n; sm++) {                                             \
            const T *ur = u + sm * c, *wr = w ? w + sm * c : NULL;                       \
            T *orow = out + sm * c;                                                      \
            for (int64_t ch = 0; ch < c; ch++)                                           \
                orow[ch] = (T)(a[ch] * ur[ch] + (wr ? b[ch] * wr[ch] : 0.0) + k[ch]);    \
        }                                                                                \
    }

DEFINE_BN(float, f32)
DEFINE_BN(double, f64)

/* s1 = sum x (mean NULL) or sum (x - mean)^2 over each channel */
void ladle__bn_moment(ladle_dtype dt, const void *x, int64_t n, int64_t c, int64_t inner,
                      const double *mean, double *s1)
{
    if (dt == LADLE_F32 && inner == 1)
        moment_cols_f32(x, n, c, mean, s1);
    else if (dt == LADLE_F32)
        moment_f32(x, n, c, inner, mean, s1);
    else if (inner == 1)
        moment_cols_f64(x, n, c, mean, s1);
    else
        moment_f64(x, n, c, inner, mean, s1);
}

void ladle__bn_dsums(ladle_dtype dt, const void *x, const void *dy, int64_t n, int64_t c,
                     int64_t inner, const double *mean, double *s1, double *s2)
{
    if (dt == LADLE_F32 && inner == 1)
        dsums_cols_f32(x, dy, n, c, mean, s1, s2);
    else if (dt == LADLE_F32)
        dsums_f32(x, dy, n, c, inner, mean, s1, s2);
    else if (inner == 1)
        dsums_cols_f64(x, dy, n, c, mean, s1, s2);
    else
        dsums_f64(x, dy, n, c, inner, mean, s1, s2);
}

/* out = a u + b w + k per channel (w may be NULL) */
void ladle__bn_affine(ladle_dtype dt, const void *u, const void *w, void *out, int64_t n,
                      int64_t c, int64_t inner, const double *a, const double *b,
                      const double *k)
{
    if (dt == LADLE_F32 && inner == 1)
        affine_cols_f32(u, w, out, n, c, a, b, k);
    else if (dt == LADLE_F32)
        affine_f32(u, w, out, n, c, inner, a, b, k);
    else if (inner == 1)
        affine_cols_f64(u, w, out, n, c, a, b, k);
    else
        affine_f64(u, w, out, n, c, inner, a, b, k);
}

static void moment(const bn *v, ladle_dtype dt, const void *x, int64_t n, const double *mean,
                   double *s1)
{
    ladle__bn_moment(dt, x, n, v->c, v->inner, mean, s1);
}

static void dsums(const bn *v, ladle_dtype dt, const void *x, const void *dy, int64_t n,
                  const double *mean, double *s1, double *s2)
{
    ladle__bn_dsums(dt, x, dy, n, v->c, v->inner, mean, s1, s2);
}

static void affine(const bn *v, ladle_dtype dt, const void *u, const void *w, void *out,
                   int64_t n, const double *a, const double *b, const double *k)
{
    ladle__bn_affine(dt, u, w, out, n, v->c, v->inner, a, b, k);
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

static double gamma_of(const ladle_op *op, int64_t ch)
{
    const bn *v = op->impl;
    return v->affine ? get(op->params[0]->data, op->dtype, ch) : 1.0;
}

static ladle_status bn_forward(ladle_op *op, ladle_ctx *ctx, const ladle_tensor *x,
                               ladle_tensor *y, int64_t n)
{
    bn *v = op->impl;
    double m = (double)(n * v->inner);
    int batch_stats = op->training || !v->track;
    if (batch_stats) {
        if (op->training && m <= 1)
            return ladle__raise(LADLE_ERR_SHAPE, "ladle_layer_forward",
                                "batch norm in training needs more than one value per channel");
        /* two passes: the mean, then the mean squared deviation */
        moment(v, op->dtype, x->data, n, NULL, v->mean);
        for (int64_t ch = 0; ch < v->c; ch++)
            v->mean[ch] /= m;
        moment(v, op->dtype, x->data, n, v->mean, v->var);
        for (int64_t ch = 0; ch < v->c; ch++) {
            v->var[ch] /= m;
            v->invstd[ch] = 1.0 / sqrt(v->var[ch] + v->eps);
        }
        if (op->training && v->track)
            update_running(v, v->mean, v->var, m);
    } else {
        for (int64_t ch = 0; ch < v->c; ch++) {
            v->mean[ch] = get(v->running_mean->data, op->dtype, ch);
            v->invstd[ch] = 1.0 / sqrt(get(v->running_var->data, op->dtype, ch) + v->eps);
        }
    }
    /* y = scale x + shift */
    for (int64_t ch = 0; ch < v->c; ch++) {
        double b = v->affine ? get(op->params[1]->data, op->dtype, ch) : 0.0;
        v->ca[ch] = gamma_of(op, ch) * v->invstd[ch];
        v->cc[ch] = b - v->mean[ch] * v->ca[ch];
    }
    affine(v, op->dtype, x->data, NULL, y->data, n, v->ca, NULL, v->cc);
    if (ctx) {
        saved *sv = ctx->buf;
        sv->batch_stats = batch_stats;
        sv->sums_of = NULL;
        memcpy(sv->stats, v->mean, sizeof(double) * (size_t)v->c);
        memcpy(sv->stats + v->c, v->invstd, sizeof(double) * (size_t)v->c);
    }
    return LADLE_OK;
}

/* Per channel sums of dy and dy * x-hat, computed once per ctx and dy: the
 * input and the weight gradient both need them. */
static const double *sums(const bn *v, ladle_ctx *ctx, const ladle_tensor *dy, int64_t n)
{
    saved *sv = ctx->buf;
    double *mean = sv->stats, *invstd = mean + v->c, *sdy = invstd + v->c, *sdyx = sdy + v->c;
    if (sv->sums_of != dy->data) {
        dsums(v, dy->dtype, ctx->x->data, dy->data, n, mean, sdy, sdyx);
        for (int64_t ch = 0; ch < v->c; ch++)
            sdyx[ch] *= invstd[ch];
        sv->sums_of = dy->data;
    }
    return sdy;
}

static ladle_status bn_backward(ladle_op *op, ladle_ctx *ctx, const ladle_tensor *dy,
                                ladle_tensor *dx, int64_t n)
{
    bn *v = op->impl;
    const saved *sv = ctx->buf;
    const double *mean = sv->stats, *invstd = mean + v->c;
    double m = (double)(n * v->inner);
    if (dx == NULL)
        return LADLE_OK;
    if (!sv->batch_stats) {
        /* fixed statistics: dx = gamma / std dy */
        for (int64_t ch = 0; ch < v->c; ch++) {
            v->ca[ch] = gamma_of(op, ch) * invstd[ch];
            v->cc[ch] = 0;
        }
        affine(v, op->dtype, dy->data, NULL, dx->data, n, v->ca, NULL, v->cc);
        return LADLE_OK;
    }
    /* dx = k (m dy - sdy - x-hat sdyx), k = gamma / std / m, as
     * dx = a dy + b x + c per channel */
    const double *sdy = sums(v, ctx, dy, n), *sdyx = sdy + v->c;
    for (int64_t ch = 0; ch < v->c; ch++) {
        double k = gamma_of(op, ch) * invstd[ch] / m;
        double b = -k * invstd[ch] * sdyx[ch];
        v->ca[ch] = k * m;
        v->cb[ch] = b;
        v->cc[ch] = -k * sdy[ch] - b * mean[ch];
    }
    affine(v, op->dtype, dy->data, ctx->x->data, dx->data, n, v->ca, v->cb, v->cc);
    return LADLE_OK;
}

static ladle_status bn_backward_weight(ladle_op *op, ladle_ctx *ctx, const ladle_tensor *dy,
                                       int64_t n)
{
    const bn *v = op->impl;
    const double *sdy = sums(v, ctx, dy, n), *sdyx = sdy + v->c;
    for (int64_t ch = 0; ch < v->c; ch++) {
        put(op->grads[0]->data, op->dtype, ch, get(op->grads[0]->data, op->dtype, ch) + sdyx[ch]);
        put(op->grads[1]->data, op->dtype, ch, get(op->grads[1]->data, op->dtype, ch) + sdy[ch]);
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
    ladle__free(v->mean);
    ladle__free(v);
}

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
    .name = "batchnorm",
    .destroy = bn_destroy,
    .layer_forward = bn_forward,
    .layer_backward = bn_backward,
    .layer_backward_weight = bn_backward_weight,
    .num_buffers = bn_num_buffers,
    .buffer_at = bn_buffer_at,
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
    LADLE_CHECK(d->eps > 0 && isfinite(d->eps) && d->momentum <= 1, LADLE_ERR_ARG,
                "eps %g must be finite and > 0 and momentum %g at most 1", d->eps,
                d->momentum);
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
    v->mean = ladle__calloc((size_t)(6 * v->c), sizeof(double));
    LADLE_CHECK(v->mean != NULL, LADLE_ERR_ALLOC, "out of memory");
    v->invstd = v->mean + v->c;
    v->var = v->invstd + v->c;
    v->ca = v->var + v->c;
    v->cb = v->ca + v->c;
    v->cc = v->cb + v->c;
    LADLE_CALL(ladle_tensor_create(dtype, 1, &v->c, &v->running_mean));
    LADLE_CALL(ladle_tensor_create(dtype, 1, &v->c, &v->running_var));
    LADLE_CALL(ladle_tensor_fill(v->running_var, 1.0));
    LADLE_CALL(ladle__layer_new(&bn_vt, dtype, ndim, x_shape, ndim, x_shape, 1, &op));
    op->impl = v;
    v = NULL;
    op->ctx_bytes = sizeof(saved) + sizeof(double) * (size_t)(4 * d->num_features);
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
        ladle__free(v->mean);
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
