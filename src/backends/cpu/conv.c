/*
 * The convolution's kernels on the CPU: im2col and col2im (general, and
 * from zero-bordered planes when the rows are read with stride 1), the
 * wide-row path's columns and grid, and the bias over channels with its
 * gradient. The layer (layers/sequential/conv.c, conv_wide.c) plans which path runs;
 * these only move and add elements, so they need no fused multiply-adds.
 */
#include <string.h>

#include "src/backends/cpu/cpu.h"
#include "src/backends/cpu/simd.h"

/* A group's geometry with the extents the loops use. */
typedef struct dims {
    int64_t cg, cog;
    int64_t in[3], out[3];
    int64_t k[3], s[3], p[3], d[3];
    int64_t pin, pout; /* positions per image in and out */
    int64_t hp, wp;    /* the padded extents of the last two dimensions */
    int64_t q;         /* the wide grid's columns per image (wide slots only) */
} dims;

static void dims_of(const ladle_conv_geom *g, int wide, dims *v)
{
    v->cg = g->cg;
    v->cog = g->cog;
    for (int i = 0; i < 3; i++) {
        v->in[i] = g->in[i];
        v->out[i] = g->out[i];
        v->k[i] = g->k[i];
        v->s[i] = g->s[i];
        v->p[i] = g->p[i];
        v->d[i] = g->d[i];
    }
    v->pin = v->in[0] * v->in[1] * v->in[2];
    v->pout = v->out[0] * v->out[1] * v->out[2];
    v->hp = v->in[1] + 2 * v->p[1];
    v->wp = v->in[2] + 2 * v->p[2];
    v->q = wide ? (v->out[1] - 1) * v->wp + v->out[2] : 0;
}

/* The output range [lo, hi) of a kernel tap whose input index is
 * o*s - p + t*d, so that it falls inside [0, n). */
static void valid_range(int64_t n, int64_t outn, int64_t s, int64_t p, int64_t off,
                        int64_t *lo, int64_t *hi)
{
    /* o*s + off - p >= 0  and  o*s + off - p <= n - 1 */
    int64_t a = p - off, b = n - 1 + p - off;
    *lo = a <= 0 ? 0 : (a + s - 1) / s;
    *hi = b < 0 ? 0 : b / s + 1;
    if (*hi > outn)
        *hi = outn;
    if (*lo > *hi)
        *lo = *hi;
}

#define LADLE_CPU_KERNELS "src/backends/cpu/conv_rows.inc"
#include "src/backends/cpu/each_dtype.h"

/* im2col (add 0) or col2im (add 1) of nb images; col and img are read
 * only by the direction that reads them. */
static void columns(ladle_dtype dtype, const ladle_conv_geom *geom, int64_t nb, char *img,
                    int64_t img_stride, char *col, int64_t ld, void *planes, int add)
{
    dims v;
    dims_of(geom, 0, &v);
    size_t es = ladle_dtype_size(dtype);
    for (int64_t b = 0; b < nb; b++) {
        void *ib = img + (size_t)(b * img_stride) * es;
        void *cb = col + (size_t)(b * v.pout) * es;
        if (planes != NULL)
            LADLE_CPU_TYPED(dtype == LADLE_F32, plane_cols, (&v, ib, cb, ld, planes, add));
        else
            LADLE_CPU_TYPED(dtype == LADLE_F32, cols, (&v, ib, cb, ld, add));
    }
}

ladle_status ladle__cpu_conv_im2col(const ladle_backend *be, ladle_dtype dtype,
                                    const ladle_conv_geom *geom, int64_t nb, const void *x,
                                    int64_t x_stride, void *col, int64_t ld, void *planes)
{
    columns(dtype, geom, nb, (char *)x, x_stride, col, ld, planes, 0);
    return LADLE_OK;
}

ladle_status ladle__cpu_conv_col2im(const ladle_backend *be, ladle_dtype dtype,
                                    const ladle_conv_geom *geom, int64_t nb, const void *col,
                                    int64_t ld, void *dx, int64_t dx_stride, void *planes)
{
    columns(dtype, geom, nb, dx, dx_stride, (char *)col, ld, planes, 1);
    return LADLE_OK;
}

ladle_status ladle__cpu_conv_wide_im2col(const ladle_backend *be, ladle_dtype dtype,
                                         const ladle_conv_geom *geom, int64_t nb,
                                         const void *x, int64_t x_stride, void *xpad,
                                         void *col, int64_t ld)
{
    ladle_status st = LADLE_OK;
    dims v;
    dims_of(geom, 1, &v);
    size_t es = ladle_dtype_size(dtype);
    int64_t plane = v.hp * v.wp;
    for (int64_t b = 0; b < nb; b++) {
        /* the image's cg planes as rows of the padded width: x itself
         * without padding, else copied into the middle of xpad */
        const char *planes = (const char *)x + (size_t)(b * x_stride) * es;
        if (xpad != NULL) {
            int64_t ext[3] = {v.cg, v.in[1], v.in[2]};
            int64_t sstr[3] = {v.pin, v.in[2], 1}, dstr[3] = {plane, v.wp, 1};
            char *mid = (char *)xpad + (size_t)(v.p[1] * v.wp + v.p[2]) * es;
            LADLE_CALL(
                ladle__cpu_copy_box(be, dtype, LADLE_BOX_COPY, 3, ext, planes, sstr, mid, dstr));
            planes = xpad;
        }
        char *cb = (char *)col + (size_t)(b * v.q) * es;
        for (int64_t c = 0; c < v.cg; c++)
            for (int64_t i = 0; i < v.k[1]; i++)
                for (int64_t j = 0; j < v.k[2]; j++) {
                    const char *src =
                        planes + (size_t)(c * plane + i * v.d[1] * v.wp + j * v.d[2]) * es;
                    memcpy(cb, src, (size_t)v.q * es);
                    cb += (size_t)ld * es;
                }
    }
fail:
    return st;
}

ladle_status ladle__cpu_conv_wide_grid(const ladle_backend *be, ladle_dtype dtype,
                                       const ladle_conv_geom *geom, int to_tensor, int64_t nb,
                                       void *grid, int64_t ld, void *t, int64_t t_stride)
{
    dims v;
    dims_of(geom, 1, &v);
    LADLE_CPU_TYPED(dtype == LADLE_F32, grid, (&v, nb, grid, ld, t, t_stride, to_tensor));
    return LADLE_OK;
}

ladle_status ladle__cpu_bias_add(const ladle_backend *be, ladle_dtype dtype, int64_t rows,
                                 int64_t channels, int64_t inner, const void *b, void *y)
{
    LADLE_CPU_TYPED(dtype == LADLE_F32, bias_add, (rows, channels, inner, b, y));
    return LADLE_OK;
}

ladle_status ladle__cpu_bias_grad(const ladle_backend *be, ladle_dtype dtype, int64_t rows,
                                  int64_t channels, int64_t inner, const void *dy, void *db)
{
    LADLE_CPU_TYPED(dtype == LADLE_F32, bias_grad, (rows, channels, inner, dy, db));
    return LADLE_OK;
}
