/* Multi-head self-attention: values and every gradient against loops
 * written here (the full T x T matrices, f64), finite differences, f32
 * against f64, memory linear in T and no allocation in the calls, smaller
 * batches, contexts, the layer in a sequential with layer norm, bad
 * input. */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"
#include "src/backends/cpu/fastmath.h"

typedef struct config {
    int64_t n, t, e, h, d; /* created batch, sequence, width, heads, head_dim */
    int causal, qkv_bias, out_bias;
    int64_t block;
    double scale;  /* 0: the default */
    int f32_tiles; /* the descriptor's (0 unless set) */
} config;

static ladle_status make(const config *c, ladle_dtype dt, uint64_t seed, ladle_op **op)
{
    ladle_attention_desc d;
    ladle_attention_desc_init(&d, c->e, c->h);
    d.head_dim = c->d;
    d.causal = c->causal;
    d.qkv_bias = c->qkv_bias;
    d.out_bias = c->out_bias;
    d.block = c->block;
    d.scale = c->scale;
    d.f32_tiles = c->f32_tiles;
    int64_t xs[3] = {c->n, c->t, c->e};
    return ladle_attention_create(&d, 3, xs, dt, lt_device(), seed, op);
}

/* The reference's parameters and gradients (host, double). */
typedef struct params {
    double *wqkv, *bqkv, *wo, *bo;     /* bqkv, bo NULL when absent */
    double *gwqkv, *gbqkv, *gwo, *gbo; /* gradients, zeroed by reference() */
} params;

/* The layer written the slow way, n samples: every (sample, head) builds
 * its full T x T scores, probabilities and their gradients. The softmax's
 * backward is the Jacobian applied per row, dS = P (dP - sum_u P_u dP_u),
 * not the kernels' D = dO . O form. */
static void reference(const config *c, int64_t n, const double *x, const params *p,
                      const double *dy, double *y, double *dx, params *g)
{
    int64_t T = c->t, E = c->e, H = c->h, d = c->d, hd = H * d;
    double scale = c->scale != 0 ? c->scale : 1 / sqrt((double)d);
    double *qkv = calloc((size_t)(T * 3 * hd), sizeof(double));
    double *o = calloc((size_t)(T * hd), sizeof(double));
    double *dqkv = calloc((size_t)(T * 3 * hd), sizeof(double));
    double *dout = calloc((size_t)(T * hd), sizeof(double));
    double *P = calloc((size_t)(T * T), sizeof(double));
    double *dP = calloc((size_t)(T * T), sizeof(double));
    memset(g->gwqkv, 0, sizeof(double) * (size_t)(3 * hd * E));
    memset(g->gwo, 0, sizeof(double) * (size_t)(E * hd));
    if (g->gbqkv)
        memset(g->gbqkv, 0, sizeof(double) * (size_t)(3 * hd));
    if (g->gbo)
        memset(g->gbo, 0, sizeof(double) * (size_t)E);
    for (int64_t s = 0; s < n; s++) {
        const double *xs = x + s * T * E, *dys = dy + s * T * E;
        for (int64_t t = 0; t < T; t++)
            for (int64_t j = 0; j < 3 * hd; j++) {
                double acc = p->bqkv ? p->bqkv[j] : 0;
                for (int64_t k = 0; k < E; k++)
                    acc += xs[t * E + k] * p->wqkv[j * E + k];
                qkv[t * 3 * hd + j] = acc;
            }
        for (int64_t t = 0; t < T; t++) /* dO = dy W_out */
            for (int64_t j = 0; j < hd; j++) {
                double acc = 0;
                for (int64_t k = 0; k < E; k++)
                    acc += dys[t * E + k] * p->wo[k * hd + j];
                dout[t * hd + j] = acc;
            }
        memset(dqkv, 0, sizeof(double) * (size_t)(T * 3 * hd));
        for (int64_t h = 0; h < H; h++) {
#define Q(t, e) qkv[(t)*3 * hd + h * d + (e)]
#define K(t, e) qkv[(t)*3 * hd + hd + h * d + (e)]
#define V(t, e) qkv[(t)*3 * hd + 2 * hd + h * d + (e)]
            for (int64_t t = 0; t < T; t++) {
                double mx = -INFINITY;
                for (int64_t u = 0; u < T; u++) {
                    double sc = 0;
                    for (int64_t e = 0; e < d; e++)
                        sc += Q(t, e) * K(u, e);
                    P[t * T + u] = c->causal && u > t ? -INFINITY : scale * sc;
                    mx = fmax(mx, P[t * T + u]);
                }
                double sum = 0;
                for (int64_t u = 0; u < T; u++)
                    sum += (P[t * T + u] = exp(P[t * T + u] - mx));
                for (int64_t u = 0; u < T; u++)
                    P[t * T + u] /= sum;
                for (int64_t e = 0; e < d; e++) {
                    double acc = 0;
                    for (int64_t u = 0; u < T; u++)
                        acc += P[t * T + u] * V(u, e);
                    o[t * hd + h * d + e] = acc;
                }
            }
            for (int64_t t = 0; t < T; t++) {
                double pdp = 0;
                for (int64_t u = 0; u < T; u++) {
                    double acc = 0;
                    for (int64_t e = 0; e < d; e++)
                        acc += dout[t * hd + h * d + e] * V(u, e);
                    dP[t * T + u] = acc;
                    pdp += P[t * T + u] * acc;
                }
                for (int64_t u = 0; u < T; u++) {
                    double ds = P[t * T + u] * (dP[t * T + u] - pdp);
                    for (int64_t e = 0; e < d; e++) {
                        dqkv[t * 3 * hd + h * d + e] += scale * ds * K(u, e);
                        dqkv[u * 3 * hd + hd + h * d + e] += scale * ds * Q(t, e);
                        dqkv[u * 3 * hd + 2 * hd + h * d + e] +=
                            P[t * T + u] * dout[t * hd + h * d + e];
                    }
                }
            }
#undef Q
#undef K
#undef V
        }
        for (int64_t t = 0; t < T; t++)
            for (int64_t k = 0; k < E; k++) {
                double acc = p->bo ? p->bo[k] : 0, ax = 0;
                for (int64_t j = 0; j < hd; j++)
                    acc += o[t * hd + j] * p->wo[k * hd + j];
                for (int64_t j = 0; j < 3 * hd; j++)
                    ax += dqkv[t * 3 * hd + j] * p->wqkv[j * E + k];
                y[(s * T + t) * E + k] = acc;
                dx[(s * T + t) * E + k] = ax;
                for (int64_t j = 0; j < hd; j++)
                    g->gwo[k * hd + j] += dys[t * E + k] * o[t * hd + j];
                if (g->gbo)
                    g->gbo[k] += dys[t * E + k];
                for (int64_t j = 0; j < 3 * hd; j++)
                    g->gwqkv[j * E + k] += dqkv[t * 3 * hd + j] * xs[t * E + k];
            }
        for (int64_t t = 0; g->gbqkv && t < T; t++)
            for (int64_t j = 0; j < 3 * hd; j++)
                g->gbqkv[j] += dqkv[t * 3 * hd + j];
    }
    free(qkv), free(o), free(dqkv), free(dout), free(P), free(dP);
}

/* Parameter i of op as the reference names it. */
static double **role(params *p, const ladle_op *op, int i, int grad)
{
    const char *name = ladle_op_param_name(op, i);
    if (strcmp(name, "qkv_weight") == 0)
        return grad ? &p->gwqkv : &p->wqkv;
    if (strcmp(name, "qkv_bias") == 0)
        return grad ? &p->gbqkv : &p->bqkv;
    if (strcmp(name, "out_weight") == 0)
        return grad ? &p->gwo : &p->wo;
    return grad ? &p->gbo : &p->bo;
}

/* lt_layer_pass's reference: the layer of c on n samples with parameters p
 * (in op's order of roles). */
typedef struct attention_ref {
    const config *c;
    int64_t n;
    const ladle_op *op;
    params p;
} attention_ref;

static void attention_reference(const void *arg, const double *x, const double *dy, double *y,
                                double *dx, double *const *grads)
{
    const attention_ref *r = arg;
    params g = {0};
    for (int i = 0; i < ladle_op_num_params(r->op); i++)
        *role(&g, r->op, i, 1) = grads[i];
    reference(r->c, r->n, x, &r->p, dy, y, dx, &g);
}

/* lt_layer_pass for a batch of n against the reference. */
static double run_against_reference(const config *c, int64_t n, uint64_t seed)
{
    ladle_op *op = NULL;
    LT_OK(make(c, LADLE_F64, seed, &op));
    int64_t xs[3] = {n, c->t, c->e};
    ladle_tensor *x = lt_tensor(LADLE_F64, 3, xs), *y = lt_tensor(LADLE_F64, 3, xs);
    ladle_tensor *dy = lt_tensor(LADLE_F64, 3, xs), *dx = lt_tensor(LADLE_F64, 3, xs);
    LT_OK(ladle_tensor_fill_random(x, seed, 10));
    LT_OK(ladle_tensor_fill_random(dy, seed, 11));
    attention_ref r = {c, n, op, {0}};
    for (int i = 0; i < ladle_op_num_params(op); i++) {
        /* larger than the initialisation, for scores of order 1 and more */
        double *v = lt_values(ladle_op_param(op, i));
        for (int64_t e = 0; e < ladle_tensor_numel(ladle_op_param(op, i)); e++)
            v[e] *= 2.5;
        lt_store(ladle_op_param(op, i), v);
        *role(&r.p, op, i, 0) = v;
    }
    double worst = lt_layer_pass(op, x, y, dy, dx, attention_reference, &r);
    free(r.p.wqkv), free(r.p.bqkv), free(r.p.wo), free(r.p.bo);
    LT_DESTROY(&x, &y, &dy, &dx);
    ladle_op_destroy(&op);
    return worst;
}

/* n, t, e, h, d, causal, qkv_bias, out_bias, block, scale, f32_tiles */
static const config cases[] = {
    {2, 5, 6, 2, 3, 1, 1, 1, 0, 0, 0},   /* the defaults, one tile */
    {2, 5, 6, 2, 3, 0, 1, 1, 0, 0, 0},   /* not causal */
    {2, 7, 5, 3, 2, 1, 1, 1, 3, 0, 0},   /* H d = 6 != E = 5; tiles of 3 (3, 3, 1) */
    {2, 7, 5, 1, 9, 0, 0, 1, 2, 0.7, 0}, /* H d = 9 > E; no qkv bias; a scale */
    {3, 1, 4, 2, 2, 1, 1, 1, 0, 0, 0},   /* T = 1 */
    {3, 1, 4, 2, 2, 0, 1, 0, 0, 0, 0},   /* T = 1, not causal, no out bias */
    {3, 13, 7, 1, 5, 1, 0, 0, 4, 0, 0},  /* odd sizes, no biases, 4 tiles */
    {3, 13, 7, 1, 5, 0, 1, 1, 1, 0, 0},  /* tiles of one */
    {2, 150, 8, 2, 4, 1, 1, 1, 0, 0, 0}, /* default tiles of 64: 64, 64, 22 */
    {1, 150, 8, 2, 4, 0, 1, 1, 0, 0, 0}, /* the same, not causal */
};

START_TEST(values_against_loops)
{
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        double e = run_against_reference(&cases[i], cases[i].n, 100 + i);
        LT_ASSERT(e < 1e-12, "case %zu: error %.2e", i, e);
    }
}
END_TEST

START_TEST(smaller_batch)
{
    config c = {5, 9, 6, 3, 2, 1, 1, 1, 4, 0, 0};
    for (int64_t n = 1; n <= 5; n += 2) {
        double e = run_against_reference(&c, n, 200 + (uint64_t)n);
        LT_ASSERT(e < 1e-12, "batch %lld of 5: error %.2e", (long long)n, e);
    }
    /* a batch of 0 does nothing and fails nothing */
    ladle_op *op = NULL;
    LT_OK(make(&c, LADLE_F64, 1, &op));
    lt_layer_empty_batch(op, 3, (const int64_t[]){0, 9, 6});
    ladle_op_destroy(&op);
}
END_TEST

START_TEST(gradients_by_finite_differences)
{
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        if (cases[i].t > 20)
            continue;
        ladle_op *op = NULL;
        LT_OK(make(&cases[i], LADLE_F64, 7 + i, &op));
        ladle_gradient_result r;
        LT_OK(ladle_gradient_test(op, 300 + i, 200, &r));
        LT_ASSERT(r.input_error < 1e-6 && r.max_param_error < 1e-6 &&
                      r.nparams == ladle_op_num_params(op),
                  "case %zu: x %.1e params %.1e (%d of %d)", i, r.input_error,
                  r.max_param_error, r.nparams, ladle_op_num_params(op));
        ladle_op_destroy(&op);
    }
}
END_TEST

/* Forward, backward and backward_weight of an f32 and an f64 layer of c
 * (f32_tiles as given to each) on the same (f32-rounded) input and
 * parameters; the f32 layer's y, dx and gradients into out32 (malloc'd,
 * concatenated; *count values), and the worst difference from the f64
 * layer's relative to the largest magnitude of each tensor, or 1. */
static double f32_run(config c, int tiles32, int tiles64, double **out32, int64_t *count)
{
    ladle_op *ops[2] = {NULL, NULL};
    c.f32_tiles = tiles32;
    LT_OK(make(&c, LADLE_F32, 5, &ops[0]));
    c.f32_tiles = tiles64;
    LT_OK(make(&c, LADLE_F64, 5, &ops[1]));
    int64_t xs[3] = {c.n, c.t, c.e}, total = c.n * c.t * c.e, at = 0, all = 2 * total;
    for (int i = 0; i < ladle_op_num_params(ops[0]); i++)
        all += ladle_tensor_numel(ladle_op_grad(ops[0], i));
    double *keep = malloc(sizeof(double) * (size_t)all);
    ladle_tensor *t[2][4];
    ladle_ctx *ctx[2] = {NULL, NULL};
    lt_twin_run(ops, 3, xs, 31, NULL, NULL, t, ctx);
    double worst = 0;
    for (int j = 0; j < 2 + ladle_op_num_params(ops[0]); j++) {
        const ladle_tensor *ta = j < 2 ? t[0][2 * j + 1] : ladle_op_grad(ops[0], j - 2);
        const ladle_tensor *tb = j < 2 ? t[1][2 * j + 1] : ladle_op_grad(ops[1], j - 2);
        double *a = lt_values(ta), *b = lt_values(tb), big = 1;
        int64_t m = ladle_tensor_numel(ta);
        for (int64_t e = 0; e < m; e++)
            big = fmax(big, fabs(b[e]));
        for (int64_t e = 0; e < m; e++)
            worst = fmax(worst, fabs(a[e] - b[e]) / big);
        memcpy(keep + at, a, sizeof(double) * (size_t)m);
        at += m;
        free(a), free(b);
    }
    lt_twin_free(ops, t, ctx);
    *out32 = keep;
    *count = all;
    return worst;
}

/* f32 against f64 on the same (f32-rounded) input and parameters. With the
 * tiles in double the differences are the f32 projections' GEMMs (sums of
 * E or H d products in f32) and the roundings of qkv, O, dO and dqkv; with
 * f32_tiles also the tiles' f32 products (sums of d or block terms). Each
 * output within 20 f32 epsilons (2.4e-6) of the largest magnitude of its
 * tensor, or 1, either way; f32_tiles changes an f32 layer's results (its
 * path runs) and leaves an f64 layer's bits alone. Two shapes: d 4 with
 * the default tiles (64 + 6 keys), and d 32 in tiles of 16 (16 x 4 + 6). */
START_TEST(f32_against_f64)
{
    config shapes[2] = {{3, 70, 16, 4, 4, 1, 1, 1, 0, 0, 0},
                        {2, 70, 64, 2, 32, 1, 1, 1, 16, 0, 0}};
    for (int s = 0; s < 2; s++)
        for (int causal = 0; causal < 2; causal++) {
            config c = shapes[s];
            c.causal = causal;
            double *v[3];
            int64_t m[3];
            double worst = f32_run(c, 0, 0, &v[0], &m[0]);
            double fast = f32_run(c, 1, 1, &v[1], &m[1]);
            (void)f32_run(c, 1, 0, &v[2], &m[2]); /* the f64 layer without the flag */
            LT_ASSERT(worst < 20 * 1.19e-7 && fast < 20 * 1.19e-7,
                      "shape %d causal %d: f32 vs f64 %.2e, with f32 tiles %.2e (want < 20 "
                      "eps)",
                      s, causal, worst, fast);
            int differ = 0, same = 1;
            for (int64_t e = 0; e < m[0]; e++) {
                differ |= v[0][e] != v[1][e];
                same &= v[1][e] == v[2][e];
            }
            LT_ASSERT(differ, "shape %d causal %d: f32_tiles changed nothing", s, causal);
            LT_ASSERT(same, "shape %d causal %d: f32_tiles changed the f64 layer", s,
                      causal);
            if (lt_rank == 0 && getenv("LADLE_TEST_VERBOSE"))
                printf("attention shape %d causal %d: f32 against f64: %.2e (%.1f eps), "
                       "f32 tiles %.2e (%.1f eps)\n",
                       s, causal, worst, worst / 1.19e-7, fast, fast / 1.19e-7);
            for (int k = 0; k < 3; k++)
                free(v[k]);
        }
}
END_TEST

/* A layer of H d != E is a tensor-parallel shard: a layer of 4 heads equals
 * the sum of two 2-head layers holding its heads' rows of W_qkv, b_qkv and
 * columns of W_out (without the output bias, added once), in y, dx (the
 * input gradient of the sum) and every gradient, each shard's its rows or
 * columns of the whole layer's. */
START_TEST(tensor_parallel_shards)
{
    const int64_t N = 2, T = 9, E = 8, H = 4, D = 2, HD = H * D, S = 2, hs = HD / S;
    int64_t xs[3] = {N, T, E}, total = N * T * E;
    ladle_attention_desc d;
    ladle_attention_desc_init(&d, E, H);
    d.block = 4;
    ladle_op *whole = NULL, *shard[2] = {NULL, NULL};
    LT_OK(ladle_attention_create(&d, 3, xs, LADLE_F64, lt_device(), 3, &whole));
    d.num_heads = H / S;
    d.out_bias = 0;
    double *w = lt_values(ladle_op_param(whole, 0)), *b = lt_values(ladle_op_param(whole, 1));
    double *wo = lt_values(ladle_op_param(whole, 2)), *bo = lt_values(ladle_op_param(whole, 3));
    for (int s = 0; s < S; s++) {
        LT_OK(ladle_attention_create(&d, 3, xs, LADLE_F64, lt_device(), 4, &shard[s]));
        double *sw = malloc(sizeof(double) * (size_t)(3 * hs * E));
        double *sb = malloc(sizeof(double) * (size_t)(3 * hs));
        double *so = malloc(sizeof(double) * (size_t)(E * hs));
        for (int part = 0; part < 3; part++) /* q, k, v rows of this shard's heads */
            for (int64_t r = 0; r < hs; r++) {
                int64_t from = part * HD + s * hs + r, to = part * hs + r;
                memcpy(sw + to * E, w + from * E, sizeof(double) * (size_t)E);
                sb[to] = b[from];
            }
        for (int64_t k = 0; k < E; k++)
            memcpy(so + k * hs, wo + k * HD + s * hs, sizeof(double) * (size_t)hs);
        lt_store(ladle_op_param(shard[s], 0), sw);
        lt_store(ladle_op_param(shard[s], 1), sb);
        lt_store(ladle_op_param(shard[s], 2), so);
        free(sw), free(sb), free(so);
    }
    ladle_tensor *x = lt_tensor(LADLE_F64, 3, xs), *dy = lt_tensor(LADLE_F64, 3, xs);
    ladle_tensor *y[3], *dx[3];
    ladle_ctx *ctx[3];
    ladle_op *ops[3] = {whole, shard[0], shard[1]};
    LT_OK(ladle_tensor_fill_random(x, 5, 0));
    LT_OK(ladle_tensor_fill_random(dy, 5, 1));
    for (int k = 0; k < 3; k++) {
        y[k] = lt_tensor(LADLE_F64, 3, xs);
        dx[k] = lt_tensor(LADLE_F64, 3, xs);
        LT_OK(ladle_ctx_create(ops[k], &ctx[k]));
        LT_OK(ladle_layer_forward(ops[k], ctx[k], x, y[k]));
        LT_OK(ladle_layer_backward(ops[k], ctx[k], dy, dx[k]));
        LT_OK(ladle_layer_backward_weight(ops[k], ctx[k], dy));
    }
    double worst = 0;
    for (int v = 0; v < 2; v++) {
        ladle_tensor **t = v ? dx : y;
        double *a = lt_values(t[0]), *p = lt_values(t[1]), *q = lt_values(t[2]);
        for (int64_t e = 0; e < total; e++) {
            double sum = p[e] + q[e] + (v ? 0 : bo[e % E]);
            worst = fmax(worst, fabs(a[e] - sum) / (1 + fabs(a[e])));
        }
        free(a), free(p), free(q);
    }
    double *gw = lt_values(ladle_op_grad(whole, 0)), *gb = lt_values(ladle_op_grad(whole, 1));
    double *go = lt_values(ladle_op_grad(whole, 2));
    for (int s = 0; s < S; s++) {
        double *sw = lt_values(ladle_op_grad(shard[s], 0)),
               *sb = lt_values(ladle_op_grad(shard[s], 1));
        double *so = lt_values(ladle_op_grad(shard[s], 2));
        for (int part = 0; part < 3; part++)
            for (int64_t r = 0; r < hs; r++) {
                int64_t from = part * HD + s * hs + r, to = part * hs + r;
                for (int64_t k = 0; k < E; k++)
                    worst = fmax(worst, fabs(gw[from * E + k] - sw[to * E + k]) /
                                            (1 + fabs(gw[from * E + k])));
                worst = fmax(worst, fabs(gb[from] - sb[to]) / (1 + fabs(gb[from])));
            }
        for (int64_t k = 0; k < E; k++)
            for (int64_t j = 0; j < hs; j++)
                worst = fmax(worst, fabs(go[k * HD + s * hs + j] - so[k * hs + j]) /
                                        (1 + fabs(go[k * HD + s * hs + j])));
        free(sw), free(sb), free(so);
    }
    LT_ASSERT(worst < 1e-13, "two shards of 2 heads against the 4-head layer: %.2e", worst);
    free(w), free(b), free(wo), free(bo), free(gw), free(gb), free(go);
    for (int k = 0; k < 3; k++) {
        ladle_ctx_destroy(&ctx[k]);
        ladle_tensor_destroy(&y[k]);
        ladle_tensor_destroy(&dx[k]);
        ladle_op_destroy(&ops[k]);
    }
    ladle_tensor_destroy(&x);
    ladle_tensor_destroy(&dy);
}
END_TEST

/* The memory the layer holds is linear in T, never T^2: the saved bytes
 * per ctx and the workspace follow the documented formulas exactly, the
 * bytes allocated for the op and a ctx (counted by the allocator hook, on
 * the CPU) grow by the same amount for every added 256 positions, while P
 * would grow by more each time; and forward and backward allocate
 * nothing. */
START_TEST(memory_linear_in_t)
{
    const int64_t N = 2, E = 8, H = 2, d = 4, B = 64;
    size_t held[4] = {0}, probs[4] = {0};
    for (int k = 0; k < 4; k++) {
        int64_t T = 256 * (k + 1);
        config c = {N, T, E, H, d, 1, 1, 1, 0, 0, 0};
        lt_counter cnt = {0, 0, 0};
        ladle_allocator a = {sizeof a, lt_count_alloc, lt_count_free, &cnt};
        int hook = lt_device() == LADLE_CPU;
        if (hook)
            LT_OK(ladle_allocator_set(&a));
        ladle_op *op = NULL;
        ladle_ctx *ctx = NULL;
        LT_OK(make(&c, LADLE_F32, 1, &op));
        LT_OK(ladle_ctx_create(op, &ctx));
        size_t made = cnt.bytes;
        long blocks = cnt.allocs;
        size_t saved = 0, ws = 0;
        LT_OK(ladle_attention_memory(op, &saved, &ws, &probs[k]));
        size_t es = 4;
        size_t want_saved = 8 * (size_t)(N * H * T) + es * (size_t)(4 * H * d * N * T);
        size_t want_ws =
            want_saved + 8 * (size_t)(7 * T * d + T + 2 * B * B + B * d + 2 * B);
        LT_ASSERT(saved == want_saved && ws == want_ws &&
                      ws == ladle_op_workspace_bytes(op) &&
                      probs[k] == es * (size_t)(N * H * T * T),
                  "T %lld: saved %zu (want %zu), workspace %zu (want %zu), P %zu",
                  (long long)T, saved, want_saved, ws, want_ws, probs[k]);
        if (lt_device() == LADLE_CPU)
            LT_ASSERT(ladle_ctx_bytes(op) >= saved && ladle_ctx_bytes(op) < saved + 4096,
                      "ctx bytes %zu for %zu saved", ladle_ctx_bytes(op), saved);
        held[k] = hook ? made : saved + ws;
        /* the calls allocate nothing */
        int64_t xs[3] = {N, T, E};
        ladle_tensor *x = lt_tensor(LADLE_F32, 3, xs), *y = lt_tensor(LADLE_F32, 3, xs);
        ladle_tensor *dx = lt_tensor(LADLE_F32, 3, xs);
        LT_OK(ladle_tensor_fill_random(x, 2, 0));
        blocks = cnt.allocs;
        LT_OK(ladle_layer_forward(op, ctx, x, y));
        LT_OK(ladle_layer_backward(op, ctx, y, dx));
        LT_OK(ladle_layer_backward_weight(op, ctx, y));
        LT_OK(ladle_layer_forward(op, NULL, x, y));
        LT_ASSERT(cnt.allocs == blocks, "T %lld: the calls allocated %ld blocks",
                  (long long)T, cnt.allocs - blocks);
        LT_DESTROY(&x, &y, &dx);
        ladle_ctx_destroy(&ctx);
        ladle_op_destroy(&op);
        if (hook)
            LT_OK(ladle_allocator_set(NULL));
        if (lt_rank == 0 && getenv("LADLE_TEST_VERBOSE"))
            printf("attention T %lld: held %zu bytes (saved %zu, workspace %zu), P %zu\n",
                   (long long)T, held[k], saved, ws, probs[k]);
    }
    int64_t step = (int64_t)(held[1] - held[0]);
    for (int k = 1; k < 3; k++) {
        LT_ASSERT((int64_t)(held[k + 1] - held[k]) == step,
                  "held bytes %zu, %zu, %zu, %zu are not linear in T", held[0], held[1],
                  held[2], held[3]);
        LT_ASSERT(probs[k + 1] - probs[k] > probs[k] - probs[k - 1], "P grows as T^2");
    }
    LT_ASSERT(held[3] < probs[3], "at T = 1024 the layer holds %zu bytes, P alone %zu",
              held[3], probs[3]);
}
END_TEST

START_TEST(contexts_and_parameters)
{
    ladle_attention_desc d;
    ladle_attention_desc_init(&d, 12, 3);
    LT_ASSERT(d.size == sizeof d && d.embed_dim == 12 && d.num_heads == 3 &&
                  d.head_dim == 4 && d.causal && d.qkv_bias && d.out_bias && d.scale == 0 &&
                  d.block == 0,
              "defaults");
    ladle_attention_desc_init(&d, 10, 3);
    LT_ASSERT(d.head_dim == 0, "no default head_dim when H does not divide E");
    ladle_attention_desc_init(&d, 10, 2);
    d.head_dim = 3;
    int64_t xs[3] = {2, 6, 10};
    ladle_op *op = NULL, *twin = NULL, *other = NULL;
    LT_OK(ladle_attention_create(&d, 3, xs, LADLE_F64, lt_device(), 42, &op));
    LT_OK(ladle_attention_create(&d, 3, xs, LADLE_F64, lt_device(), 42, &twin));
    LT_OK(ladle_attention_create(&d, 3, xs, LADLE_F64, lt_device(), 43, &other));
    const char *names[4] = {"qkv_weight", "qkv_bias", "out_weight", "out_bias"};
    int64_t shapes[4][3] = {{3, 6, 10}, {3, 6, 0}, {10, 6, 0}, {10, 0, 0}};
    double bounds[4] = {1 / sqrt(10.0), 1 / sqrt(10.0), 1 / sqrt(6.0), 1 / sqrt(6.0)};
    LT_ASSERT(ladle_op_kind_of(op) == LADLE_OP_ATTENTION && ladle_op_num_params(op) == 4 &&
                  strcmp(ladle_op_kind_name(LADLE_OP_ATTENTION), "attention") == 0,
              "kind and parameters");
    for (int i = 0; i < 4; i++) {
        const ladle_tensor *p = ladle_op_param(op, i);
        int nd = shapes[i][2] ? 3 : shapes[i][1] ? 2 : 1;
        LT_ASSERT(strcmp(ladle_op_param_name(op, i), names[i]) == 0 &&
                      ladle_tensor_ndim(p) == nd &&
                      ladle_tensor_shape(p)[0] == shapes[i][0] &&
                      (nd == 1 || ladle_tensor_shape(p)[1] == shapes[i][1]) &&
                      (nd < 3 || ladle_tensor_shape(p)[2] == shapes[i][2]),
                  "parameter %d: %s", i, ladle_op_param_name(op, i));
        double *a = lt_values(p), *b = lt_values(ladle_op_param(twin, i)),
               *c = lt_values(ladle_op_param(other, i));
        double lo = 0, hi = 0;
        int same = 1, differs = 0;
        for (int64_t e = 0; e < ladle_tensor_numel(p); e++) {
            lo = fmin(lo, a[e]), hi = fmax(hi, a[e]);
            same &= a[e] == b[e];
            differs |= a[e] != c[e];
        }
        LT_ASSERT(same && differs && lo >= -bounds[i] && hi < bounds[i] &&
                      hi - lo > bounds[i],
                  "%s: uniform in +-%.3f from the seed: [%g, %g], same %d, differs %d",
                  names[i], bounds[i], lo, hi, same, differs);
        free(a), free(b), free(c);
    }
    ladle_op_destroy(&twin);
    ladle_op_destroy(&other);
    /* two contexts in flight keep their own saved state */
    lt_ctx_pair p;
    int same = lt_ctx_pair_run(op, xs, 0, &p);
    /* the workspace moved to caller memory (on the CPU) */
    if (lt_device() == LADLE_CPU) {
        size_t need = ladle_op_workspace_bytes(op);
        void *mem = NULL;
        LT_ASSERT(posix_memalign(&mem, 64, need) == 0, "workspace %zu", need);
        LT_OK(ladle_op_set_workspace(op, mem, need));
        LT_OK(ladle_layer_backward(op, p.c1, p.dy, p.dxb));
        same &= lt_same_values(p.dxa, p.dxb);
        LT_ASSERT(same, "the same dx with the caller's workspace");
        /* and a ctx in caller memory */
        lt_ctx_in_caller_memory(op, &p, same);
        ladle_ctx_destroy(&p.c1); /* contexts before their op */
        ladle_ctx_destroy(&p.c2);
        ladle_op_destroy(&op); /* before its workspace goes */
        free(mem);
    }
    lt_ctx_pair_free(&p);
    ladle_op_destroy(&op);
}
END_TEST

/* The weight gradients of one ctx, with its weight pass right after its
 * backward (which may reuse the backward's dQKV) or apart from it: after
 * another ctx's backward (a zero-bubble order), and with another dy than
 * the backward's. Each against a fresh op's gradients from backward_weight
 * alone (which must compute everything itself), bit for bit. */
static void grads_of(ladle_op *op, double *out)
{
    size_t at = 0;
    for (int i = 0; i < ladle_op_num_params(op); i++) {
        double *g = lt_values(ladle_op_grad(op, i));
        int64_t n = ladle_tensor_numel(ladle_op_grad(op, i));
        memcpy(out + at, g, sizeof(double) * (size_t)n);
        at += (size_t)n;
        free(g);
    }
}

START_TEST(weight_pass_apart)
{
    ladle_attention_desc d;
    ladle_attention_desc_init(&d, 8, 2);
    int64_t xs[3] = {2, 5, 8};
    ladle_op *op = NULL, *fresh = NULL;
    LT_OK(ladle_attention_create(&d, 3, xs, LADLE_F64, lt_device(), 3, &op));
    LT_OK(ladle_attention_create(&d, 3, xs, LADLE_F64, lt_device(), 3, &fresh));
    ladle_tensor *x1 = lt_tensor(LADLE_F64, 3, xs), *x2 = lt_tensor(LADLE_F64, 3, xs);
    ladle_tensor *y = lt_tensor(LADLE_F64, 3, xs), *dx = lt_tensor(LADLE_F64, 3, xs);
    ladle_tensor *dy1 = lt_tensor(LADLE_F64, 3, xs), *dy2 = lt_tensor(LADLE_F64, 3, xs);
    LT_OK(ladle_tensor_fill_random(x1, 1, 0));
    LT_OK(ladle_tensor_fill_random(x2, 2, 0));
    LT_OK(ladle_tensor_fill_random(dy1, 3, 0));
    LT_OK(ladle_tensor_fill_random(dy2, 4, 0));
    ladle_ctx *c1 = NULL, *c2 = NULL, *f1 = NULL;
    LT_OK(ladle_ctx_create(op, &c1));
    LT_OK(ladle_ctx_create(op, &c2));
    LT_OK(ladle_ctx_create(fresh, &f1));
    int np = 8 * 3 * 8 + 3 * 8 + 8 * 8 + 8;
    double *want = calloc((size_t)np, sizeof(double));
    double *got = calloc((size_t)np, sizeof(double));
    /* the reference: x1 with dy1, then x1 with dy2, weight passes alone */
    const ladle_tensor *dys[2] = {dy1, dy2};
    double *ref[2] = {calloc((size_t)np, sizeof(double)),
                      calloc((size_t)np, sizeof(double))};
    for (int k = 0; k < 2; k++) {
        LT_OK(ladle_op_zero_grad(fresh));
        LT_OK(ladle_layer_forward(fresh, f1, x1, y));
        LT_OK(ladle_layer_backward_weight(fresh, f1, dys[k]));
        grads_of(fresh, ref[k]);
    }
    for (int order = 0; order < 3; order++) {
        LT_OK(ladle_op_zero_grad(op));
        LT_OK(ladle_layer_forward(op, c1, x1, y));
        LT_OK(ladle_layer_forward(op, c2, x2, y));
        LT_OK(ladle_layer_backward(op, c1, dy1, dx));
        if (order == 1) /* another ctx's backward in between */
            LT_OK(ladle_layer_backward(op, c2, dy2, dx));
        /* order 2: the weight pass takes another dy than the backward did */
        LT_OK(ladle_layer_backward_weight(op, c1, order == 2 ? dy2 : dy1));
        grads_of(op, got);
        memcpy(want, ref[order == 2], sizeof(double) * (size_t)np);
        double worst = 0;
        for (int i = 0; i < np; i++)
            worst = fmax(worst, fabs(got[i] - want[i]));
        LT_ASSERT(worst == 0, "order %d: the weight gradients differ by %.2e", order,
                  worst);
    }
    free(want), free(got), free(ref[0]), free(ref[1]);
    ladle_ctx_destroy(&c1), ladle_ctx_destroy(&c2), ladle_ctx_destroy(&f1);
    ladle_tensor *all[6] = {x1, x2, y, dx, dy1, dy2};
    for (int i = 0; i < 6; i++)
        ladle_tensor_destroy(&all[i]);
    ladle_op_destroy(&op), ladle_op_destroy(&fresh);
}
END_TEST

/* Layer norm then attention in a sequential: the container's y and
 * gradients equal the two layers' chained by hand, and its gradients pass
 * finite differences. */
START_TEST(in_a_sequential)
{
    int64_t xs[3] = {2, 6, 8};
    ladle_op *parts[2][2];
    for (int k = 0; k < 2; k++) {
        ladle_layernorm_desc ln;
        ladle_layernorm_desc_init(&ln, 1);
        ladle_attention_desc d;
        ladle_attention_desc_init(&d, 8, 2);
        LT_OK(ladle_layernorm_create(&ln, 3, xs, LADLE_F64, lt_device(), &parts[k][0]));
        LT_OK(ladle_attention_create(&d, 3, xs, LADLE_F64, lt_device(), 9, &parts[k][1]));
        LT_OK(ladle_tensor_fill_random(ladle_op_param(parts[k][0], 0), 3, 0));
        LT_OK(ladle_tensor_fill_random(ladle_op_param(parts[k][0], 1), 3, 1));
    }
    ladle_op *seq = NULL;
    LT_OK(ladle_sequential_create(2, parts[1], &seq));
    ladle_tensor *x = lt_tensor(LADLE_F64, 3, xs), *dy = lt_tensor(LADLE_F64, 3, xs);
    LT_OK(ladle_tensor_fill_random(x, 8, 0));
    LT_OK(ladle_tensor_fill_random(dy, 8, 1));
    double worst = lt_chain_error(2, parts[0], seq, x, dy, 1);
    LT_ASSERT(ladle_op_num_params(seq) == 6, "2 + 4 parameters, not %d",
              ladle_op_num_params(seq));
    LT_ASSERT(worst < 1e-15, "the chain against its parts: %.2e", worst);
    ladle_gradient_result r;
    LT_OK(ladle_gradient_test(seq, 77, 200, &r));
    LT_ASSERT(r.input_error < 1e-6 && r.max_param_error < 1e-6 && r.nparams == 6,
              "the chain by finite differences: x %.1e params %.1e", r.input_error,
              r.max_param_error);
    for (int i = 0; i < 2; i++)
        ladle_op_destroy(&parts[0][i]);
    ladle_op_destroy(&seq);
    LT_DESTROY(&x, &dy);
}
END_TEST

START_TEST(bad_input)
{
    int64_t xs[3] = {2, 3, 4};
    ladle_attention_desc d;
    ladle_op *op = NULL;
    ladle_device dev = lt_device();
    ladle_attention_desc_init(&d, 4, 2);
    LT_FAILS(ladle_attention_create(NULL, 3, xs, LADLE_F32, dev, 1, &op), LADLE_ERR_NULL);
    LT_FAILS(ladle_attention_create(&d, 3, NULL, LADLE_F32, dev, 1, &op), LADLE_ERR_NULL);
    LT_FAILS(ladle_attention_create(&d, 3, xs, LADLE_F32, dev, 1, NULL), LADLE_ERR_NULL);
    d.size = 8;
    LT_FAILS(ladle_attention_create(&d, 3, xs, LADLE_F32, dev, 1, &op), LADLE_ERR_ARG);
    /* zero or negative heads, head_dim and widths */
    int64_t bad_e[2] = {0, -4}, bad_h[2] = {0, -1}, bad_d[2] = {0, -2};
    for (int i = 0; i < 2; i++) {
        ladle_attention_desc_init(&d, 4, 2);
        d.num_heads = bad_h[i];
        LT_FAILS(ladle_attention_create(&d, 3, xs, LADLE_F32, dev, 1, &op), LADLE_ERR_ARG);
        ladle_attention_desc_init(&d, 4, 2);
        d.head_dim = bad_d[i];
        LT_FAILS(ladle_attention_create(&d, 3, xs, LADLE_F32, dev, 1, &op), LADLE_ERR_ARG);
        ladle_attention_desc_init(&d, bad_e[i], 2);
        LT_FAILS(ladle_attention_create(&d, 3, xs, LADLE_F32, dev, 1, &op), LADLE_ERR_ARG);
    }
    ladle_attention_desc_init(&d, 4, 3); /* 3 does not divide 4: head_dim 0 */
    LT_FAILS(ladle_attention_create(&d, 3, xs, LADLE_F32, dev, 1, &op), LADLE_ERR_ARG);
    double scales[3] = {-1, NAN, INFINITY};
    for (int i = 0; i < 3; i++) {
        ladle_attention_desc_init(&d, 4, 2);
        d.scale = scales[i];
        LT_FAILS(ladle_attention_create(&d, 3, xs, LADLE_F32, dev, 1, &op), LADLE_ERR_ARG);
    }
    int64_t blocks[2] = {-1, 4097};
    for (int i = 0; i < 2; i++) {
        ladle_attention_desc_init(&d, 4, 2);
        d.block = blocks[i];
        LT_FAILS(ladle_attention_create(&d, 3, xs, LADLE_F32, dev, 1, &op), LADLE_ERR_ARG);
    }
    /* shapes: ndim, zero extents, E not embed_dim, a negative extent */
    ladle_attention_desc_init(&d, 4, 2);
    int64_t x2[2] = {6, 4}, x4[4] = {2, 3, 1, 4};
    int64_t zero_n[3] = {0, 3, 4}, zero_t[3] = {2, 0, 4}, wrong_e[3] = {2, 3, 5},
            neg[3] = {2, -3, 4};
    LT_FAILS(ladle_attention_create(&d, 2, x2, LADLE_F32, dev, 1, &op), LADLE_ERR_SHAPE);
    LT_FAILS(ladle_attention_create(&d, 4, x4, LADLE_F32, dev, 1, &op), LADLE_ERR_SHAPE);
    LT_FAILS(ladle_attention_create(&d, 3, zero_n, LADLE_F32, dev, 1, &op),
             LADLE_ERR_SHAPE);
    LT_FAILS(ladle_attention_create(&d, 3, zero_t, LADLE_F32, dev, 1, &op),
             LADLE_ERR_SHAPE);
    LT_FAILS(ladle_attention_create(&d, 3, wrong_e, LADLE_F32, dev, 1, &op),
             LADLE_ERR_SHAPE);
    LT_FAILS(ladle_attention_create(&d, 3, neg, LADLE_F32, dev, 1, &op), LADLE_ERR_SHAPE);
    /* overflow: heads times head_dim, positions, the saved bytes */
    ladle_attention_desc_init(&d, 4, 2);
    d.num_heads = (int64_t)1 << 40;
    d.head_dim = (int64_t)1 << 40;
    LT_FAILS(ladle_attention_create(&d, 3, xs, LADLE_F32, dev, 1, &op), LADLE_ERR_SHAPE);
    ladle_attention_desc_init(&d, 4, 2);
    int64_t long_t[3] = {(int64_t)1 << 20, (int64_t)1 << 20, 4};
    LT_FAILS(ladle_attention_create(&d, 3, long_t, LADLE_F32, dev, 1, &op),
             LADLE_ERR_SHAPE);
    d.num_heads = (int64_t)1 << 31;
    d.head_dim = 1;
    LT_FAILS(ladle_attention_create(&d, 3, xs, LADLE_F32, dev, 1, &op), LADLE_ERR_SHAPE);
    ladle_attention_desc_init(&d, 4, 2);
    LT_FAILS(ladle_attention_create(&d, 3, xs, LADLE_I64, dev, 1, &op), LADLE_ERR_DTYPE);
    LT_FAILS(ladle_attention_create(&d, 3, xs, LADLE_F32, (ladle_device)77, 1, &op),
             LADLE_ERR_DEVICE);
    LT_ASSERT(op == NULL, "no op on failure");
    LT_FAILS(ladle_attention_memory(NULL, NULL, NULL, NULL), LADLE_ERR_NULL);
    /* calls: wrong shapes, a batch too large, dtypes, no forward yet */
    LT_OK(ladle_attention_create(&d, 3, xs, LADLE_F64, dev, 1, &op));
    ladle_op *ln = NULL;
    ladle_layernorm_desc lnd;
    ladle_layernorm_desc_init(&lnd, 1);
    LT_OK(ladle_layernorm_create(&lnd, 3, xs, LADLE_F64, dev, &ln));
    LT_FAILS(ladle_attention_memory(ln, NULL, NULL, NULL), LADLE_ERR_ARG);
    ladle_op_destroy(&ln);
    int64_t wrong[3] = {2, 4, 4}, big[3] = {3, 3, 4};
    ladle_tensor *x = lt_tensor(LADLE_F64, 3, xs), *y = lt_tensor(LADLE_F64, 3, xs);
    ladle_tensor *xw = lt_tensor(LADLE_F64, 3, wrong), *xb = lt_tensor(LADLE_F64, 3, big);
    ladle_tensor *x32 = lt_tensor(LADLE_F32, 3, xs);
    ladle_ctx *ctx = NULL;
    LT_OK(ladle_ctx_create(op, &ctx));
    LT_FAILS(ladle_layer_backward(op, ctx, y, x), LADLE_ERR_STATE);
    LT_FAILS(ladle_layer_backward_weight(op, ctx, y), LADLE_ERR_STATE);
    lt_forward_refuses(op, ctx, x, y, xw, xb, x32);
    LT_OK(ladle_layer_forward(op, ctx, x, y));
    LT_FAILS(ladle_layer_backward(op, ctx, xw, x), LADLE_ERR_SHAPE);
    LT_FAILS(ladle_layer_backward(op, NULL, y, x), LADLE_ERR_NULL);
    LT_FAILS(ladle_op_adjoint(op, y, x), LADLE_ERR_UNSUPPORTED);
    ladle_ctx_destroy(&ctx);
    ladle_tensor *all[5] = {x, y, xw, xb, x32};
    for (int i = 0; i < 5; i++)
        ladle_tensor_destroy(&all[i]);
    ladle_op_destroy(&op);
}
END_TEST

/* The CPU kernels' double exponential (fastmath.h) against the C
 * library's: within 2 ulps of it (each is within an ulp of e^x) at random
 * points over its range and densely near 0, where softmax's largest terms
 * are; exactly 1 at 0; 0 below the smallest normal result and for -inf; NaN
 * for NaN. */
START_TEST(exp_f64)
{
    uint64_t z = 0x243f6a8885a308d3u; /* splitmix64 */
    double worst = 0;
    for (int i = 0; i < 400000; i++) {
        z += 0x9e3779b97f4a7c15u;
        uint64_t u = z;
        u = (u ^ (u >> 30)) * 0xbf58476d1ce4e5b9u;
        u = (u ^ (u >> 27)) * 0x94d049bb133111ebu;
        u ^= u >> 31;
        double t = (double)(u >> 11) * 0x1p-53;
        double x = i % 2 ? -708.3 + t * (709.0 + 708.3) : -4.0 + 5.0 * t;
        double e = exp(x), f = ladle_exp_f64(x);
        double ulps = fabs(f - e) / (nextafter(e, INFINITY) - e);
        worst = ulps > worst ? ulps : worst;
    }
    LT_ASSERT(worst <= 2.0, "ladle_exp_f64 is %.2f ulps from exp", worst);
    LT_ASSERT(ladle_exp_f64(0.0) == 1.0 && ladle_exp_f64(-0.0) == 1.0, "e^0 is not 1");
    LT_ASSERT(ladle_exp_f64(-708.4) == 0.0 && ladle_exp_f64(-1e300) == 0.0 &&
                  ladle_exp_f64(-INFINITY) == 0.0,
              "below the normal range: %g %g %g", ladle_exp_f64(-708.4),
              ladle_exp_f64(-1e300), ladle_exp_f64(-INFINITY));
    LT_ASSERT(ladle_exp_f64(-708.38) > 0.0, "e^-708.38 is normal, not %g",
              ladle_exp_f64(-708.38));
    LT_ASSERT(isnan(ladle_exp_f64(NAN)), "NaN gives %g", ladle_exp_f64(NAN));
}
END_TEST

static Suite *attention_suite(void)
{
    return lt_suite("attention", "attention", 300, NULL,
                    LT_TESTS(exp_f64, values_against_loops, smaller_batch,
                             gradients_by_finite_differences, f32_against_f64,
                             tensor_parallel_shards, memory_linear_in_t,
                             contexts_and_parameters, weight_pass_apart, in_a_sequential,
                             bad_input));
}

LT_MAIN(attention_suite)
