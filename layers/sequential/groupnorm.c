/*
 * Group normalisation (PyTorch's GroupNorm): per sample, the channels are
 * cut into groups of cg = c / groups consecutive channels, and each group
 * (all its positions, M values) is normalised on its own:
 *   mean = sum x / M,  var = sum (x - mean)^2 / M (biased),
 *   y = (x - mean) invstd gamma[ch] + beta[ch],  invstd = 1 / sqrt(var + eps)
 * The same in training and evaluation (no running statistics). With
 * g = gamma dy, S1 = sum g and S2 = sum g (x - mean) over the group:
 *   dx = invstd (g - S1 / M) - (x - mean) invstd^3 S2 / M
 *   dgamma[ch] += sum over samples of invstd sum dy (x - mean),
 *   dbeta[ch] += sum dy
 * The kernels are batch norm's slots on x viewed as 1 x (n c) x inner
 * (layers/sequential/gn_impl.h); the statistics are two passes, per row on
 * the device and folded into groups in double on the host, in row order.
 */
#include <math.h>
#include <string.h>

#include "layers/sequential/gn_impl.h"
#include "layers/sequential/layer_impl.h"

static int64_t saved_doubles(const ladle__gn *v)
{
    return 4 * v->nmax * v->groups + 2 * v->nmax * v->c;
}

ladle_status ladle__gn_alloc(const ladle_op *op, ladle__gn *v)
{
    ladle_status st = LADLE_OK;
    int64_t rows = v->nmax * v->c, grp = v->nmax * v->groups;
    /* (one more: a rank outside a distributed layer's partition has none) */
    v->mx = ladle__calloc((size_t)(6 * rows + 2 * grp + 5 * v->c + 1), sizeof(double));
    LADLE_CHECK(v->mx != NULL, LADLE_ERR_ALLOC, "out of memory");
    double **row[] = {&v->s1, &v->s2, &v->ca, &v->cb, &v->cc};
    for (int i = 0; i < 5; i++)
        *row[i] = v->mx + (i + 1) * rows;
    v->gm = v->mx + 6 * rows;
    v->gi = v->gm + grp;
    double **chan[] = {&v->g, &v->bt, &v->t0, &v->t1, &v->stage};
    for (int i = 0; i < 5; i++)
        *chan[i] = v->gi + grp + i * v->c;
    void *dv = NULL;
    LADLE_CALL(op->be->fn->alloc(
        op->be, sizeof(double) * (size_t)(LADLE__BN_NDEV * rows + 1), &dv));
    v->dev = dv;
fail:
    return st;
}

void ladle__gn_free(ladle__gn *v, const ladle_backend *be)
{
    ladle__free(v->mx);
    v->mx = NULL;
    if (v->dev && be)
        be->fn->free(be, v->dev);
    v->dev = NULL;
}

ladle_status ladle__gn_ctx_init(const ladle__gn *v, ladle_ctx *ctx)
{
    size_t bytes = sizeof(ladle__gn_saved) + sizeof(double) * (size_t)saved_doubles(v);
    ctx->impl = ladle__calloc(1, bytes);
    if (ctx->impl == NULL)
        return ladle__raise(LADLE_ERR_ALLOC, "ladle_ctx_create", "out of memory");
    return LADLE_OK;
}

/* gamma and beta into v->g and v->bt (beta only if asked; 1 and 0 without
 * them). */
static ladle_status gamma_beta(const ladle_op *op, ladle__gn *v,
                               ladle_tensor *const *params, int beta)
{
    ladle_status st = LADLE_OK;
    for (int64_t ch = 0; ch < v->c; ch++) {
        v->g[ch] = 1.0;
        v->bt[ch] = 0.0;
    }
    if (!v->affine)
        return LADLE_OK;
    LADLE_CALL(ladle__bn_read(op->be, params[0], v->c, v->stage, v->g));
    if (beta)
        LADLE_CALL(ladle__bn_read(op->be, params[1], v->c, v->stage, v->bt));
fail:
    return st;
}

/* out[group] = the sum of w[ch] s[row] over the group's rows, in row order
 * (w NULL: 1), then reduced over the ranks that share the groups. */
static ladle_status fold(ladle_op *op, const ladle__gn *v, int64_t n, const double *s,
                         const double *w, double *out)
{
    int64_t cg = v->c / v->groups;
    for (int64_t r = 0; r < n * v->groups; r++) {
        double acc = 0;
        for (int64_t j = 0; j < cg; j++) {
            int64_t ch = r % v->groups * cg + j;
            acc += (w ? w[ch] : 1.0) * s[r * cg + j];
        }
        out[r] = acc;
    }
    return v->reduce ? v->reduce(op, n * v->groups, out) : LADLE_OK;
}

/* mx[row] = mean[the row's group] */
static void spread(const ladle__gn *v, int64_t n, const double *mean, double *mx)
{
    int64_t cg = v->c / v->groups;
    for (int64_t row = 0; row < n * v->c; row++)
        mx[row] = mean[row / cg];
}

ladle_status ladle__gn_forward(ladle_op *op, ladle__gn *v, ladle_tensor *const *params,
                               const void *x, void *y, int64_t n, ladle__gn_saved *sv)
{
    ladle_status st = LADLE_OK;
    int64_t rows = n * v->c, cg = v->c / v->groups;
    if (n == 0)
        return LADLE_OK;
    /* two passes: the mean, then the mean squared deviation */
    LADLE_CALL(ladle__bn_moment(op, 1, rows, v->inner, x, NULL, v->s1, v->dev));
    LADLE_CALL(fold(op, v, n, v->s1, NULL, v->gm));
    for (int64_t r = 0; r < n * v->groups; r++)
        v->gm[r] /= v->count;
    spread(v, n, v->gm, v->mx);
    LADLE_CALL(ladle__bn_moment(op, 1, rows, v->inner, x, v->mx, v->s1, v->dev));
    LADLE_CALL(fold(op, v, n, v->s1, NULL, v->gi));
    for (int64_t r = 0; r < n * v->groups; r++)
        v->gi[r] = 1.0 / sqrt(v->gi[r] / v->count + v->eps);
    /* y = a x + k per row */
    LADLE_CALL(gamma_beta(op, v, params, 1));
    for (int64_t row = 0; row < rows; row++) {
        int64_t ch = row % v->c, r = row / cg;
        v->ca[row] = v->g[ch] * v->gi[r];
        v->cc[row] = v->bt[ch] - v->gm[r] * v->ca[row];
    }
    LADLE_CALL(
        ladle__bn_affine(op, 1, rows, v->inner, x, NULL, y, v->ca, NULL, v->cc, v->dev));
    if (sv) {
        size_t bytes = sizeof(double) * (size_t)(n * v->groups);
        sv->sums_of = NULL;
        sv->group_sums = 0;
        memcpy(sv->v, v->gm, bytes);
        memcpy(sv->v + v->nmax * v->groups, v->gi, bytes);
    }
fail:
    return st;
}

/* The per-row sums of dy and dy (x - mean), once per ctx and dy; with
 * group, also the per-group sums of gamma dy and gamma dy (x - mean),
 * reduced (gamma in v->g). */
static ladle_status sums(ladle_op *op, ladle__gn *v, const void *x, const void *dy,
                         int64_t n, ladle__gn_saved *sv, int group)
{
    ladle_status st = LADLE_OK;
    int64_t gmax = v->nmax * v->groups, rmax = v->nmax * v->c;
    double *s1 = sv->v + 2 * gmax, *s2 = s1 + rmax, *gs = s2 + rmax;
    if (sv->sums_of != dy) {
        spread(v, n, sv->v, v->mx);
        LADLE_CALL(
            ladle__bn_dsums(op, 1, n * v->c, v->inner, x, dy, v->mx, s1, s2, v->dev));
        sv->sums_of = dy;
        sv->group_sums = 0;
    }
    if (group && !sv->group_sums) {
        /* S1 and S2 side by side, so that one reduction takes both */
        for (int i = 0; i < 2; i++) {
            int64_t cg = v->c / v->groups, ng = n * v->groups;
            const double *s = i ? s2 : s1;
            for (int64_t r = 0; r < ng; r++) {
                double acc = 0;
                for (int64_t j = 0; j < cg; j++)
                    acc += v->g[r % v->groups * cg + j] * s[r * cg + j];
                gs[i * ng + r] = acc;
            }
        }
        if (v->reduce)
            LADLE_CALL(v->reduce(op, 2 * n * v->groups, gs));
        sv->group_sums = 1;
    }
fail:
    return st;
}

ladle_status ladle__gn_backward(ladle_op *op, ladle__gn *v, ladle_tensor *const *params,
                                const void *x, const void *dy, void *dx, int64_t n,
                                ladle__gn_saved *sv)
{
    ladle_status st = LADLE_OK;
    int64_t gmax = v->nmax * v->groups, ng = n * v->groups, cg = v->c / v->groups;
    const double *mean = sv->v, *invstd = mean + gmax,
                 *gs = sv->v + 2 * gmax + 2 * v->nmax * v->c;
    if (n == 0)
        return LADLE_OK;
    LADLE_CALL(gamma_beta(op, v, params, 0));
    LADLE_CALL(sums(op, v, x, dy, n, sv, 1));
    /* dx = a dy + b x + k per row */
    for (int64_t row = 0; row < n * v->c; row++) {
        int64_t ch = row % v->c, r = row / cg;
        double is = invstd[r], t = is * is * is * gs[ng + r] / v->count;
        v->ca[row] = v->g[ch] * is;
        v->cb[row] = -t;
        v->cc[row] = -is * gs[r] / v->count + mean[r] * t;
    }
    LADLE_CALL(ladle__bn_affine(op, 1, n * v->c, v->inner, dy, x, dx, v->ca, v->cb, v->cc,
                                v->dev));
fail:
    return st;
}

ladle_status ladle__gn_backward_weight(ladle_op *op, ladle__gn *v,
                                       ladle_tensor *const *grads, const void *x,
                                       const void *dy, int64_t n, ladle__gn_saved *sv)
{
    ladle_status st = LADLE_OK;
    int64_t gmax = v->nmax * v->groups, cg = v->c / v->groups;
    const double *invstd = sv->v + gmax, *s1 = sv->v + 2 * gmax, *s2 = s1 + v->nmax * v->c;
    if (!v->affine || n == 0)
        return LADLE_OK;
    LADLE_CALL(sums(op, v, x, dy, n, sv, 0));
    LADLE_CALL(ladle__bn_read(op->be, grads[0], v->c, v->stage, v->t0));
    LADLE_CALL(ladle__bn_read(op->be, grads[1], v->c, v->stage, v->t1));
    for (int64_t sm = 0; sm < n; sm++)
        for (int64_t ch = 0; ch < v->c; ch++) {
            int64_t row = sm * v->c + ch;
            v->t0[ch] += invstd[row / cg] * s2[row];
            v->t1[ch] += s1[row];
        }
    LADLE_CALL(ladle__bn_write(op->be, grads[0], v->c, v->t0, v->stage));
    LADLE_CALL(ladle__bn_write(op->be, grads[1], v->c, v->t1, v->stage));
fail:
    return st;
}

/* The sequential layer: the shared state and the passes with no reduction. */

static ladle_status gn_forward(ladle_op *op, ladle_ctx *ctx, const ladle_tensor *x,
                               ladle_tensor *y, int64_t n)
{
    return ladle__gn_forward(op, op->impl, op->params, x->data, y->data, n,
                             ctx ? ctx->impl : NULL);
}

static ladle_status gn_backward(ladle_op *op, ladle_ctx *ctx, const ladle_tensor *dy,
                                ladle_tensor *dx, int64_t n)
{
    if (dx == NULL)
        return LADLE_OK;
    return ladle__gn_backward(op, op->impl, op->params, ctx->x->data, dy->data, dx->data, n,
                              ctx->impl);
}

static ladle_status gn_backward_weight(ladle_op *op, ladle_ctx *ctx, const ladle_tensor *dy,
                                       int64_t n)
{
    return ladle__gn_backward_weight(op, op->impl, op->grads, ctx->x->data, dy->data, n,
                                     ctx->impl);
}

static ladle_status gn_ctx_init(const ladle_op *op, ladle_ctx *ctx)
{
    return ladle__gn_ctx_init(op->impl, ctx);
}

static void gn_destroy(ladle_op *op)
{
    if (op->impl)
        ladle__gn_free(op->impl, op->be);
    ladle__free(op->impl);
}

static const ladle_op_vtable gn_vt = {
    .kind = LADLE_OP_GROUPNORM,
    .name = "groupnorm",
    .destroy = gn_destroy,
    .layer_forward = gn_forward,
    .layer_backward = gn_backward,
    .layer_backward_weight = gn_backward_weight,
    .ctx_init = gn_ctx_init,
    .ctx_fini = ladle__layer_ctx_free_impl,
};

void ladle_groupnorm_desc_init(ladle_groupnorm_desc *d, int64_t num_groups,
                               int64_t num_channels)
{
    if (!LADLE_DESC_START(d))
        return;
    d->num_groups = num_groups;
    d->num_channels = num_channels;
    d->eps = 1e-5;
    d->affine = 1;
    d->flags = 0;
}

ladle_status ladle__gn_check(const ladle_groupnorm_desc *d, int ndim,
                             const int64_t *x_shape, const char *func)
{
    if (ndim < 2 || ndim > 5)
        return ladle__raise(LADLE_ERR_SHAPE, func,
                            "group norm takes 2 to 5 dimensions (0 to 3 spatial), not %d",
                            ndim);
    if (!(x_shape[1] == d->num_channels && d->num_channels >= 1))
        return ladle__raise(LADLE_ERR_SHAPE, func, "x has %lld channels, the layer %lld",
                            (long long)x_shape[1], (long long)d->num_channels);
    if (!(d->num_groups >= 1 && d->num_channels % d->num_groups == 0))
        return ladle__raise(LADLE_ERR_ARG, func,
                            "%lld groups do not divide the %lld channels",
                            (long long)d->num_groups, (long long)d->num_channels);
    if (!(d->eps > 0 && isfinite(d->eps)))
        return ladle__raise(LADLE_ERR_ARG, func, "eps %g must be finite and > 0", d->eps);
    if (d->flags & ~(unsigned)LADLE_CHECKED)
        return ladle__raise(LADLE_ERR_ARG, func, "unknown flags 0x%x", d->flags);
    for (int i = 2; i < ndim; i++)
        if (x_shape[i] < 1)
            return ladle__raise(
                LADLE_ERR_SHAPE, func,
                "spatial extent %lld in dimension %d leaves the groups empty",
                (long long)x_shape[i], i);
    return LADLE_OK;
}

ladle_status ladle_groupnorm_create(const ladle_groupnorm_desc *d, int ndim,
                                    const int64_t x_shape[], ladle_dtype dtype,
                                    ladle_device device, ladle_op **out)
{
    ladle_status st = LADLE_OK;
    ladle_op *op = NULL;
    ladle__gn *v = NULL;
    LADLE__CHECK_DESC(d);
    LADLE_NOT_NULL(x_shape);
    LADLE_NOT_NULL(out);
    LADLE_CALL(ladle__layer_check_args(__func__, dtype, ndim, x_shape, 2));
    LADLE_CALL(ladle__gn_check(d, ndim, x_shape, __func__));
    v = ladle__calloc(1, sizeof *v);
    LADLE_CHECK(v != NULL, LADLE_ERR_ALLOC, "out of memory");
    v->c = d->num_channels;
    v->groups = d->num_groups;
    v->nmax = x_shape[0];
    v->inner = 1;
    for (int i = 2; i < ndim; i++)
        v->inner *= x_shape[i];
    v->count = (double)(v->c / v->groups * v->inner);
    v->eps = d->eps;
    v->affine = d->affine != 0;
    /* the layer first: it refuses a device ladle has no backend for */
    LADLE_CALL(ladle__layer_new(&gn_vt, dtype, device, ndim, x_shape, ndim, x_shape, 1, &op,
                                __func__));
    op->impl = v;
    v = NULL;
    LADLE_CALL(ladle__gn_alloc(op, op->impl));
    if (d->affine) {
        ladle_tensor *gamma = NULL;
        LADLE_CALL(ladle__layer_add_param(op, "weight", 1, &d->num_channels, &gamma));
        LADLE_CALL(ladle_tensor_fill(gamma, 1.0));
        LADLE_CALL(ladle__layer_add_param(op, "bias", 1, &d->num_channels, NULL));
    }
    op->linear = 0;
    *out = op;
    return LADLE_OK;
fail:
    ladle__free(v);
    ladle_op_destroy(&op);
    return st;
}
