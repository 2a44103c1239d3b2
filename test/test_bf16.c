/* bf16 mixed precision: the GEMM with f32 accumulation (the gemm_half
 * slot on the suite's device, and both CPU paths, AVX-512 BF16 and the
 * converting one, each forced in turn) against an f64 reference computed
 * from the same bf16 inputs; the linear layer and the activations in bf16
 * against the f32 layers fed the same (bf16-representable) values; and the
 * refusals of what stays f32-only. On the device also the bits of bf16
 * fill_init and ReLU against references computed here.
 *
 * The GEMM's tolerance, element by element: each product of two bf16 is
 * exact in f32 and the k products and alpha, beta C are combined by k + 2
 * f32 roundings, so |c - ref| <= (k + 2) 2^-24 (|alpha| sum_k |a b| +
 * |beta c0|) (first order; the terms are O(1) and k <= 400, so the second
 * order is below 2^-30 of that). A bf16 C adds its one final rounding, at
 * most half a unit in the last of bf16's 8 bits: 2^-8 |c_f32|. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"
#include "src/backends/cpu/cpu.h"
#include "src/core/backend.h"
#include "src/core/half.h"
#include "src/core/internal.h"

static uint64_t rng = 0x9e3779b97f4a7c15ull;

static uint64_t next(void)
{
    rng ^= rng << 13, rng ^= rng >> 7, rng ^= rng << 17;
    return rng;
}

/* uniform in [-1, 1) times 2^e with e in [-3, 3]: normal bf16 values */
static double random_value(void)
{
    double u = (double)(next() >> 11) * 0x1p-52 - 1.0;
    return ldexp(u, (int)(next() % 7) - 3);
}

static uint16_t random_bf16(int integers)
{
    return ladle__f64_to_bf16(integers ? (double)((int)(next() % 17) - 8) : random_value());
}

static double bf(uint16_t h) { return ladle__bf16_to_f32(h); }

/* One product: shape, transposes, output dtype, scalars, leading
 * dimensions padded by pad elements. */
typedef struct gcase {
    int64_t m, n, k;
    int ta, tb;
    ladle_dtype ct;
    double alpha, beta;
    int pad, integers;
} gcase;

typedef struct operands {
    int64_t lda, ldb, ldc, na, nb, nc;
    uint16_t *a, *b;
    void *c0; /* C before the call, of dtype ct */
} operands;

static void make_operands(const gcase *g, operands *o)
{
    int64_t ar = g->ta ? g->k : g->m, ac = g->ta ? g->m : g->k;
    int64_t br = g->tb ? g->n : g->k, bc = g->tb ? g->k : g->n;
    o->lda = ac + g->pad, o->ldb = bc + g->pad, o->ldc = g->n + g->pad;
    o->na = ar * o->lda, o->nb = br * o->ldb, o->nc = g->m * o->ldc;
    o->a = malloc((size_t)o->na * 2), o->b = malloc((size_t)o->nb * 2);
    o->c0 = malloc((size_t)o->nc * ladle_dtype_size(g->ct));
    for (int64_t i = 0; i < o->na; i++)
        o->a[i] = random_bf16(g->integers);
    for (int64_t i = 0; i < o->nb; i++)
        o->b[i] = random_bf16(g->integers);
    for (int64_t i = 0; i < o->nc; i++)
        ladle__store_real(g->ct, o->c0, i, bf(random_bf16(g->integers)));
}

static void free_operands(operands *o) { free(o->a), free(o->b), free(o->c0); }

/* Elements of c (dtype ct, as the call left it) past the bound; padding
 * columns must be untouched. exact: the integer cases, whose sums f32 holds
 * exactly, must give the correctly rounded reference to the bit. */
static int count_bad(const gcase *g, const operands *o, const void *c, double *worst)
{
    int bad = 0;
    const double u = 0x1p-24;
    for (int64_t i = 0; i < g->m; i++)
        for (int64_t j = 0; j < o->ldc; j++) {
            int64_t e = i * o->ldc + j;
            double got = ladle__load_real(g->ct, c, e), c0 = ladle__load_real(g->ct, o->c0, e);
            if (j >= g->n) {
                bad += memcmp((const char *)c + e * ladle_dtype_size(g->ct),
                              (const char *)o->c0 + e * ladle_dtype_size(g->ct),
                              ladle_dtype_size(g->ct)) != 0;
                continue;
            }
            double s = 0, sa = 0;
            for (int64_t q = 0; q < g->k; q++) {
                double x = bf(g->ta ? o->a[q * o->lda + i] : o->a[i * o->lda + q]);
                double y = bf(g->tb ? o->b[j * o->ldb + q] : o->b[q * o->ldb + j]);
                s += x * y, sa += fabs(x * y);
            }
            double ref = g->alpha * s + (g->beta != 0 ? g->beta * c0 : 0);
            double tol = (double)(g->k + 2) * u * (fabs(g->alpha) * sa + fabs(g->beta * c0));
            if (g->ct == LADLE_BF16)
                tol += 0x1p-8 * (fabs(ref) + tol);
            if (g->integers) {
                char want[8];
                ladle__store_real(g->ct, want, 0, ref);
                bad += got != ladle__load_real(g->ct, want, 0);
            } else {
                bad += !(fabs(got - ref) <= tol);
            }
            if (tol > 0 && fabs(got - ref) / tol > *worst)
                *worst = fabs(got - ref) / tol;
        }
    return bad;
}

static const gcase gcases[] = {
    {1, 1, 1, 0, 0, LADLE_BF16, 1, 0, 0, 0},
    {13, 37, 5, 0, 1, LADLE_BF16, 1, 0, 3, 0},
    {29, 70, 129, 1, 0, LADLE_F32, 1, 1, 0, 0},
    {64, 96, 384, 0, 1, LADLE_BF16, 0.5, -1.25, 1, 0},
    {40, 33, 200, 1, 1, LADLE_F32, -2, 0.75, 2, 0},
    {25, 45, 256, 0, 0, LADLE_BF16, 1, 1, 0, 1},
    {12, 64, 255, 1, 1, LADLE_F32, 1, 1, 5, 1},
    {7, 9, 0, 0, 0, LADLE_BF16, 1, 0.5, 0, 1}, /* k = 0: C = beta C */
};
#define NCASES ((int)(sizeof gcases / sizeof gcases[0]))

/* The CPU's paths on host memory, each forced. */
START_TEST(gemm_both_cpu_paths)
{
    int paths[2] = {LADLE__GEMM_HALF_CONVERT, LADLE__GEMM_HALF_DPBF16}, bad = 0, ran = 0;
    double worst = 0;
    for (int p = 0; p < 2; p++) {
        if (paths[p] == LADLE__GEMM_HALF_DPBF16 && !ladle__cpu_has_dpbf16()) {
            if (lt_rank == 0)
                printf("test_bf16: this CPU has no AVX-512 BF16; its path is not run\n");
            uint16_t one = 0x3f80;
            float c = 0;
            LT_FAILS_SAYING(ladle__cpu_gemm_half_path(paths[p], LADLE_BF16, LADLE_F32, 0, 0, 1,
                                                      1, 1, 1, &one, 1, &one, 1, 0, &c, 1, NULL),
                            LADLE_ERR_UNSUPPORTED, "AVX-512 BF16");
            continue;
        }
        for (int t = 0; t < NCASES; t++) {
            const gcase *g = &gcases[t];
            operands o;
            make_operands(g, &o);
            size_t es = ladle_dtype_size(g->ct);
            void *c = malloc((size_t)o.nc * es);
            memcpy(c, o.c0, (size_t)o.nc * es);
            size_t wsb = ladle__cpu_gemm_half_bytes(paths[p], g->ct, g->m, g->n, g->k);
            void *ws = wsb ? malloc(wsb) : NULL;
            LT_OK(ladle__cpu_gemm_half_path(paths[p], LADLE_BF16, g->ct, g->ta, g->tb, g->m,
                                            g->n, g->k, g->alpha, o.a, o.lda, o.b, o.ldb,
                                            g->beta, c, o.ldc, ws));
            int b = count_bad(g, &o, c, &worst);
            if (b && lt_rank == 0)
                printf("path %d case %d: %d bad\n", paths[p], t, b);
            bad += b, ran++;
            free(c), free(ws);
            free_operands(&o);
        }
    }
    if (lt_rank == 0)
        printf("test_bf16: %d products on the CPU paths, worst error %.3f of the bound\n", ran,
               worst);
    LT_ASSERT(bad == 0, "%d elements past the bound", bad);
}
END_TEST

/* The slot on the suite's device, its workspace as gemm_half_ws says. */
START_TEST(gemm_slot_on_the_device)
{
    const ladle_backend *be = ladle__backend(lt_device());
    LT_ASSERT(be != NULL && be->fn->gemm_half != NULL && be->fn->gemm_half_ws != NULL,
              "the device has the bf16 GEMM");
    int bad = 0;
    double worst = 0;
    for (int t = 0; t < NCASES; t++) {
        const gcase *g = &gcases[t];
        operands o;
        make_operands(g, &o);
        ladle_tensor *a = lt_tensor(LADLE_BF16, 1, (int64_t[]){o.na});
        ladle_tensor *b = lt_tensor(LADLE_BF16, 1, (int64_t[]){o.nb});
        ladle_tensor *c = lt_tensor(g->ct, 1, (int64_t[]){o.nc});
        LT_OK(ladle_tensor_write(a, o.a));
        LT_OK(ladle_tensor_write(b, o.b));
        LT_OK(ladle_tensor_write(c, o.c0));
        size_t wsb = 0;
        LT_OK(be->fn->gemm_half_ws(be, LADLE_BF16, g->ct, g->ta, g->tb, g->m, g->n, g->k, &wsb));
        void *ws = NULL;
        if (wsb)
            LT_OK(be->fn->alloc(be, wsb, &ws));
        LT_OK(be->fn->gemm_half(be, LADLE_BF16, g->ct, g->ta, g->tb, g->m, g->n, g->k, g->alpha,
                                ladle_tensor_data(a), o.lda, ladle_tensor_data(b), o.ldb,
                                g->beta, ladle_tensor_data(c), o.ldc, ws));
        LT_OK(be->fn->synchronize(be));
        void *got = malloc((size_t)o.nc * ladle_dtype_size(g->ct));
        LT_OK(ladle_tensor_read(c, got));
        bad += count_bad(g, &o, got, &worst);
        if (ws)
            be->fn->free(be, ws);
        free(got);
        LT_DESTROY(&a, &b, &c);
        free_operands(&o);
    }
    LT_ASSERT(bad == 0, "%d elements past the bound on %s", bad,
              ladle_device_name(lt_device()));
    /* f16 is not multiplied (yet) */
    LT_FAILS(be->fn->gemm_half(be, LADLE_F16, LADLE_F32, 0, 0, 1, 1, 1, 1, NULL, 1, NULL, 1, 0,
                               NULL, 1, NULL),
             LADLE_ERR_DTYPE);
}
END_TEST

/* ---- layers: bf16 against the f32 layer on the same values ---- */

/* n values, bf16-representable, written to a bf16 tensor and an f32 one */
static void same_values(ladle_tensor *t16, ladle_tensor *t32, double *v)
{
    int64_t n = ladle_tensor_numel(t16);
    uint16_t *h = malloc((size_t)n * 2);
    float *f = malloc((size_t)n * 4);
    for (int64_t i = 0; i < n; i++) {
        h[i] = random_bf16(0);
        f[i] = (float)(v[i] = bf(h[i]));
    }
    LT_OK(ladle_tensor_write(t16, h));
    LT_OK(ladle_tensor_write(t32, f));
    free(h), free(f);
}

/* a tensor's values as doubles (bf16 or f32) */
static double *values(const ladle_tensor *t)
{
    int64_t n = ladle_tensor_numel(t);
    size_t es = ladle_dtype_size(ladle_tensor_dtype(t));
    char *raw = malloc((size_t)n * es);
    double *v = malloc((size_t)n * sizeof(double));
    LT_OK(ladle_tensor_read(t, raw));
    for (int64_t i = 0; i < n; i++)
        v[i] = ladle__load_real(ladle_tensor_dtype(t), raw, i);
    free(raw);
    return v;
}

/* elements where |a - b| > rel |b| + abs_tol[i] (abs_tol may be NULL) */
static int count_far(int64_t n, const double *a, const double *b, double rel,
                     const double *abs_tol, double *worst)
{
    int bad = 0;
    for (int64_t i = 0; i < n; i++) {
        double tol = rel * fabs(b[i]) + (abs_tol ? abs_tol[i] : 0);
        bad += !(fabs(a[i] - b[i]) <= tol);
        if (tol > 0 && fabs(a[i] - b[i]) / tol > *worst)
            *worst = fabs(a[i] - b[i]) / tol;
    }
    return bad;
}

START_TEST(linear_against_f32)
{
    enum { B = 6, T = 5, IN = 70, OUT = 37 };
    const int64_t xs[3] = {B, T, IN}, ys[3] = {B, T, OUT};
    const int64_t M = B * T;
    ladle_linear_desc d;
    ladle_linear_desc_init(&d, IN, OUT);
    ladle_op *l16 = NULL, *l32 = NULL;
    LT_OK(ladle_linear_create(&d, 3, xs, LADLE_BF16, lt_device(), 7, &l16));
    LT_OK(ladle_linear_create(&d, 3, xs, LADLE_F32, lt_device(), 7, &l32));
    LT_ASSERT(ladle_tensor_dtype(ladle_op_grad(l16, 0)) == LADLE_F32 &&
                  ladle_tensor_dtype(ladle_op_grad(l16, 1)) == LADLE_F32 &&
                  ladle_tensor_dtype(ladle_op_param(l16, 0)) == LADLE_BF16,
              "bf16 parameters with f32 gradients");
    double *w = malloc(OUT * IN * sizeof(double)), *bias = malloc(OUT * sizeof(double));
    double *x = malloc(M * IN * sizeof(double)), *dy = malloc(M * OUT * sizeof(double));
    same_values(ladle_op_param(l16, 0), ladle_op_param(l32, 0), w);
    same_values(ladle_op_param(l16, 1), ladle_op_param(l32, 1), bias);
    ladle_tensor *t[2][4]; /* x y dy dx, bf16 then f32 */
    for (int k = 0; k < 2; k++) {
        ladle_dtype dt = k ? LADLE_F32 : LADLE_BF16;
        t[k][0] = lt_tensor(dt, 3, xs), t[k][1] = lt_tensor(dt, 3, ys);
        t[k][2] = lt_tensor(dt, 3, ys), t[k][3] = lt_tensor(dt, 3, xs);
    }
    same_values(t[0][0], t[1][0], x);
    same_values(t[0][2], t[1][2], dy);
    ladle_op *ops[2] = {l16, l32};
    ladle_ctx *ctx[2] = {NULL, NULL};
    for (int k = 0; k < 2; k++) {
        LT_OK(ladle_ctx_create(ops[k], &ctx[k]));
        LT_OK(ladle_op_zero_grad(ops[k]));
        LT_OK(ladle_layer_forward(ops[k], ctx[k], t[k][0], t[k][1]));
        LT_OK(ladle_layer_backward(ops[k], ctx[k], t[k][2], t[k][3]));
        LT_OK(ladle_layer_backward_weight(ops[k], ctx[k], t[k][2]));
    }
    /* both sums are within (k + 2) 2^-24 S of the exact one, S the sum of
     * the terms' magnitudes; bf16 rounds once more (2^-8) */
    const double u = 0x1p-24;
    double *sy = calloc(M * OUT, sizeof(double)), *sx = calloc(M * IN, sizeof(double));
    double *sw = calloc(OUT * IN, sizeof(double)), *sb = calloc(OUT, sizeof(double));
    for (int64_t i = 0; i < M; i++)
        for (int64_t o = 0; o < OUT; o++) {
            for (int64_t c = 0; c < IN; c++) {
                sy[i * OUT + o] += fabs(x[i * IN + c] * w[o * IN + c]);
                sx[i * IN + c] += fabs(dy[i * OUT + o] * w[o * IN + c]);
                sw[o * IN + c] += fabs(dy[i * OUT + o] * x[i * IN + c]);
            }
            sy[i * OUT + o] = 2 * (IN + 3) * u * (sy[i * OUT + o] + fabs(bias[o]));
            sb[o] += fabs(dy[i * OUT + o]);
        }
    for (int64_t e = 0; e < M * IN; e++)
        sx[e] *= 2 * (OUT + 2) * u;
    for (int64_t e = 0; e < OUT * IN; e++)
        sw[e] *= 2 * (M + 2) * u;
    for (int64_t o = 0; o < OUT; o++)
        sb[o] *= 2 * (M + 2) * u;
    double worst = 0;
    int bad = 0;
    double *a, *b;
    a = values(t[0][1]), b = values(t[1][1]);
    bad += count_far(M * OUT, a, b, 0x1p-8, sy, &worst), free(a), free(b);
    a = values(t[0][3]), b = values(t[1][3]);
    bad += count_far(M * IN, a, b, 0x1p-8, sx, &worst), free(a), free(b);
    a = values(ladle_op_grad(l16, 0)), b = values(ladle_op_grad(l32, 0));
    bad += count_far(OUT * IN, a, b, 0, sw, &worst), free(a), free(b);
    a = values(ladle_op_grad(l16, 1)), b = values(ladle_op_grad(l32, 1));
    bad += count_far(OUT, a, b, 0, sb, &worst), free(a), free(b);
    if (lt_rank == 0)
        printf("test_bf16: linear y, dx, dW, db: worst %.3f of the bound\n", worst);
    LT_ASSERT(bad == 0, "%d elements of the bf16 linear layer past the bound", bad);
    for (int k = 0; k < 2; k++) {
        ladle_ctx_destroy(&ctx[k]);
        LT_DESTROY(&t[k][0], &t[k][1], &t[k][2], &t[k][3]);
    }
    ladle_op_destroy(&l16), ladle_op_destroy(&l32);
    free(w), free(bias), free(x), free(dy), free(sy), free(sx), free(sw), free(sb);
}
END_TEST

/* ReLU is exact in bf16; the GELUs are the f32 function rounded once */
START_TEST(activations_against_f32)
{
    const ladle_activation kinds[] = {LADLE_RELU, LADLE_GELU, LADLE_GELU_TANH, LADLE_TANH};
    enum { N = 1031 };
    const int64_t shape[2] = {1, N};
    int bad = 0;
    double worst = 0;
    for (int q = 0; q < 4; q++) {
        ladle_op *o16 = NULL, *o32 = NULL;
        LT_OK(ladle_activation_create(kinds[q], 0, 2, shape, LADLE_BF16, lt_device(), &o16));
        LT_OK(ladle_activation_create(kinds[q], 0, 2, shape, LADLE_F32, lt_device(), &o32));
        ladle_op *ops[2] = {o16, o32};
        ladle_tensor *t[2][4];
        ladle_ctx *ctx[2];
        double v[N];
        for (int k = 0; k < 2; k++)
            for (int r = 0; r < 4; r++)
                t[k][r] = lt_tensor(k ? LADLE_F32 : LADLE_BF16, 2, shape);
        same_values(t[0][0], t[1][0], v);
        same_values(t[0][2], t[1][2], v);
        for (int k = 0; k < 2; k++) {
            LT_OK(ladle_ctx_create(ops[k], &ctx[k]));
            LT_OK(ladle_layer_forward(ops[k], ctx[k], t[k][0], t[k][1]));
            LT_OK(ladle_layer_backward(ops[k], ctx[k], t[k][2], t[k][3]));
        }
        /* y: the f32 value rounded once (2^-8), the f32 values a few of
         * their ulps apart (the copies of the loops may contract differently) */
        double rel = kinds[q] == LADLE_RELU ? 0 : 0x1p-8 + 0x1p-20;
        double *a = values(t[0][1]), *b = values(t[1][1]);
        bad += count_far(N, a, b, rel, NULL, &worst), free(a), free(b);
        /* dx: tanh reads the rounded y (2^-8 of y, times 2|y| / (1 - y^2) of
         * the derivative), so only ReLU and the GELUs are held this tight */
        if (kinds[q] != LADLE_TANH) {
            a = values(t[0][3]), b = values(t[1][3]);
            bad += count_far(N, a, b, rel, NULL, &worst), free(a), free(b);
        }
        for (int k = 0; k < 2; k++) {
            ladle_ctx_destroy(&ctx[k]);
            LT_DESTROY(&t[k][0], &t[k][1], &t[k][2], &t[k][3]);
        }
        ladle_op_destroy(&o16), ladle_op_destroy(&o32);
    }
    if (lt_rank == 0)
        printf("test_bf16: activations: worst %.3f of the bound\n", worst);
    LT_ASSERT(bad == 0, "%d activation elements past the bound", bad);
}
END_TEST

/* ---- elementwise bf16 on the device: bits against independent references ---- */

/* fill_init into a strided bf16 box of a larger tensor: every element the
 * double of its counter (its row-major index in the whole tensor), rounded
 * once. Uniform values are integer mixing and exact scaling, the same bits
 * on any device; normal ones go through the device's log and cos, so there
 * a bf16 may sit one unit away. */
START_TEST(fill_init_bits)
{
    const ladle_backend *be = ladle__backend(lt_device());
    enum { R = 7, C = 45, PAD = 3 };
    int bad = 0, off_by_one = 0;
    for (int gauss = 0; gauss < 2; gauss++) {
        ladle_init_desc d;
        memset(&d, 0, sizeof d);
        d.ndim = 2;
        d.shape[0] = R, d.shape[1] = C;
        d.strides[0] = C + PAD, d.strides[1] = 1;
        d.global[0] = 3 * R, d.global[1] = C + 11;
        d.offset[0] = R + 2, d.offset[1] = 5;
        d.gaussian = gauss;
        d.scale = gauss ? 0.37 : 0.05;
        d.seed = 0x5eed0000u + (uint64_t)lt_rank, d.stream = 4;
        int64_t n = R * (C + PAD);
        uint16_t *h = malloc((size_t)n * 2), *want = malloc((size_t)n * 2);
        for (int64_t i = 0; i < n; i++)
            h[i] = want[i] = (uint16_t)next(); /* padding must survive */
        ladle_tensor *t = lt_tensor(LADLE_BF16, 1, (int64_t[]){n});
        LT_OK(ladle_tensor_write(t, h));
        LT_OK(be->fn->fill_init(be, LADLE_BF16, &d, ladle_tensor_data(t)));
        LT_OK(ladle_tensor_read(t, h));
        for (int64_t i = 0; i < R; i++)
            for (int64_t j = 0; j < C; j++) {
                uint64_t g = (uint64_t)((d.offset[0] + i) * d.global[1] + d.offset[1] + j);
                double v = d.scale * (gauss ? ladle__random_normal(d.seed, d.stream, g)
                                            : ladle__random_uniform(d.seed, d.stream, g));
                want[i * (C + PAD) + j] = ladle__f64_to_bf16(v);
            }
        for (int64_t i = 0; i < n; i++) {
            int diff = abs((int)h[i] - (int)want[i]);
            if (gauss && diff == 1 && lt_device() != LADLE_CPU)
                off_by_one++;
            else
                bad += diff != 0;
        }
        LT_DESTROY(&t);
        free(h), free(want);
    }
    if (lt_rank == 0)
        printf("test_bf16: fill_init on %s: %d normal values one unit off\n",
               ladle_device_name(lt_device()), off_by_one);
    LT_ASSERT(bad == 0 && off_by_one <= 2, "%d bf16 fill_init values wrong, %d one unit off",
              bad, off_by_one);
}
END_TEST

/* ReLU and the leaky ReLU are exact in f32 before the one rounding: the
 * device's bf16 bits must be those of the f32 formula rounded with half.h,
 * forward and backward, here in the test. */
START_TEST(relu_bits)
{
    const ladle_backend *be = ladle__backend(lt_device());
    enum { N = 2053 };
    const double slopes[2] = {0.0, 0.3};
    int bad = 0;
    uint16_t *x = malloc(N * 2), *dy = malloc(N * 2), *y = malloc(N * 2), *dx = malloc(N * 2);
    for (int64_t i = 0; i < N; i++)
        x[i] = random_bf16(0), dy[i] = random_bf16(0);
    x[0] = 0x0000, x[1] = 0x8000, x[2] = 0x0001, x[3] = 0x8001; /* zeros, subnormals */
    for (int q = 0; q < 2; q++) {
        ladle_activation kind = q ? LADLE_LEAKY_RELU : LADLE_RELU;
        float sl = (float)slopes[q];
        ladle_tensor *tx = lt_tensor(LADLE_BF16, 1, (int64_t[]){N});
        ladle_tensor *ty = lt_tensor(LADLE_BF16, 1, (int64_t[]){N});
        ladle_tensor *tdy = lt_tensor(LADLE_BF16, 1, (int64_t[]){N});
        ladle_tensor *tdx = lt_tensor(LADLE_BF16, 1, (int64_t[]){N});
        LT_OK(ladle_tensor_write(tx, x));
        LT_OK(ladle_tensor_write(tdy, dy));
        LT_OK(be->fn->act_forward(be, LADLE_BF16, kind, slopes[q], N, ladle_tensor_data(tx),
                                  ladle_tensor_data(ty)));
        LT_OK(be->fn->act_backward(be, LADLE_BF16, kind, slopes[q], N, ladle_tensor_data(tx),
                                   ladle_tensor_data(ty), ladle_tensor_data(tdy),
                                   ladle_tensor_data(tdx)));
        LT_OK(ladle_tensor_read(ty, y));
        LT_OK(ladle_tensor_read(tdx, dx));
        for (int64_t i = 0; i < N; i++) {
            float v = ladle__bf16_to_f32(x[i]), g = ladle__bf16_to_f32(dy[i]);
            float fy = v > 0 ? v : (q ? sl * v : 0.0f);
            float fdx = v > 0 ? g : (q ? sl * g : 0.0f);
            bad += y[i] != ladle__f32_to_bf16(fy);
            bad += dx[i] != ladle__f32_to_bf16(fdx);
        }
        LT_DESTROY(&tx, &ty, &tdy, &tdx);
    }
    free(x), free(dy), free(y), free(dx);
    LT_ASSERT(bad == 0, "%d bf16 ReLU bits differ on %s", bad, ladle_device_name(lt_device()));
}
END_TEST

/* what stays f32-only says so at creation; f16 layers too */
START_TEST(refusals)
{
    ladle_op *op = NULL;
    ladle_linear_desc ld;
    ladle_linear_desc_init(&ld, 4, 3);
    LT_FAILS_SAYING(ladle_linear_create(&ld, 2, (int64_t[]){2, 4}, LADLE_F16, lt_device(), 1, &op),
                    LADLE_ERR_DTYPE, "not f32 or f64");
    LT_FAILS(ladle_activation_create(LADLE_RELU, 0, 1, (int64_t[]){4}, LADLE_F16, lt_device(),
                                     &op),
             LADLE_ERR_DTYPE);
    LT_FAILS(ladle_softmax_create(2, (int64_t[]){2, 4}, 1, LADLE_SOFTMAX, LADLE_BF16, lt_device(), &op),
             LADLE_ERR_DTYPE);
    ladle_partition *p = lt_partition(1, (int[]){lt_size}, 0);
    ladle_broadcast_desc bd;
    ladle_broadcast_desc_init(&bd, 1, (int64_t[]){4});
    LT_FAILS_SAYING(ladle_broadcast_create(&bd, p, p, LADLE_BF16, lt_device(), &op),
                    LADLE_ERR_DTYPE, "not f32 or f64");
    ladle_partition_destroy(&p);
    LT_ASSERT(op == NULL, "no op made");
}
END_TEST

LT_SUITE("bf16", "bf16", LT_CHECK_TIMEOUT, gemm_both_cpu_paths, gemm_slot_on_the_device,
         linear_against_f32, activations_against_f32, fill_init_bits, relu_bits, refusals)
