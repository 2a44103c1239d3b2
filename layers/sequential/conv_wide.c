/*
 * The wide-row path of the convolution's forward and weight gradient, for
 * stride 1 in the two last dimensions (1-D and 2-D; conv.c has the im2col
 * path, which also runs this layer's backward).
 *
 * Lay the output on the grid of the padded input's rows: output (oh, ow)
 * sits at column q = oh Wp + ow, Wp the padded width, and the columns
 * ow >= OW between rows are spare. Then the im2col row of tap (c, i, j) is
 * one contiguous run of the padded plane,
 *
 *     col[(c, i, j), q] = xpad[c, i d_h Wp + j d_w + q],   q < Q = (OH-1) Wp + OW,
 *
 * so im2col is K long copies per image instead of K x OH copies of OW
 * elements each. The price is the spare columns: these GEMMs are Q / P
 * times wider.
 *
 *   forward          Ywide[Co_g, Q] = W_g col;  y = the OW-wide runs of Ywide
 *   backward_weight  dW_g += dYwide col^T
 *
 * dYwide is dy spread onto the grid with zeros in the spare columns (the
 * zeros are written once, at plan time: nothing else writes there), so the
 * spare columns add nothing to dW. The backward stays with im2col: its GEMM
 * then has no spare columns, and col2im adds short rows where the wide grid
 * would add long ones, which measured faster for LeNet's conv2 (0.48 ms
 * against 0.57).
 */
#include "layers/sequential/conv_impl.h"

/*
 * When to take this path. It saves im2col's row copies (K x OH per image
 * and pass), and costs the spare columns' arithmetic plus copies of y and
 * dy (Co_g x OH per image and pass). So it pays when the kernel has many
 * taps and the layer few output channels. Measured (bench_layers conv2d,
 * f32, forward + backward + weight, ms, wide / im2col from padded planes):
 *   64x6x14^2 k5 -> 16 (K 150, LeNet conv2)  1.77 / 2.0
 *   32x16x32^2 k3 -> 16 (K 144)              7.9  / 10.4
 *   64x1x28^2 k5 -> 6 (K 25, LeNet conv1)    1.09 / 0.88
 *   32x3x32^2 k3 -> 16 (K 27)                1.51 / 1.16
 *   32x32x16^2 k3 -> 32 (K 288)              7.0  / 6.5
 *   32x64x16^2 k3 -> 64, and wider           24.0 / 21.9
 */
#define MIN_TAPS 64
#define MAX_CO 16
#define MAX_SPARE 1.5

int ladle__conv_wide_plan(conv *v)
{
    if (v->pointwise || v->in[0] != 1 || v->k[0] != 1 || v->s[1] != 1 || v->s[2] != 1)
        return 0;
    int64_t q = 0;
    if (!ladle__mul_ok(v->out[1] - 1, v->wp, &q) || !ladle__add_ok(q, v->out[2], &q))
        return 0;
    double spare = (double)q / (double)v->pout;
    if (spare > MAX_SPARE || v->kk < MIN_TAPS || v->cog > MAX_CO)
        return 0;
    v->q = q;
    return 1;
}

ladle_status ladle__conv_wide_alloc(conv *v, const ladle_backend *be, size_t es)
{
    ladle_status st = LADLE_OK;
    int64_t cols = 0;
    if (!ladle__mul_ok(v->batch_per_gemm, v->q, &cols))
        return ladle__raise(LADLE_ERR_SHAPE, "ladle_conv_create",
                            "%lld images of %lld columns are too many",
                            (long long)v->batch_per_gemm, (long long)v->q);
    if (cols < v->ldcol) /* the backward's im2col matrix */
        cols = v->ldcol;
    if ((st = ladle__conv_buffer(be, v->kk, cols, es, "column buffer", &v->col)) ||
        (st = ladle__conv_buffer(be, v->cog, cols, es, "output matrix", &v->mat)) ||
        (st = ladle__conv_buffer(be, v->cog, cols, es, "spread gradient", &v->dyw)) ||
        (st = ladle__conv_buffer(be, v->kk, v->co, es, "transposed weight gradient",
                                 &v->dwt)))
        return st;
    if (v->p[1] + v->p[2] > 0) { /* cg padded planes of x */
        int64_t rows = 0;
        if (!ladle__mul_ok(v->cg, v->hp, &rows))
            rows = INT64_MAX; /* and ladle__conv_buffer says it is too large */
        st = ladle__conv_buffer(be, rows, v->wp, es, "padded planes", &v->xpad);
    }
    return st;
}

/* The columns of images n.. (nb of them), group g, in the column buffer. */
static ladle_status wide_cols(const ladle_op *op, const void *x, int64_t n, int64_t nb,
                              int64_t g)
{
    const conv *v = op->impl;
    const char *img = (const char *)x + (size_t)((n * v->c + g * v->cg) * v->pin) *
                                            ladle_dtype_size(op->dtype);
    return op->be->fn->conv_wide_im2col(op->be, op->dtype, &v->geom, nb, img, v->c * v->pin,
                                        v->xpad, v->col, v->batch_per_gemm * v->q);
}

/* Between the grid g and images n.. of t (Co channels), group grp. */
static ladle_status grid(const ladle_op *op, int64_t nb, void *g, void *t, int64_t n,
                         int64_t grp, int to_tensor)
{
    const conv *v = op->impl;
    char *img = (char *)t + (size_t)((n * v->co + grp * v->cog) * v->pout) *
                                ladle_dtype_size(op->dtype);
    return op->be->fn->conv_wide_grid(op->be, op->dtype, &v->geom, to_tensor, nb, g,
                                      v->batch_per_gemm * v->q, img, v->co * v->pout);
}

static const void *weight_of(const ladle_op *op, const void *w, int64_t g)
{
    const conv *v = op->impl;
    return (const char *)w + (size_t)(g * v->cog * v->kk) * ladle_dtype_size(op->dtype);
}

ladle_status ladle__conv_wide_forward(const ladle_op *op, const void *x, void *y, int64_t n)
{
    ladle_status st = LADLE_OK;
    const conv *v = op->impl;
    int64_t ld = v->batch_per_gemm * v->q;
    for (int64_t n0 = 0; n0 < n; n0 += v->batch_per_gemm) {
        int64_t nb = n - n0 < v->batch_per_gemm ? n - n0 : v->batch_per_gemm;
        for (int64_t g = 0; g < v->g; g++) {
            LADLE_CALL(wide_cols(op, x, n0, nb, g));
            LADLE_CALL(op->be->fn->gemm(op->be, op->dtype, 0, 0, v->cog, nb * v->q, v->kk, 1.0,
                                        weight_of(op, op->params[0]->data, g), v->kk, v->col,
                                        ld, 0.0, v->mat, ld));
            LADLE_CALL(grid(op, nb, v->mat, y, n0, g, 1));
            LADLE_CALL(ladle__conv_bias_chunk(op, 0, y, n0, nb, g));
        }
    }
fail:
    return st;
}

/* dW_g += dYwide col^T, computed as its transpose col dYwide^T into dwt:
 * OpenBLAS runs that orientation (the long K inner, 150 x 16 out) 1.25
 * times faster for LeNet's conv2. */
ladle_status ladle__conv_wide_backward_weight(const ladle_op *op, const void *x, const void *dy,
                                              int64_t n)
{
    ladle_status st = LADLE_OK;
    const conv *v = op->impl;
    size_t es = ladle_dtype_size(op->dtype);
    int64_t ld = v->batch_per_gemm * v->q;
    LADLE_CALL(op->be->fn->fill(op->be, op->dtype, v->kk * v->co, 0.0, v->dwt));
    for (int64_t n0 = 0; n0 < n; n0 += v->batch_per_gemm) {
        int64_t nb = n - n0 < v->batch_per_gemm ? n - n0 : v->batch_per_gemm;
        for (int64_t g = 0; g < v->g; g++) {
            LADLE_CALL(wide_cols(op, x, n0, nb, g));
            LADLE_CALL(grid(op, nb, v->dyw, (void *)dy, n0, g, 0));
            LADLE_CALL(op->be->fn->gemm(op->be, op->dtype, 0, 1, v->kk, v->cog, nb * v->q, 1.0,
                                        v->col, ld, v->dyw, ld, 1.0,
                                        (char *)v->dwt + (size_t)(g * v->kk * v->cog) * es,
                                        v->cog));
            LADLE_CALL(ladle__conv_bias_chunk(op, 1, dy, n0, nb, g));
        }
    }
    /* dW[g][co][r] += dwt[g][r][co] */
    int64_t ext[3] = {v->g, v->cog, v->kk};
    int64_t sstr[3] = {v->kk * v->cog, 1, v->cog}, dstr[3] = {v->cog * v->kk, v->kk, 1};
    LADLE_CALL(op->be->fn->copy_box(op->be, op->dtype, LADLE_BOX_ADD, 3, ext, v->dwt, sstr,
                                    op->grads[0]->data, dstr));
fail:
    return st;
}
