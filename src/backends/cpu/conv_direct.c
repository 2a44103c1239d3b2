/*
 * The direct convolution (the conv_direct_* slots): the forward and the
 * weight gradient of a 1-D or 2-D convolution with stride 1 computed from
 * zero-bordered planes without columns, by two families of kernels: of few
 * taps vectorised along the output rows (conv_direct_rows.inc, below), and
 * of small planes and many taps vectorised along the output channels, with
 * an input gradient of their own (conv_channels.inc, where its reasons and
 * figures are).
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

/* The channels' scratch, in elements from its start: the padded planes
 * of x (cg planes; the rows' kernels use the same), the transposed weights
 * (K x cog), one image's dy transposed (pout x L), the input gradient's
 * zero-bordered planes of dy (cog of dplane, rows dwp apart) and rows of
 * whole vectors (cg x h rows of dxw), and its turned weights (K x cog). */
typedef struct channel_room {
    int64_t wt, dyt, dyp, dxs, wf, total;
    int64_t dxw, dwp, dplane;
} channel_room;

static void room_of(const geo *v, int64_t lanes, channel_room *r)
{
    r->dxw = (v->w + lanes - 1) / lanes * lanes;
    r->dwp = r->dxw + v->kw - 1;
    r->dplane = (v->h + v->kh - 1) * r->dwp;
    r->wt = v->cg * v->plane;
    r->dyt = r->wt + v->K * v->cog;
    r->dyp = r->dyt + v->pout * lanes;
    r->dxs = r->dyp + v->cog * r->dplane;
    r->wf = r->dxs + v->cg * v->h * r->dxw;
    r->total = r->wf + v->K * v->cog;
}

/* The input gradient's rows a block at each width (its plan needs them) */
enum { BROWS_64 = 3, BROWS_32 = 2 };

/* 64-byte vectors, where the x86-64-v4 copies run: AVX-512's 32 registers
 * hold the forward's 8 accumulators and an input vector, and the weight
 * gradient's 3 x 5 sums with their 3 + 5 operands */
#define W 64
#define KATTR LADLE_TARGET_V4
#define FWD_CO 8
#define WGT_CO 3
#define WGT_TAPS 5
/* the channels' kernels: 16 outputs, 5 x 5 sums, 8 x 3 input-gradient
 * sums, with their operands */
#define CH_COLS 16
#define CH_ROWS3 7
#define CH_ROWS5 5
#define CH_ROWS7 3
#define CH_TAPS 25
#define CH_BCH 8
#define CH_BROWS BROWS_64
#include "src/backends/cpu/conv_direct_width.inc"

/* 32-byte vectors, where only the x86-64-v3 copies run: AVX2's 16
 * registers hold 8 accumulators and an input vector, and 3 x 3 sums with
 * their 3 + 3 operands (the 3 x 5 block of 64 bytes would need 23) */
#define W 32
#define KATTR LADLE_TARGET_V3
#define FWD_CO 8
#define WGT_CO 3
#define WGT_TAPS 3
/* 12 outputs; 12, 10 and 7 sums; 4 x 2 input-gradient sums with 4
 * weights and 2 inputs (AVX2 has no broadcast operands) */
#define CH_COLS 12
#define CH_ROWS3 4
#define CH_ROWS5 2
#define CH_ROWS7 1
#define CH_TAPS 12
#define CH_BCH 4
#define CH_BROWS BROWS_32
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

/* The width the plan takes: the best, capped by LADLE_CONV_DIRECT (v4 or
 * unset: no cap; v3: 32 bytes; off: none). */
static ladle_status plan_width(int *bytes)
{
    const char *cap = getenv("LADLE_CONV_DIRECT");
    int best = ladle__simd_width();
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

/* The variants: the width in bytes, + CHANNELS for the kernels of
 * conv_channels.inc. */
#define CHANNELS 1

/*
 * Whether the channels' kernels suit v at vectors of bytes, for the
 * forward (and *weight: the weight gradient too, for kernels 3, 5 or 7
 * wide). Measured per pass against the column and wide paths
 * (ladle_pipe_profile of one layer, both made in one run, f32, one AMD
 * EPYC core; forward / weight gradient ms):
 *   64x6x14^2 k5 -> 16 (LeNet's conv2)   0.35 / 0.45 against 0.47 / 1.1
 *   32x16x32^2 k3 -> 16                   1.84 / 1.90 against 2.8 / 4.1
 *   32x32x16^2 k3 -> 32                   1.77 / 1.77 against 1.87 / 1.84
 *   32x64x16^2 k3 -> 64                   6.9 / 6.7 against 5.1 / 4.8
 *   32x64x8^2 k3 -> 64                    1.47 / 2.17 against 1.24 / 1.24
 * and at 32 bytes with OpenBLAS held to its AVX2 kernels: LeNet's conv2
 * 0.36 / 0.55 against 0.93 / 1.0, 16 channels 3x3 on 32x32 2.1 / 2.1
 * against 3.1 / 3.7, 32 channels on 16x16 2.0 / 2.1 against 1.85 / 1.75
 * (there, 32 is four 32-byte vectors). So: up to two
 * vectors of output channels, more than 32 taps (fewer: the rows'
 * kernels or the columns), rows of 4 outputs or more (short rows go a few
 * at a time: LeNet's conv2 on a 2 x 2 tile, 5 x 5 outputs, forward 0.39
 * against 0.73-0.88 ms at batch 256); the weight gradient from 25 outputs
 * (each image's sums go to doubles: 32 channels on 4 x 4 took 0.32 ms
 * against 0.24, on 6 x 6 16 channels 0.12 against 0.17).
 */
static int channels_weight_fits(const geo *v)
{
    return (v->kw == 3 || v->kw == 5 || v->kw == 7) && v->pout >= 25;
}

static int channels_fit(const geo *v, const ladle_conv_geom *geom, int64_t es, int bytes,
                        int *weight)
{
    int64_t lanes = bytes / es;
    *weight = 0;
    if (v->cog % lanes != 0 || geom->d[1] != 1 || geom->d[2] != 1 || v->K <= 32 ||
        v->ow < 4 || v->cog > 2 * lanes)
        return 0;
    *weight = channels_weight_fits(v);
    return 1;
}

/*
 * Whether the channels' input gradient suits v. It sums dx's rows, whole
 * vectors of them, from dy spread onto zero-bordered planes, so it
 * multiplies the zeros of the borders and the vectors' spare lanes too,
 * where im2col's GEMM and col2im do only the products that count: it is
 * taken where the vectors it computes are at most 1.25 times dy's
 * elements. Measured (as in channels_fit, ms, against the column path):
 * 32x16x32^2 k3 -> 16 1.65 against 2.57 (1.03 times), 32x32x16^2 k3 -> 32
 * 1.66 against 1.78 (1.13 times); LeNet's conv2 0.73 against 0.60 (rows of
 * 14 in vectors of 16, 15 rows, 10 x 10 outputs: 2.4 times).
 */
static int backward_fits(const geo *v, int bytes, const channel_room *r)
{
    int64_t rows = bytes == 64 ? BROWS_64 : BROWS_32;
    int64_t blocks = (v->h + rows - 1) / rows;
    return v->h >= rows && v->ph < v->kh && v->pw < v->kw &&
           4 * blocks * rows * r->dxw <= 5 * v->pout;
}

ladle_status ladle__cpu_conv_direct_plan(const ladle_backend *be, ladle_dtype dtype,
                                         const ladle_conv_geom *geom, int *forward,
                                         int *weight, int *backward, int64_t *scratch,
                                         int64_t *sums)
{
    int bytes = 0;
    *forward = *weight = *backward = 0;
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
    if (v.ow >= 64 / es && v.K <= 32 && v.cog <= 64) {
        *forward = *weight = bytes; /* the variant: the width */
        *scratch = v.cg * v.plane;
        *sums = v.cog * v.K * (bytes / es);
        return LADLE_OK;
    }
    int wgt = 0;
    if (channels_fit(&v, geom, es, bytes, &wgt)) {
        channel_room r;
        room_of(&v, bytes / es, &r);
        *forward = bytes + CHANNELS;
        *weight = wgt ? bytes + CHANNELS : 0;
        *backward = backward_fits(&v, bytes, &r) ? bytes + CHANNELS : 0;
        *scratch = r.total;
        *sums = v.K * v.cog;
    }
    return LADLE_OK;
}

/* The kernels of a variant for dtype (conv_direct_rows.inc's rows_forward
 * and rows_weight, conv_channels.inc's ch_forward, ch_weight and
 * ch_backward, of its type and width). */
#define PICK(fn, dtype, variant)                                                           \
    ((dtype) == LADLE_F32 ? (((variant) & ~CHANNELS) == 64 ? fn##_f32_w64 : fn##_f32_w32)  \
                          : (((variant) & ~CHANNELS) == 64 ? fn##_f64_w64 : fn##_f64_w32))

typedef void rows_forward_fn(const geo *v, int64_t nb, const void *x, int64_t x_stride,
                             const void *w, const void *b, void *scratch, void *y,
                             int64_t y_stride);
typedef void rows_weight_fn(const geo *v, int64_t nb, const void *x, int64_t x_stride,
                            const void *dy, int64_t dy_stride, void *scratch, double *ws,
                            void *dw);
typedef void ch_forward_fn(const geo *v, const channel_room *r, int64_t nb, const void *x,
                           int64_t x_stride, const void *w, const void *b, void *scratch,
                           void *y, int64_t y_stride);
typedef void ch_weight_fn(const geo *v, const channel_room *r, int64_t nb, const void *x,
                          int64_t x_stride, const void *dy, int64_t dy_stride,
                          void *scratch, double *ws, void *dw);
typedef void ch_backward_fn(const geo *v, const channel_room *r, int64_t nb, const void *dy,
                            int64_t dy_stride, const void *w, void *scratch, void *dx,
                            int64_t dx_stride);

/* The variant's room (its lanes of dtype). */
static void room_for(const geo *v, ladle_dtype dtype, int variant, channel_room *r)
{
    room_of(v, (variant & ~CHANNELS) / (int64_t)ladle_dtype_size(dtype), r);
}

ladle_status ladle__cpu_conv_direct_forward(const ladle_backend *be, ladle_dtype dtype,
                                            const ladle_conv_geom *geom, int64_t nb,
                                            const void *x, int64_t x_stride, const void *w,
                                            const void *b, void *scratch, void *y,
                                            int64_t y_stride, int variant)
{
    geo v;
    geo_of(geom, &v);
    if (variant & CHANNELS) {
        channel_room r;
        room_for(&v, dtype, variant, &r);
        ch_forward_fn *f = PICK(ch_forward, dtype, variant);
        f(&v, &r, nb, x, x_stride, w, b, scratch, y, y_stride);
        return LADLE_OK;
    }
    rows_forward_fn *f = PICK(rows_forward, dtype, variant);
    f(&v, nb, x, x_stride, w, b, scratch, y, y_stride);
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
    if (variant & CHANNELS) {
        /* (the kernels have blocks for the plan's kernel widths only) */
        if (!channels_weight_fits(&v))
            return ladle__raise(LADLE_ERR_INTERNAL, "conv_direct_weight",
                                "variant %d does not fit this geometry", variant);
        channel_room r;
        room_for(&v, dtype, variant, &r);
        ch_weight_fn *f = PICK(ch_weight, dtype, variant);
        f(&v, &r, nb, x, x_stride, dy, dy_stride, scratch, ws, dw);
        return LADLE_OK;
    }
    rows_weight_fn *f = PICK(rows_weight, dtype, variant);
    f(&v, nb, x, x_stride, dy, dy_stride, scratch, ws, dw);
    return LADLE_OK;
}

ladle_status ladle__cpu_conv_direct_backward(const ladle_backend *be, ladle_dtype dtype,
                                             const ladle_conv_geom *geom, int64_t nb,
                                             const void *dy, int64_t dy_stride,
                                             const void *w, void *scratch, void *dx,
                                             int64_t dx_stride, int variant)
{
    geo v;
    geo_of(geom, &v);
    channel_room r;
    room_for(&v, dtype, variant, &r);
    ch_backward_fn *f = PICK(ch_backward, dtype, variant);
    f(&v, &r, nb, dy, dy_stride, w, scratch, dx, dx_stride);
    return LADLE_OK;
}
