/*
 * The CUDA backend's activation, softmax, loss, dropout and optimizer slots
 * against the CPU backend's (test/cuda_pair.h): every kind in f32 and f64,
 * sizes empty, one, odd and past the grid (over 32 blocks of 256 threads,
 * the emulator's widest grid-stride launch), the aliasing the contract
 * allows, and the edges it names (NaN, infinities, -inf in softmax rows,
 * rows of large values).
 *
 * Tolerances. f64 agrees to 1e-12 (test/cuda_pair.h). In f32 (an ulp of a
 * value near 1 is 1.2e-7; cp_error divides by 1 + |value|):
 *   - activations: the CPU's f32 loops use the approximations of
 *     src/backends/cpu/fastmath.h, measured against double math rounded to
 *     f32 over [-90, 90] at up to 1.5e-7 of 1 + |f(x)| (tanh; sigmoid and
 *     GELU 1e-7, their backwards 1.2e-7 given the same y); the GPU calls
 *     CUDA's expf, tanhf and erfcf (at most 2, 2 and 4 ulp) and rounds one
 *     or two products more: at most 6 ulp, 7.2e-7 (ACT_GPU, which the
 *     GPU's f32 values must also meet against double math). Both together
 *     stay under ACT_F32.
 *   - softmax: both sum in double. The CPU's terms are double
 *     exponentials, the GPU's f32 ones within 2 ulp (2.4e-7 relative), so
 *     its lse is within 2.4e-7; an f32 output exp(x - lse) adds 2 ulp of
 *     expf and a rounding (under 6 ulp of a value at most 1, half that of
 *     1 + y), a log-softmax output x - lse the lse's error and half an ulp.
 *     The backward sums in double on both sides; its exp(y) of a
 *     log-softmax costs 2 ulp of a term at most 1 + |dx|. SOFTMAX_F32 is
 *     5 ulp of 1.
 *   - losses: every term and sum in double on both sides, rounded to f32
 *     once, so the two differ by at most the one ulp (1.2e-7) that rounding
 *     can put between two doubles a few ulps apart: LOSS_F32.
 *   - dropout and the optimizers are exact: the same decision and one
 *     rounded product per element; the optimizers' double arithmetic is
 *     the CPU's operation for operation without fused multiply-adds (see
 *     src/backends/cuda/optim.cu), so parameters and state agree bit for bit.
 *   - the scans return the same index.
 */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cuda_pair.h"

#define ACT_F32 1e-6
#define ACT_GPU 7.5e-7
#define SOFTMAX_F32 6e-7
#define LOSS_F32 3e-7

static const ladle_dtype dtypes[2] = {LADLE_F32, LADLE_F64};

/* empty, one, odd, a few blocks, past the grid */
static const int64_t sizes[] = {0, 1, 7, 1000, 9001};
#define NSIZES (int)(sizeof sizes / sizeof sizes[0])

static double tol(ladle_dtype dt, double f32) { return dt == LADLE_F64 ? 1e-12 : f32; }

/* ---- activations ---- */

static const char *act_names[] = {"relu", "leaky_relu", "sigmoid", "tanh", "gelu", "gelu_tanh"};

/* Random x in [-6, 6) with the edges spread over it: NaN, infinities,
 * signed zeros, values near GELU's 1e-20 cut, tails that underflow. */
static void *act_input(ladle_dtype dt, int64_t n, uint64_t seed)
{
    static const double edges[] = {NAN,   INFINITY, -INFINITY, 0.0,   -0.0,  1e-30,  -1e-30,
                                   1e-19, -2e-20,   30.0,      -30.0, 100.0, -100.0, -9.0};
    const int count = (int)(sizeof edges / sizeof edges[0]);
    void *x = cp_random(dt, n, -6, 6, seed);
    for (int k = 0; n >= count && k < count; k++)
        cp_set(dt, x, k * (n / count), edges[k]);
    return x;
}

/* Forward and backward of one kind against the CPU; alias: y = x in the
 * forward, dx = dy in the backward, and x given as y's storage where the
 * kind reads only y. */
static void act_case(ladle_dtype dt, ladle_activation kind, double slope, int64_t n,
                     int alias)
{
    char what[128];
    snprintf(what, sizeof what, "%s n=%lld%s", act_names[kind], (long long)n,
             alias ? " in place" : "");
    void *x = act_input(dt, n, 11 + (uint64_t)n), *y = cp_host(dt, n);
    void *dy = cp_random(dt, n, -1, 1, 12), *dx = cp_host(dt, n);
    CP_CPU(act_forward, dt, kind, slope, n, x, y);
    CP_CPU(act_backward, dt, kind, slope, n, x, y, dy, dx);

    void *d_x = cp_upload(dt, n, x), *d_y = alias ? d_x : cp_upload(dt, n, NULL);
    CP_GPU(act_forward, dt, kind, slope, n, d_x, d_y);
    CP_CLOSE(dt, n, d_y, y, tol(dt, ACT_F32), what);

    /* the backward from the CPU's x and y, so only its own math differs */
    void *b_x = cp_upload(dt, n, x), *b_y = cp_upload(dt, n, y),
         *b_dy = cp_upload(dt, n, dy);
    void *b_dx = alias ? b_dy : cp_upload(dt, n, NULL);
    const void *x_arg = alias && kind != LADLE_GELU && kind != LADLE_GELU_TANH ? b_y : b_x;
    CP_GPU(act_backward, dt, kind, slope, n, x_arg, b_y, b_dy, b_dx);
    CP_CLOSE(dt, n, b_dx, dx, tol(dt, ACT_F32), what);

    cp_free(d_x);
    if (!alias)
        cp_free(d_y);
    cp_free(b_x);
    cp_free(b_y);
    cp_free(b_dy);
    if (!alias)
        cp_free(b_dx);
    free(x);
    free(y);
    free(dy);
    free(dx);
}

START_TEST(activations)
{
    for (int d = 0; d < 2; d++)
        for (int kind = LADLE_RELU; kind <= LADLE_GELU_TANH; kind++)
            for (int s = 0; s < NSIZES; s++)
                for (int alias = 0; alias < 2; alias++)
                    act_case(dtypes[d], (ladle_activation)kind,
                             kind == LADLE_LEAKY_RELU ? 0.2 : 0.0, sizes[s], alias);
    /* a negative slope: the backward reads x, never in place */
    for (int d = 0; d < 2; d++)
        for (int s = 0; s < NSIZES; s++)
            act_case(dtypes[d], LADLE_LEAKY_RELU, -0.3, sizes[s], 0);
}
END_TEST

/* The GPU's f32 activations against double math (not the CPU): CUDA's own
 * functions stay within a few ulp of the true values over the range. */
START_TEST(activations_f32_accuracy)
{
    const int64_t n = 4001;
    float *x = cp_random(LADLE_F32, n, -12, 12, 5);
    void *d_x = cp_upload(LADLE_F32, n, x);
    for (int kind = LADLE_SIGMOID; kind <= LADLE_GELU_TANH; kind++) {
        CP_GPU(act_forward, LADLE_F32, (ladle_activation)kind, 0.0, n, d_x, d_x);
        float *got = cp_download(LADLE_F32, n, d_x);
        double worst = 0;
        for (int64_t i = 0; i < n; i++) {
            double v = x[i];
            double r = kind == LADLE_SIGMOID ? 1 / (1 + exp(-v))
                       : kind == LADLE_TANH  ? tanh(v)
                       : kind == LADLE_GELU  ? 0.5 * v * erfc(-v / sqrt(2.0))
                                             : 0.5 * v * (1 + tanh(sqrt(2 / acos(-1.0)) *
                                                                   (v + 0.044715 * v * v * v)));
            double e = fabs(got[i] - r) / (1 + fabs(r));
            worst = e > worst ? e : worst;
        }
        LT_ASSERT(worst < ACT_GPU, "%s f32 against double math: %.3e", act_names[kind],
                  worst);
        CP_GPU(to_device, (size_t)n * sizeof(float), x, d_x);
        LT_OK(cp_gpu()->fn->synchronize(cp_gpu()));
        free(got);
    }
    cp_free(d_x);
    free(x);
}
END_TEST

/* ---- softmax ---- */

/* The rows' edges: a row shifted by 1000 (stability), -inf entries, a
 * row of -inf only and one holding a NaN (NaN lines on both). */
static void softmax_edges(ladle_dtype dt, void *x, int64_t outer, int64_t len,
                          int64_t inner)
{
    int64_t lines = outer * inner;
    for (int64_t l = 0; l < lines; l++) {
        int64_t base = (l / inner) * len * inner + l % inner;
        for (int64_t k = 0; k < len; k++) {
            int64_t i = base + k * inner;
            if (l % 5 == 1)
                cp_set(dt, x, i, cp_get(dt, x, i) + 1000);
            if (l % 5 == 2 && k % 3 == 0)
                cp_set(dt, x, i, -INFINITY);
            if (l == 3)
                cp_set(dt, x, i, -INFINITY);
            if (l == 4 && k == len / 2)
                cp_set(dt, x, i, NAN);
        }
    }
}

static void softmax_case(ladle_dtype dt, int log_, int64_t outer, int64_t len,
                         int64_t inner, int alias)
{
    char what[128];
    snprintf(what, sizeof what, "%ssoftmax [%lld][%lld][%lld]%s", log_ ? "log-" : "",
             (long long)outer, (long long)len, (long long)inner, alias ? " in place" : "");
    int64_t n = outer * len * inner;
    void *x = cp_random(dt, n, -5, 5, 21 + (uint64_t)n), *y = cp_host(dt, n);
    softmax_edges(dt, x, outer, len, inner);
    void *dy = cp_random(dt, n, -1, 1, 22), *dx = cp_host(dt, n);
    CP_CPU(softmax_forward, dt, log_, outer, len, inner, x, y);
    CP_CPU(softmax_backward, dt, log_, outer, len, inner, y, dy, dx);

    void *d_x = cp_upload(dt, n, x), *d_y = alias ? d_x : cp_upload(dt, n, NULL);
    CP_GPU(softmax_forward, dt, log_, outer, len, inner, d_x, d_y);
    CP_CLOSE(dt, n, d_y, y, tol(dt, SOFTMAX_F32), what);

    void *b_y = cp_upload(dt, n, y), *b_dy = cp_upload(dt, n, dy);
    void *b_dx = alias ? b_dy : cp_upload(dt, n, NULL);
    CP_GPU(softmax_backward, dt, log_, outer, len, inner, b_y, b_dy, b_dx);
    CP_CLOSE(dt, n, b_dx, dx, tol(dt, SOFTMAX_F32), what);

    cp_free(d_x);
    cp_free(b_y);
    cp_free(b_dy);
    if (!alias) {
        cp_free(d_y);
        cp_free(b_dx);
    }
    free(x);
    free(y);
    free(dy);
    free(dx);
}

START_TEST(softmax)
{
    /* outer, len, inner: empty; a single element; short contiguous rows (a
     * thread each); long ones (a block each, one stride and several); more
     * rows than the grid's blocks; strided columns (a thread each, also
     * past the grid); few long strided columns (a block each) */
    static const int64_t shapes[][3] = {
        {0, 5, 1},    {4, 0, 3},    {1, 1, 1}, {7, 5, 1},    {6, 32, 1},  {5, 100, 1},
        {3, 1000, 1}, {300, 40, 1}, {4, 7, 3}, {3, 4, 3000}, {2, 300, 5}, {1, 517, 2}};
    const int count = (int)(sizeof shapes / sizeof shapes[0]);
    for (int d = 0; d < 2; d++)
        for (int log_ = 0; log_ < 2; log_++)
            for (int s = 0; s < count; s++)
                for (int alias = 0; alias < 2; alias++)
                    softmax_case(dtypes[d], log_, shapes[s][0], shapes[s][1], shapes[s][2],
                                 alias);
}
END_TEST

/* ---- losses ---- */

static const char *loss_names[] = {"MSE", "L1", "cross-entropy", "NLL", "BCE"};
static const char *red_names[] = {"mean", "sum", "none"};

static int classify(ladle_loss_kind kind)
{
    return kind == LADLE_LOSS_CROSS_ENTROPY || kind == LADLE_LOSS_NLL;
}

/* The loss's descriptor as layers/sequential/loss.c makes it: x is [n][c][inner]
 * (regression: c = inner = 1). */
static ladle_loss_plan loss_desc(ladle_loss_kind kind, ladle_reduction red,
                                 double smoothing, int64_t n, int64_t c, int64_t inner)
{
    ladle_loss_plan l = {.kind = kind,
                         .reduction = red,
                         .smoothing = smoothing,
                         .classes = c,
                         .inner = inner,
                         .numel = n * c * inner};
    int64_t terms = classify(kind) ? n * inner : l.numel;
    l.divisor = red == LADLE_REDUCE_MEAN ? (double)terms : 1.0;
    return l;
}

/* Logits with edges: a sample shifted by 500 (stability) and, without
 * smoothing, a -inf logit off the label (a finite loss). */
static void *class_input(ladle_dtype dt, const ladle_loss_plan *l, const int64_t *labels,
                         uint64_t seed)
{
    void *x = cp_random(dt, l->numel, -8, 8, seed);
    int64_t samples = l->numel / l->classes;
    for (int64_t s = 0; s < samples; s++) {
        int64_t base = (s / l->inner) * l->classes * l->inner + s % l->inner;
        for (int64_t k = 0; k < l->classes; k++) {
            int64_t i = base + k * l->inner;
            if (s % 4 == 1)
                cp_set(dt, x, i, cp_get(dt, x, i) + 500);
            if (s % 4 == 2 && l->smoothing == 0 && k != labels[s] && k % 2 == 0)
                cp_set(dt, x, i, -INFINITY);
        }
    }
    return x;
}

static void loss_case(ladle_dtype dt, ladle_loss_kind kind, ladle_reduction red,
                      double smoothing, int64_t n, int64_t c, int64_t inner)
{
    char what[160];
    snprintf(what, sizeof what, "%s %s e=%g [%lld][%lld][%lld]", loss_names[kind],
             red_names[red], smoothing, (long long)n, (long long)c, (long long)inner);
    ladle_loss_plan l = loss_desc(kind, red, smoothing, n, c, inner);
    int cls = classify(kind);
    int64_t terms = cls ? n * inner : l.numel, outs = red == LADLE_REDUCE_NONE ? terms : 1;
    ladle_dtype tdt = cls ? LADLE_I64 : dt;
    void *target = cp_host(tdt, l.numel);
    if (cls)
        for (int64_t s = 0; s < terms; s++)
            ((int64_t *)target)[s] =
                (int64_t)(ladle__rng_bits(31, 1, (uint64_t)s) % (uint64_t)c);
    else
        for (int64_t i = 0; i < l.numel; i++)
            cp_set(dt, target, i, 0.5 * (ladle__rng_uniform(32, 1, (uint64_t)i) + 1));
    void *x = cls ? class_input(dt, &l, target, 33) : cp_random(dt, l.numel, -3, 3, 34);
    void *out = cp_host(dt, outs), *dloss = cp_random(dt, outs, 0.5, 1.5, 35);
    void *dx = cp_host(dt, l.numel);
    CP_CPU(loss_forward, dt, &l, x, target, out);
    CP_CPU(loss_backward, dt, &l, x, target, dloss, dx);

    void *d_x = cp_upload(dt, l.numel, x), *d_t = cp_upload(tdt, l.numel, target);
    void *d_out = cp_upload(dt, outs, NULL), *d_dloss = cp_upload(dt, outs, dloss);
    void *d_dx = cp_upload(dt, l.numel, NULL);
    CP_GPU(loss_forward, dt, &l, d_x, d_t, d_out);
    CP_CLOSE(dt, outs, d_out, out, tol(dt, LOSS_F32), what);
    CP_GPU(loss_backward, dt, &l, d_x, d_t, d_dloss, d_dx);
    CP_CLOSE(dt, l.numel, d_dx, dx, tol(dt, LOSS_F32), what);

    cp_free(d_x);
    cp_free(d_t);
    cp_free(d_out);
    cp_free(d_dloss);
    cp_free(d_dx);
    free(target);
    free(x);
    free(out);
    free(dloss);
    free(dx);
}

START_TEST(regression_losses)
{
    static const ladle_loss_kind kinds[] = {LADLE_LOSS_MSE, LADLE_LOSS_L1,
                                            LADLE_LOSS_BCE_WITH_LOGITS};
    for (int d = 0; d < 2; d++)
        for (int k = 0; k < 3; k++)
            for (int r = LADLE_REDUCE_MEAN; r <= LADLE_REDUCE_NONE; r++)
                for (int s = 0; s < NSIZES; s++)
                    loss_case(dtypes[d], kinds[k], (ladle_reduction)r, 0, sizes[s], 1, 1);
}
END_TEST

START_TEST(classification_losses)
{
    /* n, c, inner: no samples (none, or no positions); one class; short
     * rows (a thread a sample); long rows (a block a sample, past one
     * stride, more samples than blocks); strided classes; more samples
     * than the grid's threads */
    static const int64_t shapes[][3] = {{0, 3, 1},  {2, 3, 0},   {1, 1, 1},   {1, 5, 1},
                                        {7, 10, 1}, {5, 100, 1}, {2, 300, 1}, {70, 40, 1},
                                        {3, 7, 40}, {3000, 3, 3}};
    static const double smoothings[] = {0, 0.1, 1};
    const int count = (int)(sizeof shapes / sizeof shapes[0]);
    for (int d = 0; d < 2; d++)
        for (int r = LADLE_REDUCE_MEAN; r <= LADLE_REDUCE_NONE; r++)
            for (int s = 0; s < count; s++) {
                for (int e = 0; e < 3; e++)
                    loss_case(dtypes[d], LADLE_LOSS_CROSS_ENTROPY, (ladle_reduction)r,
                              smoothings[e], shapes[s][0], shapes[s][1], shapes[s][2]);
                loss_case(dtypes[d], LADLE_LOSS_NLL, (ladle_reduction)r, 0, shapes[s][0],
                          shapes[s][1], shapes[s][2]);
            }
}
END_TEST

/* A mean over a value that is not finite stays so (the layer reports it). */
START_TEST(loss_of_infinite_input)
{
    for (int d = 0; d < 2; d++) {
        ladle_dtype dt = dtypes[d];
        ladle_loss_plan l = loss_desc(LADLE_LOSS_MSE, LADLE_REDUCE_MEAN, 0, 9001, 1, 1);
        void *x = cp_random(dt, l.numel, -1, 1, 41), *t = cp_random(dt, l.numel, -1, 1, 42);
        cp_set(dt, x, 8999, INFINITY);
        void *d_x = cp_upload(dt, l.numel, x), *d_t = cp_upload(dt, l.numel, t);
        void *d_out = cp_upload(dt, 1, NULL);
        CP_GPU(loss_forward, dt, &l, d_x, d_t, d_out);
        void *got = cp_download(dt, 1, d_out);
        LT_ASSERT(isinf(cp_get(dt, got, 0)), "an infinite term gives %g", cp_get(dt, got, 0));
        cp_free(d_x);
        cp_free(d_t);
        cp_free(d_out);
        free(x);
        free(t);
        free(got);
    }
}
END_TEST

/* ---- scans ---- */

/* find_non_finite with the bad values at `at` (count of them, -1 ends). */
static void non_finite_case(ladle_dtype dt, int64_t n, const int64_t *at, double bad)
{
    void *x = cp_random(dt, n, -1e30, 1e30, 51);
    int64_t want = -1;
    for (int k = 0; at[k] >= 0; k++)
        if (at[k] < n) {
            cp_set(dt, x, at[k], bad);
            want = want < 0 || at[k] < want ? at[k] : want;
        }
    int64_t cpu = -2, gpu = -2;
    void *d_x = cp_upload(dt, n, x);
    CP_CPU(find_non_finite, dt, n, x, &cpu);
    CP_GPU(find_non_finite, dt, n, d_x, &gpu);
    LT_ASSERT(gpu == want && cpu == want,
              "find_non_finite (%s, n=%lld, %g): cpu %lld gpu %lld, "
              "want %lld",
              ladle_dtype_name(dt), (long long)n, bad, (long long)cpu, (long long)gpu,
              (long long)want);
    cp_free(d_x);
    free(x);
}

static void outside_case(int64_t n, const int64_t *at, int64_t lo, int64_t hi, int64_t bad)
{
    int64_t *v = cp_host(LADLE_I64, n), want = -1;
    for (int64_t i = 0; i < n; i++)
        v[i] =
            lo + (int64_t)(ladle__rng_bits(52, 0, (uint64_t)i) % (uint64_t)(hi - lo + 1));
    for (int k = 0; at[k] >= 0; k++)
        if (at[k] < n) {
            v[at[k]] = bad;
            want = want < 0 || at[k] < want ? at[k] : want;
        }
    int64_t cpu = -2, gpu = -2;
    void *d_v = cp_upload(LADLE_I64, n, v);
    CP_CPU(find_outside, n, v, lo, hi, &cpu);
    CP_GPU(find_outside, n, d_v, lo, hi, &gpu);
    LT_ASSERT(gpu == want && cpu == want,
              "find_outside (n=%lld, [%lld, %lld], %lld): cpu %lld "
              "gpu %lld, want %lld",
              (long long)n, (long long)lo, (long long)hi, (long long)bad, (long long)cpu,
              (long long)gpu, (long long)want);
    cp_free(d_v);
    free(v);
}

START_TEST(scans)
{
    /* where the bad elements go: none; the first; in the first block; in
     * a later block; the last of 9001; a thread's second grid-stride turn
     * (32 x 256 + 3) after an earlier one of another thread, and of the
     * same thread; two in one block, the later thread first in index
     * order; two neighbours past the first turn */
    static const int64_t places[][4] = {{-1},
                                        {0, -1},
                                        {5, -1},
                                        {300, -1},
                                        {9000, -1},
                                        {8195, 200, -1},
                                        {8195, 3, -1},
                                        {130, 129, -1},
                                        {6, 6000, 8999, -1},
                                        {8195, 8196, -1}};
    const int count = (int)(sizeof places / sizeof places[0]);
    static const double bads[] = {NAN, INFINITY, -INFINITY};
    for (int s = 0; s < NSIZES; s++)
        for (int p = 0; p < count; p++) {
            for (int d = 0; d < 2; d++)
                for (int b = 0; b < 3; b++)
                    non_finite_case(dtypes[d], sizes[s], places[p], bads[b]);
            outside_case(sizes[s], places[p], 0, 9, 10);
            outside_case(sizes[s], places[p], 0, 9, -1);
            outside_case(sizes[s], places[p], -5, 5, INT64_MIN);
            outside_case(sizes[s], places[p], -5, 5, INT64_MAX);
        }
    /* the largest finite values are finite */
    for (int d = 0; d < 2; d++) {
        ladle_dtype dt = dtypes[d];
        void *x = cp_random(dt, 3, -1, 1, 53);
        cp_set(dt, x, 1, dt == LADLE_F32 ? 3.4028234663852886e38 : 1.7976931348623157e308);
        cp_set(dt, x, 2, dt == LADLE_F32 ? -3.4028234663852886e38 : -1.7976931348623157e308);
        void *d_x = cp_upload(dt, 3, x);
        int64_t gpu = -2;
        CP_GPU(find_non_finite, dt, 3, d_x, &gpu);
        LT_ASSERT(gpu == -1, "the largest %s is finite, found %lld", ladle_dtype_name(dt),
                  (long long)gpu);
        cp_free(d_x);
        free(x);
    }
}
END_TEST

/* ---- dropout ---- */

/* The GPU's output must be the CPU's bit for bit. */
static void dropout_case(ladle_dtype dt, int64_t n, double p, uint64_t seed, uint64_t step,
                         int64_t offset, int alias)
{
    void *in = cp_random(dt, n, -2, 2, 61), *out = cp_host(dt, n);
    CP_CPU(dropout, dt, n, p, seed, step, offset, in, out);
    void *d_in = cp_upload(dt, n, in), *d_out = alias ? d_in : cp_upload(dt, n, NULL);
    CP_GPU(dropout, dt, n, p, seed, step, offset, d_in, d_out);
    void *got = cp_download(dt, n, d_out);
    int64_t kept = 0;
    for (int64_t i = 0; i < n; i++)
        kept += cp_get(dt, out, i) != 0;
    LT_ASSERT(memcmp(got, out, (size_t)n * cp_size(dt)) == 0,
              "dropout (%s, n=%lld, p=%g, offset %lld%s) differs from the CPU's",
              ladle_dtype_name(dt), (long long)n, p, (long long)offset,
              alias ? ", in place" : "");
    /* the masks are not trivial where they should not be */
    LT_ASSERT(n < 1000 || (p == 0   ? kept == n
                           : p == 1 ? kept == 0
                                    : kept > 0 && kept < n),
              "p=%g kept %lld of %lld", p, (long long)kept, (long long)n);
    cp_free(d_in);
    if (!alias)
        cp_free(d_out);
    free(in);
    free(out);
    free(got);
}

START_TEST(dropout)
{
    static const double ps[] = {0, 0.3, 0.5, 1};
    for (int d = 0; d < 2; d++)
        for (int s = 0; s < NSIZES; s++)
            for (int p = 0; p < 4; p++)
                for (int alias = 0; alias < 2; alias++) {
                    dropout_case(dtypes[d], sizes[s], ps[p], 7, 3, 0, alias);
                    dropout_case(dtypes[d], sizes[s], ps[p], 8, 1, 123457, alias);
                }
}
END_TEST

/* ---- optimizers ---- */

/* Steps 1 to 3 of d on both backends, from the same parameters and new
 * gradients each step; parameters and state must agree bit for bit. */
static void optim_case(ladle_dtype dt, const ladle_optimizer_desc *d, int momentum,
                       int64_t n, const char *what)
{
    int adam = d->kind != LADLE_OPT_SGD;
    void *p = cp_random(dt, n, -1, 1, 71);
    void *s0 = cp_host(dt, n), *s1 = cp_host(dt, n);
    void *d_p = cp_upload(dt, n, p), *d_g = cp_upload(dt, n, NULL);
    void *d_s0 = cp_upload(dt, n, NULL), *d_s1 = cp_upload(dt, n, NULL);
    int has0 = adam || momentum;
    for (int64_t t = 1; t <= 3; t++) {
        void *g = cp_random(dt, n, -1, 1, 72 + (uint64_t)t);
        CP_GPU(to_device, (size_t)n * cp_size(dt), g, d_g);
        CP_CPU(optim_step, dt, d, t, n, p, g, has0 ? s0 : NULL, adam ? s1 : NULL);
        CP_GPU(optim_step, dt, d, t, n, d_p, d_g, has0 ? d_s0 : NULL, adam ? d_s1 : NULL);
        CP_CLOSE(dt, n, d_p, p, 0.0, what);
        if (has0)
            CP_CLOSE(dt, n, d_s0, s0, 0.0, what);
        if (adam)
            CP_CLOSE(dt, n, d_s1, s1, 0.0, what);
        free(g);
    }
    cp_free(d_p);
    cp_free(d_g);
    cp_free(d_s0);
    cp_free(d_s1);
    free(p);
    free(s0);
    free(s1);
}

START_TEST(optimizers)
{
    /* kind, momentum, dampening, nesterov, weight decay */
    static const struct {
        ladle_optimizer_kind kind;
        double momentum, dampening;
        int nesterov;
        double wd;
        const char *name;
    } cases[] = {
        {LADLE_OPT_SGD, 0, 0, 0, 0, "SGD"},
        {LADLE_OPT_SGD, 0, 0, 0, 0.01, "SGD wd"},
        {LADLE_OPT_SGD, 0.9, 0, 0, 0, "SGD momentum"},
        {LADLE_OPT_SGD, 0.9, 0.1, 0, 0.01, "SGD momentum dampening wd"},
        {LADLE_OPT_SGD, 0.9, 0, 1, 0, "SGD Nesterov"},
        {LADLE_OPT_SGD, 0.8, 0, 1, 0.01, "SGD Nesterov wd"},
        {LADLE_OPT_ADAM, 0, 0, 0, 0, "Adam"},
        {LADLE_OPT_ADAM, 0, 0, 0, 0.05, "Adam wd"},
        {LADLE_OPT_ADAMW, 0, 0, 0, 0.01, "AdamW"},
        {LADLE_OPT_ADAMW, 0, 0, 0, 0, "AdamW no decay"},
    };
    const int count = (int)(sizeof cases / sizeof cases[0]);
    for (int dd = 0; dd < 2; dd++)
        for (int c = 0; c < count; c++)
            for (int s = 0; s < NSIZES; s++) {
                ladle_optimizer_desc d;
                ladle_optimizer_desc_init(&d, cases[c].kind, 0.01);
                d.momentum = cases[c].momentum;
                d.dampening = cases[c].dampening;
                d.nesterov = cases[c].nesterov;
                d.weight_decay = cases[c].wd;
                char what[96];
                snprintf(what, sizeof what, "%s n=%lld", cases[c].name,
                         (long long)sizes[s]);
                optim_case(dtypes[dd], &d, cases[c].momentum > 0, sizes[s], what);
            }
}
END_TEST

LT_SUITE("cuda_act", "cuda_act", 0, activations, activations_f32_accuracy, softmax,
         regression_losses, classification_losses, loss_of_infinite_input, scans, dropout,
         optimizers)
