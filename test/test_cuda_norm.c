/*
 * The CUDA backend's normalisation and embedding slots against the CPU
 * backend's (test/cuda_pair.h): layer norm and RMS norm forward, backward
 * and weight gradient with and without w and b, the token embedding's
 * lookup and scatter-add, in f32 and f64, over sizes empty, one, odd, rows
 * shorter and longer than a block and more rows than the grid (the
 * emulator's grid is 32 blocks: the kernels stride over the rest), rows far
 * from zero (the one-pass statistics' shift).
 *
 * Tolerances. f64 agrees to 1e-12 (test/cuda_pair.h). In f32 both backends
 * take every sum and every elementwise step in double and round the result
 * once; their sums differ only in order (about 1e-15 of the terms), so two
 * results differ by at most the one ulp that rounding can put between two
 * doubles that close: 1.2e-7 of 1 + |value|, NORM_F32 with room. The
 * embedding's lookup is a copy and its scatter-add adds each id's rows in
 * token order in the dtype on both: bit for bit (tolerance 0), also with
 * repeated ids and a dw that already holds values.
 */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cuda_pair.h"

#define NORM_F32 2.5e-7

/* One case: rows x len, layer norm (rms 0) or RMS norm, with w and b (b
 * only for layer norm) when affine; x uniform in offset + [-2, 2). */
static void norm_case(ladle_dtype dt, int rms, int affine, int64_t rows, int64_t len,
                      double offset)
{
    char what[128];
    snprintf(what, sizeof what, "%s%s rows=%lld len=%lld offset=%g", rms ? "rms" : "layer",
             affine ? " affine" : "", (long long)rows, (long long)len, offset);
    int64_t n = rows * len;
    double eps = 1e-5;
    void *x = cp_random(dt, n, offset - 2, offset + 2, 31 + (uint64_t)n);
    void *dy = cp_random(dt, n, -1, 1, 32 + (uint64_t)n);
    void *w = affine ? cp_random(dt, len, 0.5, 1.5, 33) : NULL;
    void *b = affine && !rms ? cp_random(dt, len, -1, 1, 34) : NULL;
    /* the gradients accumulate into what dw and db hold already */
    void *dw0 = cp_random(dt, len, -1, 1, 35), *db0 = cp_random(dt, len, -1, 1, 36);
    void *y = cp_host(dt, n), *dx = cp_host(dt, n);
    void *dw = cp_clone(dt, len, dw0), *db = cp_clone(dt, len, db0);
    double *mean = calloc((size_t)rows + 1, sizeof(double));
    double *invstd = calloc((size_t)rows + 1, sizeof(double));
    double *ws = calloc(2 * (size_t)len + 1, sizeof(double));
    CP_CPU(norm_forward, dt, rms, rows, len, eps, x, w, b, y, mean, invstd);
    CP_CPU(norm_backward, dt, rms, rows, len, x, w, dy, mean, invstd, dx);
    CP_CPU(norm_weight_grad, dt, rms, rows, len, x, dy, mean, invstd, dw, rms ? NULL : db,
           ws);

    void *g_x = cp_upload(dt, n, x), *g_dy = cp_upload(dt, n, dy);
    void *g_w = w ? cp_upload(dt, len, w) : NULL, *g_b = b ? cp_upload(dt, len, b) : NULL;
    void *g_y = cp_upload(dt, n, NULL), *g_dx = cp_upload(dt, n, NULL);
    void *g_dw = cp_upload(dt, len, dw0), *g_db = cp_upload(dt, len, db0);
    void *g_mean = cp_upload(LADLE_F64, rows, NULL),
         *g_is = cp_upload(LADLE_F64, rows, NULL);
    void *g_ws = cp_upload(LADLE_F64, 2 * len, NULL);
    CP_GPU(norm_forward, dt, rms, rows, len, eps, g_x, g_w, g_b, g_y, rms ? NULL : g_mean,
           g_is);
    CP_CLOSE(dt, n, g_y, y, cp_tol(dt, NORM_F32), what);
    CP_CLOSE(LADLE_F64, rows, g_is, invstd, 1e-12, what);
    if (!rms)
        CP_CLOSE(LADLE_F64, rows, g_mean, mean, 1e-12, what);
    /* the backward from the CPU's statistics, so only its own sums differ */
    void *c_mean = cp_upload(LADLE_F64, rows, mean),
         *c_is = cp_upload(LADLE_F64, rows, invstd);
    CP_GPU(norm_backward, dt, rms, rows, len, g_x, g_w, g_dy, c_mean, c_is, g_dx);
    CP_CLOSE(dt, n, g_dx, dx, cp_tol(dt, NORM_F32), what);
    CP_GPU(norm_weight_grad, dt, rms, rows, len, g_x, g_dy, c_mean, c_is, g_dw,
           rms ? NULL : g_db, g_ws);
    CP_CLOSE(dt, len, g_dw, dw, cp_tol(dt, NORM_F32), what);
    CP_CLOSE(dt, len, g_db, db, cp_tol(dt, NORM_F32), what); /* RMS norm: left as it was */

    void *dev[] = {g_x,  g_dy,   g_w,  g_b,  g_y,    g_dx, g_dw,
                   g_db, g_mean, g_is, g_ws, c_mean, c_is};
    void *host[] = {x, dy, w, b, dw0, db0, y, dx, dw, db, mean, invstd, ws};
    CP_RELEASE(dev, host);
}

START_TEST(norms_against_cpu)
{
    static const int64_t shapes[][2] = {{0, 5},   {1, 1},    {1, 7},   {5, 32},  {3, 33},
                                        {4, 300}, {2, 1100}, {300, 6}, {150, 40}};
    const int count = (int)(sizeof shapes / sizeof shapes[0]);
    for (int d = 0; d < 2; d++)
        for (int rms = 0; rms < 2; rms++)
            for (int affine = 0; affine < 2; affine++)
                for (int s = 0; s < count; s++)
                    norm_case(cp_dtype(d), rms, affine, shapes[s][0], shapes[s][1], 0.0);
}
END_TEST

/* Rows far from zero: a one-pass variance without the shift would lose it
 * (the mean 1e4 times the spread). */
START_TEST(norms_far_from_zero)
{
    for (int d = 0; d < 2; d++)
        for (int affine = 0; affine < 2; affine++) {
            norm_case(cp_dtype(d), 0, affine, 7, 64, 2e4);
            norm_case(cp_dtype(d), 0, affine, 3, 500, -3e4);
            norm_case(cp_dtype(d), 1, affine, 3, 500, 1e3);
        }
}
END_TEST

/* ---- the embedding ---- */

static void embed_case(ladle_dtype dt, int64_t n, int64_t dim, int64_t vocab)
{
    char what[128];
    snprintf(what, sizeof what, "embedding n=%lld dim=%lld vocab=%lld", (long long)n,
             (long long)dim, (long long)vocab);
    int64_t *ids = calloc((size_t)n + 1, sizeof(int64_t));
    for (int64_t i = 0; i < n; i++) /* repeats, and not in order */
        ids[i] = (int64_t)((uint64_t)(i * 7 + i * i * 3 + 1) % (uint64_t)vocab);
    void *w = cp_random(dt, vocab * dim, -1, 1, 41 + (uint64_t)n);
    void *dy = cp_random(dt, n * dim, -1, 1, 42 + (uint64_t)n);
    void *dw0 = cp_random(dt, vocab * dim, -1, 1, 43);
    void *y = cp_host(dt, n * dim), *dw = cp_clone(dt, vocab * dim, dw0);
    CP_CPU(embed_forward, dt, n, dim, ids, w, y);
    CP_CPU(embed_backward, dt, n, dim, ids, dy, dw);

    void *g_ids = cp_upload(LADLE_I64, n, ids), *g_w = cp_upload(dt, vocab * dim, w);
    void *g_dy = cp_upload(dt, n * dim, dy), *g_y = cp_upload(dt, n * dim, NULL);
    void *g_dw = cp_upload(dt, vocab * dim, dw0);
    CP_GPU(embed_forward, dt, n, dim, g_ids, g_w, g_y);
    CP_CLOSE(dt, n * dim, g_y, y, 0.0, what);
    CP_GPU(embed_backward, dt, n, dim, g_ids, g_dy, g_dw);
    CP_CLOSE(dt, vocab * dim, g_dw, dw, 0.0, what);
    /* again: the same bits on a second run over the sums of the first */
    CP_CPU(embed_backward, dt, n, dim, ids, dy, dw);
    CP_GPU(embed_backward, dt, n, dim, g_ids, g_dy, g_dw);
    CP_CLOSE(dt, vocab * dim, g_dw, dw, 0.0, what);

    void *dev[] = {g_ids, g_w, g_dy, g_y, g_dw};
    void *host[] = {ids, w, dy, dw0, y, dw};
    CP_RELEASE(dev, host);
}

START_TEST(embedding_against_cpu)
{
    static const int64_t cases[][3] = {{0, 4, 3},   {1, 1, 1},    {9, 5, 3},
                                       {50, 33, 7}, {300, 3, 11}, {40, 300, 50}};
    const int count = (int)(sizeof cases / sizeof cases[0]);
    for (int d = 0; d < 2; d++)
        for (int c = 0; c < count; c++)
            embed_case(cp_dtype(d), cases[c][0], cases[c][1], cases[c][2]);
}
END_TEST

LT_SUITE("cuda_norm", "cuda_norm", 0, norms_against_cpu, norms_far_from_zero,
         embedding_against_cpu)
