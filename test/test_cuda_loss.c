/*
 * The CUDA backend's classification losses with class weights,
 * ignore_index and label smoothing, their label scan (loss_weight_sum),
 * and the vocabulary-parallel loss's row statistics (lse_rows, exp_rows),
 * against the CPU backend's (test/cuda_pair.h): f32 and f64, contiguous
 * classes (few: a thread a sample; many: a block a sample) and strided ones
 * (inner > 1), every reduction, ignored labels inside and outside 0..C-1,
 * more samples than the grid (the emulator's grid is 32 blocks of 256).
 *
 * Tolerances. f64 agrees to 1e-12 (test/cuda_pair.h). In f32 the losses'
 * terms and sums are in double on both sides and rounded once (the CPU's
 * f32 exponentials are within a few ulp of a term, each at most 1, in a
 * log-sum-exp of magnitude at least 1), so the results differ by about one
 * ulp of 1 + |value|: LOSS_F32 as in test_cuda_act.c. The label scan's sum
 * is a sum of the same doubles in another order: 1e-12 relative in both
 * dtypes, and its first bad index is the same. lse_rows: both in double,
 * the CPU's f32 terms within a few ulp (3e-7 of the sum, LSE_F32 of the
 * log's 1 + |lse|); exp_rows: the CPU's f32 exponential within a few ulp,
 * the GPU's in double, then one product and rounding each: EXP_F32.
 */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cuda_pair.h"

#define LOSS_F32 3e-7
#define LSE_F32 4e-7
#define EXP_F32 6e-7

/* A weighted case: kind, smoothing, weights, the ignored label (or none). */
typedef struct wcase {
    ladle_loss_kind kind;
    double smoothing;
    int weights;
    int ignore;
    int64_t ignore_index;
} wcase;

static void weighted_case(ladle_dtype dt, const wcase *w, ladle_reduction red, int64_t n,
                          int64_t c, int64_t inner)
{
    char what[192];
    snprintf(what, sizeof what, "%s red %d e=%g w=%d ignore=%d(%lld) [%lld][%lld][%lld]",
             w->kind == LADLE_LOSS_NLL ? "NLL" : "CE", (int)red, w->smoothing, w->weights,
             w->ignore, (long long)w->ignore_index, (long long)n, (long long)c,
             (long long)inner);
    int64_t samples = n * inner, numel = samples * c;
    double *weight = w->weights ? cp_random(LADLE_F64, c, 0.2, 2.0, 51) : NULL;
    int64_t *labels = calloc((size_t)samples + 1, sizeof(int64_t));
    for (int64_t s = 0; s < samples; s++) /* one in five ignored */
        labels[s] = w->ignore && s % 5 == 2
                        ? w->ignore_index
                        : (int64_t)(ladle__rng_bits(52, 1, (uint64_t)s) % (uint64_t)c);
    ladle_loss_plan l = {.kind = w->kind,
                         .reduction = red,
                         .smoothing = w->smoothing,
                         .classes = c,
                         .inner = inner,
                         .numel = numel,
                         .divisor = 1.0,
                         .weight = weight,
                         .ignore_index = w->ignore_index,
                         .ignore = w->ignore};
    /* the label scan first: its sum is the mean's divisor, as in the layer */
    double sum_cpu = 0, sum_gpu = 0;
    int64_t first_cpu = 0, first_gpu = 0;
    CP_CPU(loss_weight_sum, &l, samples, labels, &sum_cpu, &first_cpu);
    void *d_w = weight ? cp_upload(LADLE_F64, c, weight) : NULL;
    void *d_t = cp_upload(LADLE_I64, samples, labels);
    ladle_loss_plan lg = l;
    lg.weight_dev = d_w;
    CP_GPU(loss_weight_sum, &lg, samples, d_t, &sum_gpu, &first_gpu);
    LT_ASSERT(first_cpu == -1 && first_gpu == -1 &&
                  fabs(sum_gpu - sum_cpu) <= 1e-12 * (1 + fabs(sum_cpu)),
              "%s: label scan %g, first %lld; the CPU's %g, %lld", what, sum_gpu,
              (long long)first_gpu, sum_cpu, (long long)first_cpu);
    if (red == LADLE_REDUCE_MEAN)
        l.divisor = lg.divisor = sum_cpu > 0 ? sum_cpu : 1.0;

    int64_t outs = red == LADLE_REDUCE_NONE ? samples : 1;
    void *x = cp_random(dt, numel, -4, 4, 53 + (uint64_t)numel);
    void *out = cp_host(dt, outs), *dloss = cp_random(dt, outs, 0.5, 1.5, 54);
    void *dx = cp_host(dt, numel);
    CP_CPU(loss_forward, dt, &l, x, labels, out);
    CP_CPU(loss_backward, dt, &l, x, labels, dloss, dx);
    void *d_x = cp_upload(dt, numel, x), *d_out = cp_upload(dt, outs, NULL);
    void *d_dloss = cp_upload(dt, outs, dloss), *d_dx = cp_upload(dt, numel, NULL);
    CP_GPU(loss_forward, dt, &lg, d_x, d_t, d_out);
    CP_CLOSE(dt, outs, d_out, out, cp_tol(dt, LOSS_F32), what);
    CP_GPU(loss_backward, dt, &lg, d_x, d_t, d_dloss, d_dx);
    CP_CLOSE(dt, numel, d_dx, dx, cp_tol(dt, LOSS_F32), what);

    void *dev[] = {d_w, d_t, d_x, d_out, d_dloss, d_dx};
    void *host[] = {weight, labels, x, out, dloss, dx};
    CP_RELEASE(dev, host);
}

START_TEST(weighted_losses)
{
    static const wcase cases[] = {
        {LADLE_LOSS_CROSS_ENTROPY, 0.0, 1, 0, 0},
        {LADLE_LOSS_CROSS_ENTROPY, 0.1, 1, 0, 0},
        {LADLE_LOSS_CROSS_ENTROPY, 0.0, 0, 1, -100},
        {LADLE_LOSS_CROSS_ENTROPY, 0.2, 1, 1, 3},
        {LADLE_LOSS_CROSS_ENTROPY, 0.1, 0, 1, 1},
        {LADLE_LOSS_NLL, 0.0, 1, 0, 0},
        {LADLE_LOSS_NLL, 0.0, 0, 1, -100},
        {LADLE_LOSS_NLL, 0.0, 1, 1, 2},
    };
    static const int64_t shapes[][3] = {{1, 5, 1},    {37, 7, 1}, {9001, 4, 1}, {6, 300, 1},
                                        {300, 40, 1}, {5, 6, 3},  {2, 9, 700}};
    const int nc = (int)(sizeof cases / sizeof cases[0]);
    const int ns = (int)(sizeof shapes / sizeof shapes[0]);
    for (int d = 0; d < 2; d++)
        for (int k = 0; k < nc; k++)
            for (int s = 0; s < ns; s++)
                for (int r = LADLE_REDUCE_MEAN; r <= LADLE_REDUCE_NONE; r++)
                    weighted_case(cp_dtype(d), &cases[k], (ladle_reduction)r, shapes[s][0],
                                  shapes[s][1], shapes[s][2]);
}
END_TEST

/* The label scan's answer for bad labels: the first one neither ignored
 * nor in range, at several places (first, middle, past the first block,
 * several bad), with and without weights. */
START_TEST(label_scan_finds_the_first_bad_label)
{
    const int64_t n = 9001, c = 6;
    double weight[6] = {0.5, 1, 1.5, 2, 2.5, 3};
    int64_t *labels = calloc((size_t)n, sizeof(int64_t));
    static const int64_t at[][2] = {{0, -1}, {4500, 7}, {300, 6}, {8999, -5}};
    for (int wt = 0; wt < 2; wt++)
        for (int k = 0; k < 4; k++) {
            for (int64_t i = 0; i < n; i++)
                labels[i] = i % 7 == 3 ? -100 : i % c;
            labels[at[k][0]] = at[k][1];
            if (k == 3)
                labels[8000] = 9; /* two bad: the first counts */
            ladle_loss_plan l = {.kind = LADLE_LOSS_CROSS_ENTROPY,
                                 .classes = c,
                                 .inner = 1,
                                 .weight = wt ? weight : NULL,
                                 .ignore_index = -100,
                                 .ignore = 1};
            double s0 = 0, s1 = 0;
            int64_t f0 = 0, f1 = 0;
            CP_CPU(loss_weight_sum, &l, n, labels, &s0, &f0);
            void *d_w = cp_upload(LADLE_F64, c, weight),
                 *d_t = cp_upload(LADLE_I64, n, labels);
            l.weight_dev = wt ? d_w : NULL;
            CP_GPU(loss_weight_sum, &l, n, d_t, &s1, &f1);
            int64_t want = k == 3 ? 8000 : at[k][0];
            LT_ASSERT(f0 == want && f1 == want,
                      "bad label at %lld: the CPU says %lld, CUDA %lld", (long long)want,
                      (long long)f0, (long long)f1);
            cp_free(d_w);
            cp_free(d_t);
        }
    free(labels);
}
END_TEST

/* ---- the vocabulary-parallel loss's row statistics ---- */

static void rows_case(ladle_dtype dt, int64_t rows, int64_t len)
{
    char what[96];
    snprintf(what, sizeof what, "rows=%lld len=%lld", (long long)rows, (long long)len);
    int64_t n = rows * len;
    void *x = cp_random(dt, n, -20, 20, 61 + (uint64_t)n);
    /* the edges: a row shifted far up, rows with NaN, +inf, -inf entries,
     * and a row of -inf only */
    for (int64_t r = 0; r < rows && len > 0; r++) {
        if (r % 7 == 1)
            for (int64_t j = 0; j < len; j++)
                cp_set(dt, x, r * len + j, cp_get(dt, x, r * len + j) + 60);
        if (r % 7 == 2)
            cp_set(dt, x, r * len + len / 2, NAN);
        if (r % 7 == 3)
            cp_set(dt, x, r * len, INFINITY);
        if (r % 7 == 4)
            cp_set(dt, x, r * len + len - 1, -INFINITY);
        if (r % 7 == 5)
            for (int64_t j = 0; j < len; j++)
                cp_set(dt, x, r * len + j, -INFINITY);
    }
    double *lse = calloc((size_t)rows + 1, sizeof(double));
    CP_CPU(lse_rows, dt, rows, len, x, lse);
    void *d_x = cp_upload(dt, n, x), *d_lse = cp_upload(LADLE_F64, rows, NULL);
    CP_GPU(lse_rows, dt, rows, len, d_x, d_lse);
    CP_CLOSE(LADLE_F64, rows, d_lse, lse, cp_tol(dt, LSE_F32), what);

    /* exp_rows on finite data: shifts at the row's maximum, below it (the
     * clamp at 88 or 709 above), scales of either sign */
    void *xf = cp_random(dt, n, -30, 30, 62 + (uint64_t)n);
    double *shift = calloc((size_t)rows + 1, sizeof(double));
    double *scale = calloc((size_t)rows + 1, sizeof(double));
    for (int64_t r = 0; r < rows; r++) {
        shift[r] = r % 3 == 0 ? 30.0 : r % 3 == 1 ? -70.0 : 10.5;
        scale[r] = r % 2 ? 0.75 : -1.25;
    }
    if (rows > 4)
        shift[4] = dt == LADLE_F32 ? -100.0 : -720.0; /* past the clamp */
    void *y = cp_host(dt, n);
    CP_CPU(exp_rows, dt, rows, len, xf, shift, scale, y);
    void *d_xf = cp_upload(dt, n, xf), *d_shift = cp_upload(LADLE_F64, rows, shift),
         *d_scale = cp_upload(LADLE_F64, rows, scale);
    void *d_y = cp_upload(dt, n, NULL);
    CP_GPU(exp_rows, dt, rows, len, d_xf, d_shift, d_scale, d_y);
    /* relative to the value: cp_error's 1 + |y| would hide small ones */
    void *got = cp_download(dt, n, d_y);
    double worst = 0;
    for (int64_t i = 0; i < n; i++) {
        double a = cp_get(dt, got, i), b = cp_get(dt, y, i);
        double e = a == b ? 0 : fabs(a - b) / fabs(b);
        worst = e > worst || isnan(e) ? e : worst;
    }
    LT_ASSERT(worst <= cp_tol(dt, EXP_F32) * 2, "exp_rows %s (%s): relative error %.3e",
              what, ladle_dtype_name(dt), worst);
    /* in place: y = x */
    CP_GPU(exp_rows, dt, rows, len, d_xf, d_shift, d_scale, d_xf);
    CP_CLOSE(dt, n, d_xf, got, 0.0, what);

    void *dev[] = {d_x, d_lse, d_xf, d_shift, d_scale, d_y};
    void *host[] = {x, lse, xf, shift, scale, y, got};
    CP_RELEASE(dev, host);
}

START_TEST(row_statistics)
{
    static const int64_t shapes[][2] = {{0, 4},  {3, 0},    {1, 1},    {7, 5},
                                        {9, 33}, {14, 300}, {200, 17}, {3, 5000}};
    const int count = (int)(sizeof shapes / sizeof shapes[0]);
    for (int d = 0; d < 2; d++)
        for (int s = 0; s < count; s++)
            rows_case(cp_dtype(d), shapes[s][0], shapes[s][1]);
}
END_TEST

LT_SUITE("cuda_loss", "cuda_loss", 0, weighted_losses, label_scan_finds_the_first_bad_label,
         row_statistics)
