/*
 * The direct convolution of few taps (the conv_direct_* slots): the
 * forward and the weight gradient of a 1-D or 2-D convolution with stride 1
 * computed from zero-bordered planes without columns, vectorised along the
 * output rows.
 *
 * Why: with K = cg kh kw of 32 or fewer (a first layer: one to three input
 * channels, 3x3 or 5x5) the GEMMs of im2col are too thin to run near the
 * machine's peak, and the column matrix they read is K times the image.
 * Measured on LeNet's conv1 in a standalone test (256 images 1x28x28, 6
 * channels 5x5, padding 2, f32, one AMD EPYC core): forward 0.66 ms against
 * 1.2 ms for im2col and GEMM, weight gradient 0.71 against 1.1 ms.
 *
 * The forward keeps up to FWD_CO output channels of one vector of a row in
 * registers and loads each tap's inputs once for all of them. The weight
 * gradient keeps WGT_CO channels x WGT_TAPS taps of one kernel row in
 * registers over the whole image, and adds them to double lanes per image,
 * so its sums are more accurate than the GEMM's, whose products of a batch
 * accumulate in T. A row's last vector overlaps the one before it instead
 * of stepping through a remainder (rows of at least one vector).
 */
#include <stdlib.h>
#include <string.h>

#include "src/backends/cpu/cpu.h"
#include "src/backends/cpu/simd.h"

/* A group's geometry as the loops use it. */
typedef struct geo {
    int64_t cg, cog;
    int64_t h, w, ph, pw, wp, plane; /* input rows, padding, padded width, plane */
    int64_t kh, kw, dh, dw;
    int64_t oh, ow, pout, K;
} geo;

static void geo_of(const ladle_conv_geom *g, geo *v)
{
    v->cg = g->cg;
    v->cog = g->cog;
    v->h = g->in[1];
    v->w = g->in[2];
    v->ph = g->p[1];
    v->pw = g->p[2];
    v->wp = v->w + 2 * v->pw;
    v->plane = (v->h + 2 * v->ph) * v->wp;
    v->kh = g->k[1];
    v->kw = g->k[2];
    v->dh = g->d[1];
    v->dw = g->d[2];
    v->oh = g->out[1];
    v->ow = g->out[2];
    v->pout = v->oh * v->ow;
    v->K = v->cg * v->kh * v->kw;
}

/* 64-byte vectors, where the x86-64-v4 copies run: AVX-512's 32 registers
 * hold the forward's 8 accumulators and an input vector, and the weight
 * gradient's 3 x 5 sums with their 3 + 5 operands */
#define W 64
#define KATTR LADLE_TARGET_V4
#define FWD_CO 8
#define WGT_CO 3
#define WGT_TAPS 5
#include "src/backends/cpu/conv_direct_width.inc"

/* 32-byte vectors, where only the x86-64-v3 copies run: AVX2's 16
 * registers hold 8 accumulators and an input vector, and 3 x 3 sums with
 * their 3 + 3 operands (the 3 x 5 block of 64 bytes would need 23) */
#define W 32
#define KATTR LADLE_TARGET_V3
#define FWD_CO 8
#define WGT_CO 3
#define WGT_TAPS 3
#include "src/backends/cpu/conv_direct_width.inc"

/*
 * Which passes run here, by what was measured (bench_layers conv2d, f32,
 * one AMD EPYC core, forward + backward + weight against the column path):
 * the forward and weight gradient for K <= 32 and rows of a vector or more
 * (LeNet's conv1 0.71-0.94 ms against 0.87-1.34; 3 -> 64 channels 3x3 on
 * 32x32 5.6-5.9 against 7.2-7.7). Tried and not kept: the forward of the
 * wide path's layers with rows shorter than a vector (LeNet's conv2),
 * computed on the padded rows' grid L columns at a time: 1.63-1.83 ms
 * against 1.59-1.64 for the whole layer. The kernels run at 64 bytes where
 * the x86-64-v4 copies run, at 32 bytes where only the x86-64-v3 ones do,
 * and not at all on older CPUs. The 32-byte kernels against the column
 * path as an AVX2-only CPU runs it (bench_layers --only convdirect with
 * OpenBLAS held to its AVX2 kernels, medians of paired repetitions):
 * LeNet's conv1 1.67-1.73 times faster, 3 -> 16 channels 3x3 on 32x32
 * 1.15-1.17, 3 -> 64 1.01-1.04; a LeNet-5 training step 13-16% shorter.
 */

/* The widest the kernels run at on this CPU, in bytes (64 where the
 * x86-64-v4 copies run, 32 where only the x86-64-v3 ones do, 0 before).
 * A build without the copies runs both widths' kernels as code for the
 * build's own target, so that the sanitizers check them: 64, or 32 in a
 * build for AVX2 without AVX-512 (-march=x86-64-v3), whose 16 registers
 * the 64-byte blocks overflow. */
static int best_width(void)
{
#if defined(LADLE_NO_CLONES) && defined(__AVX2__) && !defined(__AVX512F__)
    return 32;
#elif defined(LADLE_NO_CLONES)
    return 64;
#else
    return LADLE_RUNS_V4() ? 64 : LADLE_RUNS_V3() ? 32 : 0;
#endif
}

/* The width the plan takes: the best, capped by LADLE_CONV_DIRECT (v4 or
 * unset: no cap; v3: 32 bytes; off: none). */
static ladle_status plan_width(int *bytes)
{
    const char *cap = getenv("LADLE_CONV_DIRECT");
    int best = best_width();
    *bytes = best;
    if (cap == NULL || cap[0] == '\0' || strcmp(cap, "v4") == 0)
        return LADLE_OK;
    if (strcmp(cap, "v3") == 0) {
        *bytes = best < 32 ? best : 32;
        return LADLE_OK;
    }
    if (strcmp(cap, "off") == 0) {
        *bytes = 0;
        return LADLE_OK;
    }
    return ladle__raise(LADLE_ERR_ARG, "LADLE_CONV_DIRECT",
                        "'%.40s': expected v4, v3 or off (or unset)", cap);
}

ladle_status ladle__cpu_conv_direct_plan(const ladle_backend *be, ladle_dtype dtype,
                                         const ladle_conv_geom *geom, int *forward,
                                         int *weight, int64_t *scratch, int64_t *sums)
{
    int bytes = 0;
    *forward = *weight = 0;
    *scratch = *sums = 0;
    ladle_status st = plan_width(&bytes);
    if (st != LADLE_OK || bytes == 0 || geom->in[0] != 1 || geom->k[0] != 1 ||
        geom->s[1] != 1 || geom->s[2] != 1)
        return st;
    geo v;
    geo_of(geom, &v);
    int64_t es = (int64_t)ladle_dtype_size(dtype);
    /* rows of 64 bytes or more at either width: rows of one to two 32-byte
     * vectors (1 -> 16 channels 3x3 on 12x12, rows of 10) ran 0.92-0.99 of
     * the column path's speed at 32 bytes */
    if (v.ow < 64 / es || v.K > 32 || v.cog > 64)
        return LADLE_OK;
    *forward = *weight = bytes; /* the variant: the width */
    *scratch = v.cg * v.plane;
    *sums = v.cog * v.K * (bytes / es);
    return LADLE_OK;
}

ladle_status ladle__cpu_conv_direct_forward(const ladle_backend *be, ladle_dtype dtype,
                                            const ladle_conv_geom *geom, int64_t nb,
                                            const void *x, int64_t x_stride, const void *w,
                                            const void *b, void *scratch, void *y,
                                            int64_t y_stride, int variant)
{
    geo v;
    geo_of(geom, &v);
    int wide = variant == 64;
    for (int64_t n = 0; n < nb; n++)
        if (dtype == LADLE_F32) {
            const float *xn = (const float *)x + n * x_stride;
            float *yn = (float *)y + n * y_stride;
            if (wide) {
                planes_f32_w64(&v, xn, scratch);
                fwd_f32_w64(&v, scratch, w, b, yn);
            } else {
                planes_f32_w32(&v, xn, scratch);
                fwd_f32_w32(&v, scratch, w, b, yn);
            }
        } else {
            const double *xn = (const double *)x + n * x_stride;
            double *yn = (double *)y + n * y_stride;
            if (wide) {
                planes_f64_w64(&v, xn, scratch);
                fwd_f64_w64(&v, scratch, w, b, yn);
            } else {
                planes_f64_w32(&v, xn, scratch);
                fwd_f64_w32(&v, scratch, w, b, yn);
            }
        }
    return LADLE_OK;
}

ladle_status ladle__cpu_conv_direct_weight(const ladle_backend *be, ladle_dtype dtype,
                                           const ladle_conv_geom *geom, int64_t nb,
                                           const void *x, int64_t x_stride, const void *dy,
                                           int64_t dy_stride, void *scratch, double *ws,
                                           void *dw, int variant)
{
    geo v;
    geo_of(geom, &v);
    int bytes = variant == 64 ? 64 : 32;
    int64_t lanes = bytes / (int64_t)ladle_dtype_size(dtype);
    memset(ws, 0, sizeof(double) * (size_t)(v.cog * v.K * lanes));
    for (int64_t n = 0; n < nb; n++)
        if (dtype == LADLE_F32) {
            const float *xn = (const float *)x + n * x_stride;
            const float *dyn = (const float *)dy + n * dy_stride;
            if (bytes == 64) {
                planes_f32_w64(&v, xn, scratch);
                wgt_f32_w64(&v, scratch, dyn, ws);
            } else {
                planes_f32_w32(&v, xn, scratch);
                wgt_f32_w32(&v, scratch, dyn, ws);
            }
        } else {
            const double *xn = (const double *)x + n * x_stride;
            const double *dyn = (const double *)dy + n * dy_stride;
            if (bytes == 64) {
                planes_f64_w64(&v, xn, scratch);
                wgt_f64_w64(&v, scratch, dyn, ws);
            } else {
                planes_f64_w32(&v, xn, scratch);
                wgt_f64_w32(&v, scratch, dyn, ws);
            }
        }
    for (int64_t r = 0; r < v.cog * v.K; r++) {
        const double *s = ws + r * lanes;
        double t = 0;
        for (int64_t l = 0; l < lanes; l++)
            t += s[l];
        if (dtype == LADLE_F32)
            ((float *)dw)[r] += (float)t;
        else
            ((double *)dw)[r] += t;
    }
    return LADLE_OK;
}
