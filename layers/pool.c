/*
 * Max and average pooling over 1 to 3 spatial dimensions (lower ones are
 * 3-D with unit extents), and global average pooling.
 *
 * Max pooling skips taps outside the input (the frameworks' -inf padding)
 * and records, per output, the plane offset of the first maximum; the
 * backward adds dy there. Average pooling divides by the window clipped to
 * the padded input (count_include_pad) or to the input itself; it is linear,
 * and its backward spreads dy / divisor over the same window.
 */
#include <math.h>
#include <string.h>

#include "../src/op_impl.h"

typedef struct pool {
    ladle_pool_kind kind;
    int count_include_pad;
    int64_t planes;         /* N x C of the largest batch */
    int64_t channels;
    int64_t in[3], out[3], k[3], s[3], p[3], d[3];
    int64_t pin, pout;
    int global;
} pool;

static int64_t out_len(int64_t n, int64_t k, int64_t s, int64_t p, int64_t d, int ceil_mode)
{
    int64_t span = n + 2 * p - d * (k - 1) - 1;
    if (span < 0)
        return 0;
    int64_t m = ceil_mode ? (span + s - 1) / s + 1 : span / s + 1;
    if (ceil_mode && (m - 1) * s >= n + p)
        m--;
    return m;
}

/* The divisor of average window o (clipped bounds, as the frameworks). */
static double divisor(const pool *v, const int64_t *o)
{
    double full = 1, inside = 1;
    for (int a = 0; a < 3; a++) {
        int64_t start = o[a] * v->s[a] - v->p[a];
        int64_t end = start + v->k[a] < v->in[a] + v->p[a] ? start + v->k[a] : v->in[a] + v->p[a];
        full *= (double)(end - start);
        int64_t lo = start < 0 ? 0 : start, hi = end > v->in[a] ? v->in[a] : end;
        inside *= (double)(hi > lo ? hi - lo : 0);
    }
    return v->count_include_pad ? full : inside;
}

/* Visit the taps of output position q that fall inside the input. */
#define FOR_TAPS(v, q, idx)                                                              \
    int64_t o_[3] = {(q) / ((v)->out[1] * (v)->out[2]), (q) / (v)->out[2] % (v)->out[1],   \
                     (q) % (v)->out[2]};                                                 \
    for (int64_t t0 = 0; t0 < (v)->k[0]; t0++)                                           \
        for (int64_t t1 = 0; t1 < (v)->k[1]; t1++)                                       \
            for (int64_t t2 = 0; t2 < (v)->k[2]; t2++) {                                 \
                int64_t i0 = o_[0] * (v)->s[0] - (v)->p[0] + t0 * (v)->d[0];             \
                int64_t i1 = o_[1] * (v)->s[1] - (v)->p[1] + t1 * (v)->d[1];             \
                int64_t i2 = o_[2] * (v)->s[2] - (v)->p[2] + t2 * (v)->d[2];             \
                if (i0 < 0 || i0 >= (v)->in[0] || i1 < 0 || i1 >= (v)->in[1] || i2 < 0 || \
                    i2 >= (v)->in[2])                                                    \
                    continue;                                                            \
                int64_t idx = (i0 * (v)->in[1] + i1) * (v)->in[2] + i2;

#define END_TAPS }

#define DEFINE_POOL(T, S)                                                                \
    static void pool_fwd_##S(const pool *v, int64_t planes, const T *x, T *y,            \
                             int32_t *arg)                                               \
    {                                                                                    \
        for (int64_t pl = 0; pl < planes; pl++) {                                        \
            const T *xp = x + pl * v->pin;                                               \
            T *yp = y + pl * v->pout;                                                    \
            for (int64_t q = 0; q < v->pout; q++) {                                      \
                double acc = v->kind == LADLE_POOL_MAX ? -INFINITY : 0.0;                \
                int64_t best = -1;                                                       \
                FOR_TAPS(v, q, i)                                                        \
                if (v->kind == LADLE_POOL_AVG)                                           \
                    acc += xp[i];                                                        \
                else if (xp[i] > acc || best < 0 || isnan(xp[i])) {                      \
                    if (!(best >= 0 && isnan(acc))) {                                    \
                        acc = xp[i];                                                     \
                        best = i;                                                        \
                    }                                                                    \
                }                                                                        \
                END_TAPS                                                                 \
                if (v->kind == LADLE_POOL_AVG) {                                          \
                    double div = divisor(v, o_);                                         \
                    yp[q] = (T)(div > 0 ? acc / div : 0.0);                              \
                } else {                                                                 \
                    yp[q] = (T)acc;                                                      \
                    if (arg)                                                             \
                        arg[pl * v->pout + q] = (int32_t)best;                           \
                }                                                                        \
            }                                                                            \
        }                                                                                \
    }                                                                                    \
    static void pool_bwd_##S(const pool *v, int64_t planes, const T *dy, T *dx,          \
                             const int32_t *arg)                                         \
    {                                                                                    \
        memset(dx, 0, sizeof(T) * (size_t)(planes * v->pin));                            \
        for (int64_t pl = 0; pl < planes; pl++) {                                        \
            const T *dyp = dy + pl * v->pout;                                            \
            T *dxp = dx + pl * v->pin;                                                   \
            for (int64_t q = 0; q < v->pout; q++) {                                      \
                if (v->kind == LADLE_POOL_MAX) {                                         \
                    int32_t i = arg[pl * v->pout + q];                                   \
                    if (i >= 0)                                                          \
                        dxp[i] += dyp[q];                                                \
                    continue;                                                            \
                }                                                                        \
                double div;                                                              \
                {                                                                        \
                    int64_t o_[3] = {q / (v->out[1] * v->out[2]), q / v->out[2] % v->out[1], \
                                     q % v->out[2]};                                     \
                    div = divisor(v, o_);                                                \
                }                                                                        \
                if (div <= 0)                                                            \
                    continue;                                                            \
                T g = (T)(dyp[q] / div);                                                 \
                FOR_TAPS(v, q, i)                                                        \
                dxp[i] += g;                                                             \
                END_TAPS                                                                 \
            }                                                                            \
        }                                                                                \
    }

DEFINE_POOL(float, f32)
DEFINE_POOL(double, f64)

static ladle_status pool_forward(ladle_op *op, ladle_ctx *ctx, const ladle_tensor *x,
                                 ladle_tensor *y, int64_t n)
{
    const pool *v = op->impl;
    int32_t *arg = ctx ? ctx->buf : NULL;
    int64_t planes = n * v->channels;
    if (op->dtype == LADLE_F32)
        pool_fwd_f32(v, planes, x->data, y->data, arg);
    else
        pool_fwd_f64(v, planes, x->data, y->data, arg);
    return LADLE_OK;
}

static ladle_status pool_backward(ladle_op *op, ladle_ctx *ctx, const ladle_tensor *dy,
                                  ladle_tensor *dx, int64_t n)
{
    const pool *v = op->impl;
    if (dx == NULL)
        return LADLE_OK;
    const int32_t *arg = ctx ? ctx->buf : NULL;
    int64_t planes = n * v->channels;
    if (op->dtype == LADLE_F32)
        pool_bwd_f32(v, planes, dy->data, dx->data, arg);
    else
        pool_bwd_f64(v, planes, dy->data, dx->data, arg);
    return LADLE_OK;
}

static void pool_destroy(ladle_op *op) { ladle__free(op->impl); }

static const ladle_op_vtable pool_vt = {
    .name = "pool",
    .destroy = pool_destroy,
    .layer_forward = pool_forward,
    .layer_backward = pool_backward,
};

void ladle_pool_desc_init(ladle_pool_desc *d, ladle_pool_kind kind, int nd, int64_t kernel)
{
    if (d == NULL)
        return;
    memset(d, 0, sizeof *d);
    d->kind = kind;
    d->nd = nd;
    for (int i = 0; i < 3; i++) {
        d->kernel[i] = kernel;
        d->dilation[i] = 1;
    }
    d->count_include_pad = 1;
}

static ladle_status plan(const ladle_pool_desc *d, const int64_t *xs, pool *v)
{
    const char *f = "ladle_pool_create";
    if (d->kind != LADLE_POOL_MAX && d->kind != LADLE_POOL_AVG)
        return ladle__raise(LADLE_ERR_ARG, f, "unknown pooling kind %d", (int)d->kind);
    v->kind = d->kind;
    v->count_include_pad = d->count_include_pad;
    v->channels = xs[1];
    v->planes = xs[0] * xs[1];
    v->pin = v->pout = 1;
    for (int a = 0; a < 3; a++) {
        int s = a - (3 - d->nd);
        v->in[a] = s < 0 ? 1 : xs[2 + s];
        v->k[a] = s < 0 ? 1 : d->kernel[s];
        v->s[a] = s < 0 ? 1 : d->stride[s] ? d->stride[s] : d->kernel[s];
        v->p[a] = s < 0 ? 0 : d->padding[s];
        v->d[a] = s < 0 ? 1 : d->dilation[s];
        if (v->k[a] < 1 || v->s[a] < 1 || v->p[a] < 0 || v->d[a] < 1)
            return ladle__raise(LADLE_ERR_ARG, f, "kernel, stride and dilation must be >= 1 "
                                "and padding >= 0");
        if (d->kind == LADLE_POOL_AVG && v->d[a] != 1)
            return ladle__raise(LADLE_ERR_ARG, f, "average pooling has no dilation");
        if (2 * v->p[a] > v->k[a])
            return ladle__raise(LADLE_ERR_ARG, f, "padding %lld is more than half the kernel "
                                "%lld", (long long)v->p[a], (long long)v->k[a]);
        v->out[a] = out_len(v->in[a], v->k[a], v->s[a], v->p[a], v->d[a], d->ceil_mode);
        if (v->out[a] < 1)
            return ladle__raise(LADLE_ERR_SHAPE, f, "the window (%lld) is larger than the "
                                "padded input (%lld)",
                                (long long)(v->d[a] * (v->k[a] - 1) + 1),
                                (long long)(v->in[a] + 2 * v->p[a]));
        v->pin *= v->in[a];
        v->pout *= v->out[a];
    }
    if (v->pin > INT32_MAX)
        return ladle__raise(LADLE_ERR_SHAPE, f, "planes above 2^31 elements");
    return LADLE_OK;
}

static ladle_status finish(pool *v, ladle_dtype dtype, int ndim, const int64_t *xs, int y_ndim,
                           const int64_t *ys, ladle_op **out)
{
    ladle_status st = LADLE_OK;
    ladle_op *op = NULL;
    LADLE_CALL(ladle__layer_new(&pool_vt, dtype, ndim, xs, y_ndim, ys, 1, &op));
    op->impl = v;
    op->linear = v->kind == LADLE_POOL_AVG;
    if (v->kind == LADLE_POOL_MAX)
        op->ctx_bytes = sizeof(int32_t) * (size_t)(v->planes * v->pout);
    *out = op;
    return LADLE_OK;
fail:
    ladle__free(v);
    return st;
}

ladle_status ladle_pool_create(const ladle_pool_desc *d, const int64_t x_shape[],
                               ladle_dtype dtype, ladle_op **out)
{
    ladle_status st = LADLE_OK;
    pool *v = NULL;
    int64_t ys[5];
    LADLE_NOT_NULL(d);
    LADLE_NOT_NULL(out);
    LADLE_CHECK(d->nd >= 1 && d->nd <= 3, LADLE_ERR_ARG, "%d spatial dimensions (1 to 3)",
                d->nd);
    LADLE_CALL(ladle__layer_check_args(__func__, dtype, 2 + d->nd, x_shape, 3));
    v = ladle__calloc(1, sizeof *v);
    LADLE_CHECK(v != NULL, LADLE_ERR_ALLOC, "out of memory");
    LADLE_CALL(plan(d, x_shape, v));
    ys[0] = x_shape[0];
    ys[1] = x_shape[1];
    for (int i = 0; i < d->nd; i++)
        ys[2 + i] = v->out[3 - d->nd + i];
    st = finish(v, dtype, 2 + d->nd, x_shape, 2 + d->nd, ys, out);
    v = NULL;
fail:
    ladle__free(v);
    return st;
}

ladle_status ladle_global_avg_pool_create(int ndim, const int64_t x_shape[], ladle_dtype dtype,
                                          ladle_op **out)
{
    ladle_status st = LADLE_OK;
    pool *v = NULL;
    LADLE_NOT_NULL(out);
    LADLE_CALL(ladle__layer_check_args(__func__, dtype, ndim, x_shape, 3));
    LADLE_CHECK(ndim <= 5, LADLE_ERR_SHAPE, "1 to 3 spatial dimensions, not %d", ndim - 2);
    v = ladle__calloc(1, sizeof *v);
    LADLE_CHECK(v != NULL, LADLE_ERR_ALLOC, "out of memory");
    /* one window covering the whole plane */
    v->kind = LADLE_POOL_AVG;
    v->count_include_pad = 1;
    v->channels = x_shape[1];
    v->planes = x_shape[0] * x_shape[1];
    v->global = 1;
    v->pin = v->pout = 1;
    for (int a = 0; a < 3; a++) {
        int s = a - (3 - (ndim - 2));
        v->in[a] = v->k[a] = v->s[a] = s < 0 ? 1 : x_shape[2 + s];
        v->d[a] = 1;
        v->out[a] = 1;
        v->pin *= v->in[a];
    }
    LADLE_CHECK(v->pin >= 1, LADLE_ERR_SHAPE, "empty spatial planes");
    st = finish(v, dtype, ndim, x_shape, 2, x_shape, out);
    v = NULL;
fail:
    ladle__free(v);
    return st;
}
