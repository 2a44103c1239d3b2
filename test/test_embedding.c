/* The token and the positional embedding: values against loops written
 * here, the dot-product test of each linear part (the lookup in the weight
 * and its scatter-add; the positional add in x and in p), finite
 * differences of the weight gradients in f64, repeated ids, smaller
 * batches, the initialisation, bad input. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"

/* n ids in 0 .. vocab-1 from a small generator, with repeats */
static ladle_tensor *ids_tensor(int ndim, const int64_t *shape, int64_t vocab,
                                uint64_t seed)
{
    ladle_tensor *t = lt_tensor(LADLE_I64, ndim, shape);
    int64_t n = ladle_tensor_numel(t);
    int64_t *v = malloc(sizeof(int64_t) * (size_t)(n > 0 ? n : 1));
    for (int64_t i = 0; i < n; i++) {
        seed = seed * 6364136223846793005ull + 1442695040888963407ull;
        v[i] = (int64_t)((seed >> 33) % (uint64_t)vocab);
    }
    if (n > 1)
        v[n - 1] = v[0]; /* at least one repeat */
    LT_OK(ladle_tensor_write(t, v));
    free(v);
    return t;
}

/* The descriptor of V x E, in one expression. */
static const ladle_embedding_desc *ed(ladle_embedding_desc *d, int64_t vocab, int64_t dim)
{
    ladle_embedding_desc_init(d, vocab, dim);
    return d;
}

static double dot(const ladle_tensor *a, const ladle_tensor *b)
{
    double *x = lt_values(a), *y = lt_values(b), s = 0;
    for (int64_t i = 0; i < ladle_tensor_numel(a); i++)
        s += x[i] * y[i];
    free(x), free(y);
    return s;
}

START_TEST(token_values_and_adjoint)
{
    int64_t shapes[3][3] = {{5}, {3, 4}, {2, 3, 2}};
    int ndims[3] = {1, 2, 3};
    for (int s = 0; s < 3; s++)
        for (int f64 = 0; f64 < 2; f64++) {
            ladle_dtype dt = f64 ? LADLE_F64 : LADLE_F32;
            int64_t vocab = 7, dim = 5;
            ladle_op *op = NULL;
            ladle_embedding_desc d;
            LT_OK(ladle_embedding_create(ed(&d, vocab, dim), ndims[s], shapes[s], dt,
                                         lt_device(), (uint64_t)s, &op));
            LT_ASSERT(ladle_op_kind_of(op) == LADLE_OP_EMBEDDING &&
                          ladle_op_num_params(op) == 1,
                      "kind and parameters");
            ladle_tensor *ids = ids_tensor(ndims[s], shapes[s], vocab, (uint64_t)(s + 1));
            ladle_tensor *y = lt_op_tensor(op, 1), *dy = lt_op_tensor(op, 1);
            LT_ASSERT(ladle_tensor_ndim(y) == ndims[s] + 1 &&
                          ladle_tensor_shape(y)[ndims[s]] == dim,
                      "y is ids_shape + [E]");
            LT_OK(ladle_tensor_fill_random(dy, 3, (uint64_t)s));
            ladle_ctx *ctx = lt_forward_backward(op, ids, y, dy, NULL);
            LT_OK(ladle_op_zero_grad(op));
            LT_OK(ladle_layer_backward_weight(op, ctx, dy));
            /* the loops: y[i] = w[id_i]; dw[v] = sum of dy[i] over id_i = v */
            int64_t n = ladle_tensor_numel(ids);
            int64_t *hid = malloc(sizeof(int64_t) * (size_t)n);
            LT_OK(ladle_tensor_read(ids, hid));
            double *w = lt_values(ladle_op_param(op, 0)), *hy = lt_values(y), *hdy = lt_values(dy);
            double *dw = lt_values(ladle_op_grad(op, 0));
            double *want = calloc((size_t)(vocab * dim), sizeof(double));
            double worst = 0;
            for (int64_t i = 0; i < n; i++)
                for (int64_t j = 0; j < dim; j++) {
                    worst = fmax(worst, fabs(hy[i * dim + j] - w[hid[i] * dim + j]));
                    want[hid[i] * dim + j] += hdy[i * dim + j];
                }
            for (int64_t e = 0; e < vocab * dim; e++)
                worst = fmax(worst, fabs(dw[e] - want[e]) / (1 + fabs(want[e])));
            LT_ASSERT(worst < (f64 ? 1e-15 : 1e-6), "shape %d %s: error %.2e", s,
                      ladle_dtype_name(dt), worst);
            /* the dot-product test of the lookup L(w) = y and L* (dy) = dw:
             * <L w, dy> = <w, L* dy> */
            double a = dot(y, dy), b = dot(ladle_op_param(op, 0), ladle_op_grad(op, 0));
            double mis = fabs(a - b) / fmax(fabs(a), fabs(b));
            LT_ASSERT(mis < ladle_adjoint_tolerance(dt), "adjoint mismatch %.2e", mis);
            free(hid), free(w), free(hy), free(hdy), free(dw), free(want);
            ladle_ctx_destroy(&ctx);
            LT_DESTROY(&ids, &y, &dy);
            ladle_op_destroy(&op);
        }
}
END_TEST

/* A repeated id accumulates every row; a smaller batch reads and writes
 * only its own rows; the gradients accumulate across calls. */
START_TEST(token_repeats_and_batches)
{
    int64_t shape[2] = {4, 3}, small[2] = {2, 3};
    ladle_op *op = NULL;
    ladle_embedding_desc d;
    LT_OK(ladle_embedding_create(ed(&d, 4, 2), 2, shape, LADLE_F64, lt_device(), 1, &op));
    ladle_tensor *ids = lt_tensor(LADLE_I64, 2, small);
    int64_t hid[6] = {2, 2, 2, 0, 2, 3};
    LT_OK(ladle_tensor_write(ids, hid));
    int64_t ys[3] = {2, 3, 2};
    ladle_tensor *y = lt_tensor(LADLE_F64, 3, ys), *dy = lt_tensor(LADLE_F64, 3, ys);
    LT_OK(ladle_tensor_fill(dy, 0.5));
    ladle_ctx *ctx = NULL;
    LT_OK(ladle_ctx_create(op, &ctx));
    LT_OK(ladle_layer_forward(op, ctx, ids, y));
    LT_OK(ladle_op_zero_grad(op));
    LT_OK(ladle_layer_backward_weight(op, ctx, dy));
    LT_OK(ladle_layer_backward_weight(op, ctx, dy));
    double *dw = lt_values(ladle_op_grad(op, 0)), *w = lt_values(ladle_op_param(op, 0)),
           *hy = lt_values(y);
    /* id 2 four times, twice over: 4 * 0.5 * 2 = 4; id 0 and 3 once: 1; id 1 never */
    LT_ASSERT(dw[4] == 4 && dw[5] == 4 && dw[0] == 1 && dw[6] == 1 && dw[2] == 0 &&
                  dw[3] == 0,
              "scatter-add: %g %g %g %g %g", dw[4], dw[5], dw[0], dw[6], dw[2]);
    LT_ASSERT(hy[0] == w[4] && hy[1] == w[5] && hy[6] == w[0] && hy[11] == w[7],
              "lookup of a batch of 2");
    free(dw), free(w), free(hy);
    ladle_ctx_destroy(&ctx);
    LT_DESTROY(&ids, &y, &dy);
    ladle_op_destroy(&op);
}
END_TEST

/* nn.Embedding's initialisation: normal(0, 1), the same from the same seed
 * on every dtype, different from another seed. */
START_TEST(initialisation)
{
    int64_t shape[1] = {4};
    ladle_op *a = NULL, *b = NULL, *c = NULL, *p = NULL;
    ladle_embedding_desc d;
    ladle_embedding_desc_init(&d, 200, 50);
    LT_OK(ladle_embedding_create(&d, 1, shape, LADLE_F64, lt_device(), 5, &a));
    LT_OK(ladle_embedding_create(&d, 1, shape, LADLE_F32, lt_device(), 5, &b));
    LT_OK(ladle_embedding_create(&d, 1, shape, LADLE_F64, lt_device(), 6, &c));
    int64_t xs[3] = {2, 3, 4};
    LT_OK(ladle_pos_embedding_create(3, xs, 100, LADLE_F64, lt_device(), 5, &p));
    double *wa = lt_values(ladle_op_param(a, 0)), *wb = lt_values(ladle_op_param(b, 0));
    double *wc = lt_values(ladle_op_param(c, 0)), *wp = lt_values(ladle_op_param(p, 0));
    double mean = 0, var = 0, same = 0, diff = 0;
    int n = 200 * 50;
    for (int i = 0; i < n; i++) {
        mean += wa[i] / n;
        same = fmax(same, fabs(wa[i] - wb[i]));
        diff += wa[i] != wc[i];
    }
    for (int i = 0; i < n; i++)
        var += (wa[i] - mean) * (wa[i] - mean) / n;
    /* 10000 draws: the mean within 4 / sqrt(n) = 0.04, the variance within
     * 4 sqrt(2 / n) = 0.057 */
    LT_ASSERT(fabs(mean) < 0.04 && fabs(var - 1) < 0.057, "normal(0, 1): mean %g var %g",
              mean, var);
    LT_ASSERT(same < 1e-6 && diff > n / 2, "seeded: f32 vs f64 %g, another seed %g", same,
              diff);
    double pm = 0;
    for (int i = 0; i < 400; i++)
        pm += wp[i] * wp[i] / 400;
    LT_ASSERT(fabs(pm - 1) < 0.3, "positional weight normal(0, 1): mean square %g", pm);
    free(wa), free(wb), free(wc), free(wp);
    ladle_op_destroy(&a);
    ladle_op_destroy(&b);
    ladle_op_destroy(&c);
    ladle_op_destroy(&p);
}
END_TEST

/* The weight gradient by central differences in f64: the loss is
 * <y(w), r> for a fixed r, whose gradient is backward_weight(r). */
START_TEST(weight_gradients_by_finite_differences)
{
    int64_t shape[2] = {3, 4}, xs[3] = {3, 4, 2};
    ladle_op *emb = NULL, *pos = NULL;
    ladle_embedding_desc d;
    LT_OK(ladle_embedding_create(ed(&d, 5, 2), 2, shape, LADLE_F64, lt_device(), 2, &emb));
    LT_OK(ladle_pos_embedding_create(3, xs, 6, LADLE_F64, lt_device(), 2, &pos));
    ladle_op *ops[2] = {emb, pos};
    for (int k = 0; k < 2; k++) {
        ladle_op *op = ops[k];
        ladle_tensor *x = k ? lt_op_tensor(op, 0) : ids_tensor(2, shape, 5, 9);
        if (k)
            LT_OK(ladle_tensor_fill_random(x, 4, 0));
        ladle_tensor *y = lt_op_tensor(op, 1), *r = lt_op_tensor(op, 1);
        LT_OK(ladle_tensor_fill_random(r, 4, 1));
        ladle_ctx *ctx = NULL;
        LT_OK(ladle_ctx_create(op, &ctx));
        LT_OK(ladle_layer_forward(op, ctx, x, y));
        LT_OK(ladle_op_zero_grad(op));
        LT_OK(ladle_layer_backward_weight(op, ctx, r));
        ladle_tensor *w = ladle_op_param(op, 0);
        double *g = lt_values(ladle_op_grad(op, 0)), worst = 0;
        for (int64_t i = 0; i < ladle_tensor_numel(w); i++) {
            double v = lt_get(w, i), h = 1e-6, lp, lm;
            lt_set(w, i, v + h);
            LT_OK(ladle_layer_forward(op, NULL, x, y));
            lp = dot(y, r);
            lt_set(w, i, v - h);
            LT_OK(ladle_layer_forward(op, NULL, x, y));
            lm = dot(y, r);
            lt_set(w, i, v);
            worst = fmax(worst, fabs((lp - lm) / (2 * h) - g[i]) / (1 + fabs(g[i])));
        }
        LT_ASSERT(worst < 1e-8, "%s: finite differences %.2e", k ? "positional" : "token",
                  worst);
        free(g);
        ladle_ctx_destroy(&ctx);
        LT_DESTROY(&x, &y, &r);
    }
    ladle_op_destroy(&emb);
    ladle_op_destroy(&pos);
}
END_TEST

START_TEST(positional_values_and_adjoints)
{
    int64_t xs[3] = {4, 3, 5}, small[3] = {2, 3, 5};
    for (int f64 = 0; f64 < 2; f64++)
        for (int nb = 2; nb <= 4; nb += 2) {
            ladle_dtype dt = f64 ? LADLE_F64 : LADLE_F32;
            ladle_op *op = NULL;
            LT_OK(ladle_pos_embedding_create(3, xs, 7, dt, lt_device(), 3, &op));
            LT_ASSERT(ladle_op_kind_of(op) == LADLE_OP_POS_EMBEDDING &&
                          ladle_tensor_shape(ladle_op_param(op, 0))[0] == 7 &&
                          ladle_tensor_shape(ladle_op_param(op, 0))[1] == 5,
                      "the weight is max_len x E");
            const int64_t *cs = nb == 4 ? xs : small;
            ladle_tensor *x = lt_tensor(dt, 3, cs), *y = lt_tensor(dt, 3, cs);
            ladle_tensor *dy = lt_tensor(dt, 3, cs), *dx = lt_tensor(dt, 3, cs);
            LT_OK(ladle_tensor_fill_random(x, 6, 0));
            LT_OK(ladle_tensor_fill_random(dy, 6, 1));
            ladle_ctx *ctx = lt_forward_backward(op, x, y, dy, dx);
            LT_OK(ladle_op_zero_grad(op));
            LT_OK(ladle_layer_backward_weight(op, ctx, dy));
            double *hx = lt_values(x), *hy = lt_values(y);
            double *hdy = lt_values(dy), *hdx = lt_values(dx);
            double *p = lt_values(ladle_op_param(op, 0)), *dp = lt_values(ladle_op_grad(op, 0));
            double worst = 0;
            for (int64_t n = 0; n < nb; n++)
                for (int64_t i = 0; i < 15; i++) {
                    double want = hx[n * 15 + i] + p[i];
                    worst = fmax(worst, fabs(hy[n * 15 + i] - want) / (1 + fabs(want)));
                    worst = fmax(worst, fabs(hdx[n * 15 + i] - hdy[n * 15 + i]));
                }
            for (int64_t i = 0; i < 35; i++) {
                double want = 0;
                for (int64_t n = 0; i < 15 && n < nb; n++)
                    want += hdy[n * 15 + i];
                worst = fmax(worst, fabs(dp[i] - want) / (1 + fabs(want)));
            }
            LT_ASSERT(worst < (f64 ? 1e-15 : 1e-6), "%s batch %d: error %.2e",
                      ladle_dtype_name(dt), nb, worst);
            /* the linear part in p: P(p) = y at x = 0, P*(dy) = dp */
            LT_OK(ladle_tensor_fill(x, 0));
            LT_OK(ladle_layer_forward(op, ctx, x, y));
            double a = dot(y, dy), b = dot(ladle_op_param(op, 0), ladle_op_grad(op, 0));
            double mis = fabs(a - b) / fmax(fabs(a), fabs(b));
            LT_ASSERT(mis < ladle_adjoint_tolerance(dt), "adjoint in p: mismatch %.2e",
                      mis);
            /* the linear part in x: X(x) = y - P(p) (the identity), X*(dy) = dx */
            LT_OK(ladle_tensor_fill_random(x, 6, 2));
            double *py = lt_values(y);
            LT_OK(ladle_layer_forward(op, ctx, x, y));
            double *hy2 = lt_values(y), *dyv = lt_values(dy), s1 = 0;
            for (int64_t e = 0; e < nb * 15; e++)
                s1 += (hy2[e] - py[e]) * dyv[e];
            double s2 = dot(x, dx);
            mis = fabs(s1 - s2) / fmax(fabs(s1), fabs(s2));
            LT_ASSERT(mis < (f64 ? 1e-13 : 1e-5), "adjoint in x: mismatch %.2e", mis);
            /* in place: y = x */
            LT_OK(ladle_layer_forward(op, NULL, x, x));
            double *hx2 = lt_values(x);
            for (int64_t e = 0; e < nb * 15; e++)
                worst = fmax(worst, fabs(hx2[e] - hy2[e]));
            LT_ASSERT(worst < (f64 ? 1e-15 : 1e-6), "in place");
            free(hx), free(hy), free(hdy), free(hdx), free(p), free(dp);
            free(py), free(hy2), free(dyv), free(hx2);
            ladle_ctx_destroy(&ctx);
            LT_DESTROY(&x, &y, &dy, &dx);
            ladle_op_destroy(&op);
        }
}
END_TEST

/* A chain that starts with the token embedding takes ids: embedding, then
 * positional embedding, then layer norm, against the three run by hand. */
START_TEST(in_a_sequential)
{
    int64_t ids_shape[2] = {3, 4}, xs[3] = {3, 4, 6};
    ladle_op *parts[2][3];
    for (int k = 0; k < 2; k++) {
        ladle_layernorm_desc d;
        ladle_layernorm_desc_init(&d, 1);
        ladle_embedding_desc e;
        LT_OK(ladle_embedding_create(ed(&e, 9, 6), 2, ids_shape, LADLE_F64, lt_device(), 4,
                                     &parts[k][0]));
        LT_OK(
            ladle_pos_embedding_create(3, xs, 5, LADLE_F64, lt_device(), 5, &parts[k][1]));
        LT_OK(ladle_layernorm_create(&d, 3, xs, LADLE_F64, lt_device(), &parts[k][2]));
    }
    ladle_op *seq = NULL;
    LT_OK(ladle_sequential_create(3, parts[1], &seq));
    ladle_tensor *ids = ids_tensor(2, ids_shape, 9, 3), *dy = lt_tensor(LADLE_F64, 3, xs);
    LT_OK(ladle_tensor_fill_random(dy, 8, 0));
    /* weight, positions, w, b */
    double worst = lt_chain_error(3, parts[0], seq, ids, dy, 0);
    LT_ASSERT(worst < 1e-15, "the chain against its parts: %.2e", worst);
    for (int i = 0; i < 3; i++)
        ladle_op_destroy(&parts[0][i]);
    ladle_op_destroy(&seq);
    LT_DESTROY(&ids, &dy);
}
END_TEST

START_TEST(bad_input)
{
    int64_t shape[2] = {2, 3}, neg[2] = {2, -1}, xs[3] = {2, 3, 4};
    ladle_op *op = NULL;
    ladle_embedding_desc d, alt;
    ladle_embedding_desc_init(&d, 5, 4);
    LT_FAILS(ladle_embedding_create(NULL, 2, shape, LADLE_F32, lt_device(), 1, &op),
             LADLE_ERR_NULL);
    LT_FAILS(ladle_embedding_create(&d, 2, NULL, LADLE_F32, lt_device(), 1, &op),
             LADLE_ERR_NULL);
    LT_FAILS(ladle_embedding_create(&d, 2, shape, LADLE_F32, lt_device(), 1, NULL),
             LADLE_ERR_NULL);
    LT_FAILS_SAYING(
        ladle_embedding_create(ed(&alt, 0, 4), 2, shape, LADLE_F32, lt_device(), 1, &op),
        LADLE_ERR_ARG, "num_embeddings 0 and embedding_dim 4");
    LT_FAILS_SAYING(
        ladle_embedding_create(ed(&alt, 5, -2), 2, shape, LADLE_F32, lt_device(), 1, &op),
        LADLE_ERR_ARG, "num_embeddings 5 and embedding_dim -2");
    LT_FAILS(ladle_embedding_create(&d, 0, shape, LADLE_F32, lt_device(), 1, &op),
             LADLE_ERR_SHAPE);
    LT_FAILS(ladle_embedding_create(&d, LADLE_MAX_NDIM, xs, LADLE_F32, lt_device(), 1, &op),
             LADLE_ERR_SHAPE);
    LT_FAILS(ladle_embedding_create(&d, 2, neg, LADLE_F32, lt_device(), 1, &op),
             LADLE_ERR_SHAPE);
    LT_FAILS(ladle_embedding_create(&d, 2, shape, LADLE_I64, lt_device(), 1, &op),
             LADLE_ERR_DTYPE);
    /* the descriptor: a size that is not its _init's (a zeroed struct, an
     * older or smaller one), a flag bit the distributed layer does not know */
    ladle_embedding_desc zeroed = {0};
    LT_FAILS_SAYING(
        ladle_embedding_create(&zeroed, 2, shape, LADLE_F32, lt_device(), 1, &op),
        LADLE_ERR_ARG, "descriptor size 0");
    ed(&alt, 5, 4);
    alt.size = sizeof alt - 1;
    LT_FAILS_SAYING(ladle_embedding_create(&alt, 2, shape, LADLE_F32, lt_device(), 1, &op),
                    LADLE_ERR_ARG, "descriptor size");
    ed(&alt, 5, 4);
    alt.flags = 0x80;
    LT_FAILS_SAYING(ladle_embedding_create(&alt, 2, shape, LADLE_F32, lt_device(), 1, &op),
                    LADLE_ERR_ARG, "unknown flags 0x80");
    alt.flags = LADLE_CHECKED | 0x100;
    LT_FAILS_SAYING(ladle_embedding_create(&alt, 2, shape, LADLE_F32, lt_device(), 1, &op),
                    LADLE_ERR_ARG, "unknown flags 0x104");
    LT_ASSERT(op == NULL, "no op on failure");
    /* LADLE_CHECKED, the distributed layer's flag, is accepted and changes
     * nothing on one rank: the same layer bit for bit */
    ladle_op *plain = NULL, *checked = NULL;
    ed(&alt, 5, 4);
    alt.flags = LADLE_CHECKED;
    LT_OK(ladle_embedding_create(&d, 2, shape, LADLE_F64, lt_device(), 3, &plain));
    LT_OK(ladle_embedding_create(&alt, 2, shape, LADLE_F64, lt_device(), 3, &checked));
    {
        /* lt_same_layer draws real x: an embedding reads ids, so the same
         * comparison by hand (weights, y and dW, exactly equal) */
        ladle_op *two[2] = {plain, checked};
        ladle_tensor *tid = ids_tensor(2, shape, 5, 11), *ty[2],
                     *tdy = lt_op_tensor(plain, 1);
        double *got[2][3];
        LT_OK(ladle_tensor_fill_random(tdy, 11, 1));
        for (int k = 0; k < 2; k++) {
            ty[k] = lt_op_tensor(two[k], 1);
            ladle_ctx *ctx = NULL;
            LT_OK(ladle_ctx_create(two[k], &ctx));
            LT_OK(ladle_op_zero_grad(two[k]));
            LT_OK(ladle_layer_forward(two[k], ctx, tid, ty[k]));
            LT_OK(ladle_layer_backward_weight(two[k], ctx, tdy));
            got[k][0] = lt_values(ladle_op_param(two[k], 0));
            got[k][1] = lt_values(ty[k]);
            got[k][2] = lt_values(ladle_op_grad(two[k], 0));
            ladle_ctx_destroy(&ctx);
        }
        int64_t len[3] = {20, 24, 20}; /* V E, 2 3 E, V E */
        int differ = 0;
        for (int j = 0; j < 3; j++)
            for (int64_t e = 0; e < len[j]; e++)
                differ += got[0][j][e] != got[1][j][e];
        LT_ASSERT(differ == 0, "embedding with LADLE_CHECKED: %d values differ", differ);
        for (int k = 0; k < 2; k++) {
            for (int j = 0; j < 3; j++)
                free(got[k][j]);
            ladle_tensor_destroy(&ty[k]);
        }
        ladle_tensor_destroy(&tid);
        ladle_tensor_destroy(&tdy);
    }
    ladle_op_destroy(&plain);
    ladle_op_destroy(&checked);
    /* _init: the size, the extents, no flags; NULL does nothing */
    memset(&alt, 0xff, sizeof alt);
    ladle_embedding_desc_init(&alt, 7, 3);
    LT_ASSERT(alt.size == sizeof alt && alt.num_embeddings == 7 && alt.embedding_dim == 3 &&
                  alt.flags == 0,
              "ladle_embedding_desc_init: size %zu, %lld x %lld, flags 0x%x", alt.size,
              (long long)alt.num_embeddings, (long long)alt.embedding_dim, alt.flags);
    ladle_embedding_desc_init(NULL, 7, 3);
    /* ids out of range: refused before anything is read, naming id and place */
    LT_OK(ladle_embedding_create(&d, 2, shape, LADLE_F64, lt_device(), 1, &op));
    ladle_tensor *ids = lt_tensor(LADLE_I64, 2, shape), *y = lt_op_tensor(op, 1);
    ladle_tensor *fx = lt_tensor(LADLE_F64, 2, shape);
    LT_OK(ladle_tensor_fill(y, 7.0));
    int64_t bad[2][6] = {{0, 1, 2, 3, 4, 5}, {0, 1, 2, 3, -1, 4}};
    const char *say[2] = {"token id 5 at x[1, 2] is outside 0 .. 4",
                          "token id -1 at x[1, 1] is outside 0 .. 4"};
    for (int k = 0; k < 2; k++) {
        LT_OK(ladle_tensor_write(ids, bad[k]));
        ladle_status st = ladle_layer_forward(op, NULL, ids, y);
        LT_ASSERT(st == LADLE_ERR_ARG && strstr(ladle_error_message(), say[k]) != NULL,
                  "%s: %s", ladle_status_name(st), ladle_error_message());
        ladle_error_clear();
    }
    LT_ASSERT(lt_get(y, 0) == 7.0 && lt_get(y, 23) == 7.0, "y untouched by a refused call");
    LT_FAILS(ladle_layer_forward(op, NULL, fx, y), LADLE_ERR_DTYPE);
    LT_FAILS(ladle_layer_forward(op, NULL, NULL, y), LADLE_ERR_NULL);
    /* no gradient for the ids */
    ladle_ctx *ctx = NULL;
    LT_OK(ladle_ctx_create(op, &ctx));
    LT_OK(ladle_tensor_write(ids, (int64_t[]){0, 1, 2, 3, 4, 0}));
    LT_OK(ladle_layer_forward(op, ctx, ids, y));
    LT_FAILS(ladle_layer_backward(op, ctx, y, fx), LADLE_ERR_ARG);
    LT_FAILS(ladle_layer_backward(op, ctx, y, ids), LADLE_ERR_ARG);
    LT_OK(ladle_layer_backward(op, ctx, y, NULL));
    LT_FAILS(ladle_op_adjoint(op, y, fx), LADLE_ERR_UNSUPPORTED);
    ladle_ctx_destroy(&ctx);
    LT_DESTROY(&ids, &y, &fx);
    ladle_op_destroy(&op);
    /* the positional embedding */
    int64_t two[2] = {2, 3}, zero[3] = {2, 0, 4};
    LT_FAILS(ladle_pos_embedding_create(3, NULL, 4, LADLE_F32, lt_device(), 1, &op),
             LADLE_ERR_NULL);
    LT_FAILS(ladle_pos_embedding_create(3, xs, 4, LADLE_F32, lt_device(), 1, NULL),
             LADLE_ERR_NULL);
    LT_FAILS(ladle_pos_embedding_create(2, two, 4, LADLE_F32, lt_device(), 1, &op),
             LADLE_ERR_SHAPE);
    LT_FAILS(ladle_pos_embedding_create(3, xs, 2, LADLE_F32, lt_device(), 1, &op),
             LADLE_ERR_SHAPE); /* T 3 > max_len 2 */
    LT_FAILS(ladle_pos_embedding_create(3, xs, 0, LADLE_F32, lt_device(), 1, &op),
             LADLE_ERR_ARG);
    LT_FAILS(ladle_pos_embedding_create(3, xs, 4, LADLE_I64, lt_device(), 1, &op),
             LADLE_ERR_DTYPE);
    LT_OK(ladle_pos_embedding_create(3, zero, 4, LADLE_F32, lt_device(), 1, &op));
    ladle_op_destroy(&op);
}
END_TEST

static Suite *embedding_suite(void)
{
    return lt_suite("embedding", "embedding", 120, NULL,
                    LT_TESTS(token_values_and_adjoint, token_repeats_and_batches,
                             initialisation, weight_gradients_by_finite_differences,
                             positional_values_and_adjoints, in_a_sequential, bad_input));
}

LT_MAIN(embedding_suite)
