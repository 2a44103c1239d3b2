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
#include <string.h>

#include "src/backends/cpu/cpu.h"
#include "src/backends/cpu/simd.h"

/* a vector: 64 bytes of elements of es bytes */
#define LANES(es) ((int64_t)(64 / (es)))
#define FWD_CO 8
#define WGT_CO 3
#define WGT_TAPS 5

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

#define T float
#define TI int32_t
#define L 16
#define V v_f32
#define VI vi_f32
#define VLOAD vload_f32
#define VSTORE vstore_f32
#define ROWCOPY rowcopy_f32
#define PLANES planes_f32
#define FWD_BLOCK fwd_block_f32
#define FWD_SOME fwd_some_f32
#define FWD fwd_f32
#define WGT_BLOCK wgt_block_f32
#define WGT wgt_f32
#include "src/backends/cpu/conv_direct_rows.inc"
#undef T
#undef TI
#undef L
#undef V
#undef VI
#undef VLOAD
#undef VSTORE
#undef ROWCOPY
#undef PLANES
#undef FWD_BLOCK
#undef FWD_SOME
#undef FWD
#undef WGT_BLOCK
#undef WGT

#define T double
#define TI int64_t
#define L 8
#define V v_f64
#define VI vi_f64
#define VLOAD vload_f64
#define VSTORE vstore_f64
#define ROWCOPY rowcopy_f64
#define PLANES planes_f64
#define FWD_BLOCK fwd_block_f64
#define FWD_SOME fwd_some_f64
#define FWD fwd_f64
#define WGT_BLOCK wgt_block_f64
#define WGT wgt_f64
#include "src/backends/cpu/conv_direct_rows.inc"
#undef T
#undef TI
#undef L
#undef V
#undef VI
#undef VLOAD
#undef VSTORE
#undef ROWCOPY
#undef PLANES
#undef FWD_BLOCK
#undef FWD_SOME
#undef FWD
#undef WGT_BLOCK
#undef WGT

/*
 * Which passes run here, by what was measured (bench_layers conv2d, f32,
 * one AMD EPYC core, forward + backward + weight against the column path):
 * the forward and weight gradient for K <= 32 and rows of a vector or more
 * (LeNet's conv1 0.71-0.94 ms against 0.87-1.34; 3 -> 64 channels 3x3 on
 * 32x32 5.6-5.9 against 7.2-7.7). Tried and not kept: the forward of the
 * wide path's layers with rows shorter than a vector (LeNet's conv2),
 * computed on the padded rows' grid L columns at a time: 1.63-1.83 ms
 * against 1.59-1.64 for the whole layer. Only where the x86-64-v4 copies
 * run: the blocks hold up to 8 + 1 or 15 + 8 vectors of 64 bytes, which
 * AVX-512's 32 registers hold and AVX2's 16 (of half the width) do not.
 */
/* (a build without the copies, for the sanitizers, takes the path too,
 * so that they check its kernels) */
#ifdef LADLE_NO_CLONES
#define DIRECT_RUNS() 1
#else
#define DIRECT_RUNS() LADLE_RUNS_V4()
#endif

ladle_status ladle__cpu_conv_direct_plan(const ladle_backend *be, ladle_dtype dtype,
                                         const ladle_conv_geom *geom, int *forward,
                                         int *weight, int64_t *scratch, int64_t *sums)
{
    *forward = *weight = 0;
    *scratch = *sums = 0;
    if (!DIRECT_RUNS() || geom->in[0] != 1 || geom->k[0] != 1 || geom->s[1] != 1 ||
        geom->s[2] != 1)
        return LADLE_OK;
    geo v;
    geo_of(geom, &v);
    int64_t lanes = LANES(ladle_dtype_size(dtype));
    *forward = *weight = v.ow >= lanes && v.K <= 32 && v.cog <= 64;
    if (*forward) {
        *scratch = v.cg * v.plane;
        *sums = v.cog * v.K * lanes;
    }
    return LADLE_OK;
}

ladle_status ladle__cpu_conv_direct_forward(const ladle_backend *be, ladle_dtype dtype,
                                            const ladle_conv_geom *geom, int64_t nb,
                                            const void *x, int64_t x_stride, const void *w,
                                            const void *b, void *scratch, void *y,
                                            int64_t y_stride)
{
    geo v;
    geo_of(geom, &v);
    for (int64_t n = 0; n < nb; n++)
        if (dtype == LADLE_F32) {
            planes_f32(&v, (const float *)x + n * x_stride, scratch);
            fwd_f32(&v, scratch, w, b, (float *)y + n * y_stride);
        } else {
            planes_f64(&v, (const double *)x + n * x_stride, scratch);
            fwd_f64(&v, scratch, w, b, (double *)y + n * y_stride);
        }
    return LADLE_OK;
}

ladle_status ladle__cpu_conv_direct_weight(const ladle_backend *be, ladle_dtype dtype,
                                           const ladle_conv_geom *geom, int64_t nb,
                                           const void *x, int64_t x_stride, const void *dy,
                                           int64_t dy_stride, void *scratch, double *ws,
                                           void *dw)
{
    geo v;
    geo_of(geom, &v);
    int64_t lanes = LANES(ladle_dtype_size(dtype));
    memset(ws, 0, sizeof(double) * (size_t)(v.cog * v.K * lanes));
    for (int64_t n = 0; n < nb; n++)
        if (dtype == LADLE_F32) {
            planes_f32(&v, (const float *)x + n * x_stride, scratch);
            wgt_f32(&v, scratch, (const float *)dy + n * dy_stride, ws);
        } else {
            planes_f64(&v, (const double *)x + n * x_stride, scratch);
            wgt_f64(&v, scratch, (const double *)dy + n * dy_stride, ws);
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
