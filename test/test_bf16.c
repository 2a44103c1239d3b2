/* bf16 mixed precision: the GEMM with f32 accumulation (the gemm_half
 * slot on the suite's device, and both CPU paths, AVX-512 BF16 and the
 * converting one, each forced in turn) against an f64 reference computed
 * from the same bf16 inputs; the linear layer and the activations in bf16
 * against the f32 layers fed the same (bf16-representable) values; and the
 * refusals of what stays f32-only.
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

LT_SUITE("bf16", "bf16", LT_CHECK_TIMEOUT, gemm_both_cpu_paths, gemm_slot_on_the_device)
