/*
 * Convolution over 1 to 3 spatial dimensions (1-D and 2-D are 3-D with unit
 * extents), by im2col and GEMM per group:
 *
 *   forward          Y_g[Co_g, B*P]   = W_g[Co_g, K]   col[K, B*P]      (+ bias)
 *   backward         colgrad[K, B*P]  = W_g^T          dY_g;   dx = col2im(colgrad)
 *   backward_weight  dW_g[Co_g, K]   += dY_g           col^T;  db = sums of dy
 *
 * with K = C_in/groups * kernel volume and P the output positions of one
 * image. B images share one GEMM so that small images still make wide
 * matrices; B is 1 when an image alone is wide, and then the GEMM reads and
 * writes the tensors in place. A 1x1 convolution with stride 1 and no
 * padding needs no im2col at all. The column buffer and the matrices are
 * planned workspace; the weight gradient recomputes the columns from the
 * saved x rather than keeping them.
 *
 * 1-D and 2-D layers with stride 1 along the rows build their columns from
 * a zero-bordered copy of each input plane (plane_cols), as short runs moved
 * by vectors; with many kernel taps and few output channels the forward and
 * the weight gradient take the wide-row path of conv_wide.c instead.
 */
#include <stdio.h>
#include <string.h>

#include "src/op/op_impl.h"
#include "src/backends/cpu/simd.h"
#include "layers/conv_impl.h"

/* GEMMs aim for at least this many columns; the column buffer stays below
 * COL_BUDGET elements. Measured (bench_layers): batching more images than
 * 256 columns need only grows the column buffer out of L2 and adds the
 * shuffles between the matrix and the tensors; an image of 256 outputs or
 * more goes alone, straight to and from the tensors. */
#define TARGET_COLUMNS 256
#define COL_BUDGET (4 << 20)


/* ---- im2col and col2im ---- */

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

#define DEFINE_IM2COL(T, S)                                                              \
    /* col row r = (c, kd, kh, kw); column b*P + p. add: col2im (dx += col). */          \
    LADLE_KERNEL static void cols_##S(const conv *v, T *img, T *col, int64_t ld, int add) \
    {                                                                                    \
        for (int64_t c = 0; c < v->cg; c++)                                               \
            for (int64_t i = 0; i < v->k[0]; i++)                                         \
                for (int64_t j = 0; j < v->k[1]; j++)                                     \
                    for (int64_t l = 0; l < v->k[2]; l++) {                               \
                        int64_t row = ((c * v->k[0] + i) * v->k[1] + j) * v->k[2] + l;    \
                        T *cr = col + row * ld;                                           \
                        T *ic = img + c * v->pin;                                         \
                        int64_t lo0, hi0, lo1, hi1, lo2, hi2;                             \
                        valid_range(v->in[0], v->out[0], v->s[0], v->p[0], i * v->d[0],   \
                                    &lo0, &hi0);                                          \
                        valid_range(v->in[1], v->out[1], v->s[1], v->p[1], j * v->d[1],   \
                                    &lo1, &hi1);                                          \
                        valid_range(v->in[2], v->out[2], v->s[2], v->p[2], l * v->d[2],   \
                                    &lo2, &hi2);                                          \
                        for (int64_t od = 0; od < v->out[0]; od++)                        \
                            for (int64_t oh = 0; oh < v->out[1]; oh++) {                  \
                                T *crow = cr + (od * v->out[1] + oh) * v->out[2];         \
                                int inside = od >= lo0 && od < hi0 && oh >= lo1 &&        \
                                             oh < hi1;                                    \
                                if (!inside) {                                            \
                                    if (!add)                                             \
                                        memset(crow, 0, sizeof(T) * (size_t)v->out[2]);   \
                                    continue;                                             \
                                }                                                         \
                                int64_t id = od * v->s[0] - v->p[0] + i * v->d[0];        \
                                int64_t ih = oh * v->s[1] - v->p[1] + j * v->d[1];        \
                                T *irow = ic + (id * v->in[1] + ih) * v->in[2] +          \
                                          (lo2 * v->s[2] - v->p[2] + l * v->d[2]);        \
                                int64_t sw = v->s[2];                                     \
                                if (add && sw == 1) {                                     \
                                    row_add_##S(irow, crow + lo2, hi2 - lo2);             \
                                    continue;                                             \
                                }                                                         \
                                if (add) {                                                \
                                    for (int64_t o = lo2; o < hi2; o++)                   \
                                        irow[(o - lo2) * sw] += crow[o];                  \
                                    continue;                                             \
                                }                                                         \
                                for (int64_t o = 0; o < lo2; o++)                         \
                                    crow[o] = 0;                                          \
                                if (sw == 1)                                              \
                                    row_copy_##S(crow + lo2, irow, hi2 - lo2);            \
                                else                                                      \
                                    for (int64_t o = lo2; o < hi2; o++)                   \
                                        crow[o] = irow[(o - lo2) * sw];                   \
                                for (int64_t o = hi2; o < v->out[2]; o++)                 \
                                    crow[o] = 0;                                          \
                            }                                                             \
                    }                                                                     \
    }

DEFINE_IM2COL(float, f32)
DEFINE_IM2COL(double, f64)

/*
 * 1-D and 2-D with stride 1 along the rows: each channel is first copied
 * into the middle of a zero-bordered plane, so every column row is OH plain
 * runs of OW elements, without edge cases. col2im adds into a second plane
 * and then adds its middle to dx.
 */
#define DEFINE_PLANES(T, S)                                                              \
    LADLE_KERNEL static void plane_cols_##S(const conv *v, T *img, T *col, int64_t ld,   \
                                            T *pad, int add)                             \
    {                                                                                    \
        int64_t H = v->in[1], W = v->in[2], wp = v->wp, oh = v->out[1], ow = v->out[2];  \
        pad += add ? v->hp * wp : 0; /* the gradient's own plane: x's keeps its border */ \
        T *mid = pad + v->p[1] * wp + v->p[2];                                           \
        for (int64_t c = 0; c < v->cg; c++) {                                             \
            T *ic = img + c * v->pin;                                                    \
            if (add)                                                                     \
                memset(pad, 0, sizeof(T) * (size_t)(v->hp * wp));                        \
            else                                                                         \
                for (int64_t h = 0; h < H; h++)                                          \
                    row_copy_##S(mid + h * wp, ic + h * W, W);                           \
            for (int64_t i = 0; i < v->k[1]; i++)                                         \
                for (int64_t j = 0; j < v->k[2]; j++) {                                   \
                    T *cr = col + ((c * v->k[1] + i) * v->k[2] + j) * ld;                 \
                    T *src = pad + i * v->d[1] * wp + j * v->d[2];                       \
                    int64_t step = v->s[1] * wp;                                         \
                    if (add)                                                             \
                        for (int64_t o = 0; o < oh; o++)                                 \
                            row_add_##S(src + o * step, cr + o * ow, ow);                \
                    else                                                                 \
                        for (int64_t o = 0; o < oh; o++)                                 \
                            row_copy_##S(cr + o * ow, src + o * step, ow);               \
                }                                                                        \
            if (add)                                                                     \
                for (int64_t h = 0; h < H; h++)                                          \
                    row_add_##S(ic + h * W, mid + h * wp, W);                            \
        }                                                                                \
    }

DEFINE_PLANES(float, f32)
DEFINE_PLANES(double, f64)

/* im2col (add 0) or col2im (add 1) of image n, group g, into column block b. */
static void columns(const ladle_op *op, const void *x, int64_t n, int64_t g, int64_t b,
                    int add)
{
    const conv *v = op->impl;
    size_t es = ladle_dtype_size(op->dtype);
    char *img = (char *)x + (size_t)((n * v->c + g * v->cg) * v->pin) * es;
    char *col = (char *)v->col + (size_t)(b * v->pout) * es;
    int64_t ld = v->batch_per_gemm * v->pout;
    if (v->plane != NULL && op->dtype == LADLE_F32)
        plane_cols_f32(v, (float *)img, (float *)col, ld, v->plane, add);
    else if (v->plane != NULL)
        plane_cols_f64(v, (double *)img, (double *)col, ld, v->plane, add);
    else if (op->dtype == LADLE_F32)
        cols_f32(v, (float *)img, (float *)col, ld, add);
    else
        cols_f64(v, (double *)img, (double *)col, ld, add);
}

/* Copy between the planned Co_g x B*P matrix and images n0.. of a tensor
 * of Co channels (to_tensor: matrix -> tensor). */
static ladle_status shuffle(const ladle_op *op, void *t, int64_t n0, int64_t nb, int64_t g,
                            int to_tensor)
{
    const conv *v = op->impl;
    size_t es = ladle_dtype_size(op->dtype);
    int64_t ext[3] = {v->cog, nb, v->pout};
    int64_t mstr[3] = {v->batch_per_gemm * v->pout, v->pout, 1};
    int64_t tstr[3] = {v->pout, v->co * v->pout, 1};
    char *tp = (char *)t + (size_t)((n0 * v->co + g * v->cog) * v->pout) * es;
    if (to_tensor)
        return op->be->fn->copy_box(op->be, op->dtype, LADLE_BOX_COPY, 3, ext, v->mat, mstr, tp,
                                    tstr);
    return op->be->fn->copy_box(op->be, op->dtype, LADLE_BOX_COPY, 3, ext, tp, tstr, v->mat,
                                mstr);
}

static const void *weight(const ladle_op *op, int64_t g)
{
    const conv *v = op->impl;
    return (const char *)op->params[0]->data +
           (size_t)(g * v->cog * v->kk) * ladle_dtype_size(op->dtype);
}

static void *wgrad(const ladle_op *op, int64_t g)
{
    const conv *v = op->impl;
    return (char *)op->grads[0]->data +
           (size_t)(g * v->cog * v->kk) * ladle_dtype_size(op->dtype);
}

/* Where the B image's columns come from: the column buffer, or (pointwise,
 * B = 1) the image itself. */
static const void *col_source(const ladle_op *op, const void *x, int64_t n, int64_t g,
                              int64_t nb)
{
    const conv *v = op->impl;
    if (v->pointwise)
        return (const char *)x +
               (size_t)((n * v->c + g * v->cg) * v->pin) * ladle_dtype_size(op->dtype);
    for (int64_t b = 0; b < nb; b++)
        columns(op, x, n + b, g, b, 0);
    return v->col;
}

static void add_bias(const ladle_op *op, void *y, int64_t n)
{
    const conv *v = op->impl;
    size_t es = ladle_dtype_size(op->dtype);
    const char *bias = op->params[1]->data;
    for (int64_t i = 0; i < n; i++)
        for (int64_t c = 0; c < v->co; c++) {
            char *row = (char *)y + (size_t)((i * v->co + c) * v->pout) * es;
            if (op->dtype == LADLE_F32) {
                float b = ((const float *)bias)[c], *r = (float *)row;
                for (int64_t p = 0; p < v->pout; p++)
                    r[p] += b;
            } else {
                double b = ((const double *)bias)[c], *r = (double *)row;
                for (int64_t p = 0; p < v->pout; p++)
                    r[p] += b;
            }
        }
}

static ladle_status conv_forward(ladle_op *op, ladle_ctx *ctx, const ladle_tensor *x,
                                 ladle_tensor *y, int64_t n)
{
    ladle_status st = LADLE_OK;
    const conv *v = op->impl;
    size_t es = ladle_dtype_size(op->dtype);
    (void)ctx;
    if (v->wide)
        LADLE_CALL(ladle__conv_wide_forward(op, x->data, y->data, n));
    else
        for (int64_t n0 = 0; n0 < n; n0 += v->batch_per_gemm) {
            int64_t nb = n - n0 < v->batch_per_gemm ? n - n0 : v->batch_per_gemm;
            for (int64_t g = 0; g < v->g; g++) {
                const void *col = col_source(op, x->data, n0, g, nb);
                int64_t ldb = v->pointwise ? v->pout : v->batch_per_gemm * v->pout;
                if (nb == 1 && v->batch_per_gemm == 1) { /* straight into y */
                    char *out = (char *)y->data +
                                (size_t)((n0 * v->co + g * v->cog) * v->pout) * es;
                    LADLE_CALL(op->be->fn->gemm(op->be, op->dtype, 0, 0, v->cog, v->pout, v->kk,
                                                1.0, weight(op, g), v->kk, col, ldb, 0.0, out,
                                                v->pout));
                } else {
                    int64_t ldm = v->batch_per_gemm * v->pout;
                    LADLE_CALL(op->be->fn->gemm(op->be, op->dtype, 0, 0, v->cog, nb * v->pout,
                                                v->kk, 1.0, weight(op, g), v->kk, col, ldb, 0.0,
                                                v->mat, ldm));
                    LADLE_CALL(shuffle(op, y->data, n0, nb, g, 1));
                }
            }
        }
    if (op->nparams > 1)
        add_bias(op, y->data, n);
fail:
    return st;
}

/* The Co_g x B*P matrix of dy for images n0.., group g: the tensor itself
 * when B = 1, else gathered into the planned matrix. */
static const void *dy_matrix(const ladle_op *op, const void *dy, int64_t n0, int64_t nb,
                             int64_t g, int64_t *ld, ladle_status *st)
{
    const conv *v = op->impl;
    if (v->batch_per_gemm == 1) {
        *ld = v->pout;
        return (const char *)dy +
               (size_t)((n0 * v->co + g * v->cog) * v->pout) * ladle_dtype_size(op->dtype);
    }
    *st = shuffle(op, (void *)dy, n0, nb, g, 0);
    *ld = v->batch_per_gemm * v->pout;
    return v->mat;
}

static ladle_status conv_backward(ladle_op *op, ladle_ctx *ctx, const ladle_tensor *dy,
                                  ladle_tensor *dx, int64_t n)
{
    ladle_status st = LADLE_OK;
    const conv *v = op->impl;
    size_t es = ladle_dtype_size(op->dtype);
    (void)ctx;
    if (dx == NULL)
        return LADLE_OK;
    if (!v->pointwise)
        LADLE_CALL(op->be->fn->fill(op->be, op->dtype, dx->numel, 0.0, dx->data));
    for (int64_t n0 = 0; n0 < n; n0 += v->batch_per_gemm) {
        int64_t nb = n - n0 < v->batch_per_gemm ? n - n0 : v->batch_per_gemm, ld;
        for (int64_t g = 0; g < v->g; g++) {
            const void *dym = dy_matrix(op, dy->data, n0, nb, g, &ld, &st);
            LADLE_CALL(st);
            if (v->pointwise) { /* colgrad is dx itself */
                char *out = (char *)dx->data + (size_t)((n0 * v->c + g * v->cg) * v->pin) * es;
                LADLE_CALL(op->be->fn->gemm(op->be, op->dtype, 1, 0, v->kk, v->pout, v->cog, 1.0,
                                            weight(op, g), v->kk, dym, ld, 0.0, out, v->pout));
                continue;
            }
            int64_t ldc = v->batch_per_gemm * v->pout;
            LADLE_CALL(op->be->fn->gemm(op->be, op->dtype, 1, 0, v->kk, nb * v->pout, v->cog, 1.0,
                                        weight(op, g), v->kk, dym, ld, 0.0, v->col, ldc));
            for (int64_t b = 0; b < nb; b++)
                columns(op, dx->data, n0 + b, g, b, 1);
        }
    }
fail:
    return st;
}

/* A row's sum in double, in eight interleaved partial sums: one chain of
 * dependent adds per row made the bias gradient 7% of LeNet conv2's time. */
#define DEFINE_ROW_SUM(T, S)                                                             \
    LADLE_KERNEL static double row_sum_##S(const T *r, int64_t n)                        \
    {                                                                                    \
        double s[8] = {0};                                                               \
        int64_t p = 0;                                                                   \
        for (; p + 8 <= n; p += 8)                                                       \
            for (int l = 0; l < 8; l++)                                                  \
                s[l] += r[p + l];                                                        \
        for (; p < n; p++)                                                               \
            s[0] += r[p];                                                                \
        return ((s[0] + s[1]) + (s[2] + s[3])) + ((s[4] + s[5]) + (s[6] + s[7]));        \
    }

DEFINE_ROW_SUM(float, f32)
DEFINE_ROW_SUM(double, f64)

static ladle_status conv_backward_weight(ladle_op *op, ladle_ctx *ctx, const ladle_tensor *dy,
                                         int64_t n)
{
    ladle_status st = LADLE_OK;
    const conv *v = op->impl;
    size_t es = ladle_dtype_size(op->dtype);
    if (v->wide)
        LADLE_CALL(ladle__conv_wide_backward_weight(op, ctx->x->data, dy->data, n));
    else
        for (int64_t n0 = 0; n0 < n; n0 += v->batch_per_gemm) {
            int64_t nb = n - n0 < v->batch_per_gemm ? n - n0 : v->batch_per_gemm, ld;
            for (int64_t g = 0; g < v->g; g++) {
                const void *col = col_source(op, ctx->x->data, n0, g, nb);
                int64_t ldb = v->pointwise ? v->pout : v->batch_per_gemm * v->pout;
                const void *dym = dy_matrix(op, dy->data, n0, nb, g, &ld, &st);
                LADLE_CALL(st);
                LADLE_CALL(op->be->fn->gemm(op->be, op->dtype, 0, 1, v->cog, v->kk, nb * v->pout,
                                            1.0, dym, ld, col, ldb, 1.0, wgrad(op, g), v->kk));
            }
        }
    if (op->nparams > 1) {
        char *db = op->grads[1]->data;
        for (int64_t i = 0; i < n; i++)
            for (int64_t c = 0; c < v->co; c++) {
                const char *row = (const char *)dy->data + (size_t)((i * v->co + c) * v->pout) * es;
                if (op->dtype == LADLE_F32)
                    ((float *)db)[c] += (float)row_sum_f32((const float *)row, v->pout);
                else
                    ((double *)db)[c] += row_sum_f64((const double *)row, v->pout);
            }
    }
fail:
    return st;
}

static void conv_destroy(ladle_op *op)
{
    conv *v = op->impl;
    if (v == NULL)
        return;
    op->be->fn->free(op->be, v->col);
    op->be->fn->free(op->be, v->mat);
    op->be->fn->free(op->be, v->plane);
    ladle__conv_wide_free(v, op->be);
    ladle__free(v);
}

static const ladle_op_vtable conv_vt = {
    .name = "conv",
    .destroy = conv_destroy,
    .layer_forward = conv_forward,
    .layer_backward = conv_backward,
    .layer_backward_weight = conv_backward_weight,
};

void ladle_conv_desc_init(ladle_conv_desc *d, int nd, int64_t in_channels, int64_t out_channels,
                          int64_t kernel)
{
    if (d == NULL)
        return;
    memset(d, 0, sizeof *d);
    d->nd = nd;
    d->in_channels = in_channels;
    d->out_channels = out_channels;
    d->groups = 1;
    for (int i = 0; i < 3; i++) {
        d->kernel[i] = kernel;
        d->stride[i] = 1;
        d->dilation[i] = 1;
    }
    d->bias = 1;
}

/* The window of every spatial dimension (lower ones are unit extents). */
static ladle_status plan_window(const ladle_conv_desc *d, const int64_t *xs, conv *v)
{
    const char *f = "ladle_conv_create";
    char what[40];
    for (int i = 0; i < 3; i++) {
        int s = i - (3 - d->nd); /* index into the description, or < 0 for padding dims */
        v->in[i] = s < 0 ? 1 : xs[2 + s];
        v->k[i] = s < 0 ? 1 : d->kernel[s];
        v->s[i] = s < 0 ? 1 : d->stride[s];
        v->p[i] = s < 0 ? 0 : d->padding[s];
        v->d[i] = s < 0 ? 1 : d->dilation[s];
        snprintf(what, sizeof what, "spatial dimension %d", s < 0 ? 0 : s);
        ladle_status st = ladle__window_length(f, what, v->in[i], v->k[i], v->s[i], v->p[i],
                                               v->d[i], 0, &v->out[i]);
        if (st != LADLE_OK)
            return st;
        if (v->out[i] < 1)
            return ladle__raise(LADLE_ERR_SHAPE, f,
                                "the dilated kernel (%lld) is larger than the padded input "
                                "(%lld)",
                                (long long)(v->d[i] * (v->k[i] - 1) + 1),
                                (long long)(v->in[i] + 2 * v->p[i]));
    }
    return LADLE_OK;
}

/* Check the description against x's shape and fill the geometry. */
static ladle_status plan(const ladle_conv_desc *d, const int64_t *xs, conv *v)
{
    const char *f = "ladle_conv_create";
    char a[160];
    ladle_status st = LADLE_OK;
    if (d->nd < 1 || d->nd > 3)
        return ladle__raise(LADLE_ERR_ARG, f, "%d spatial dimensions (1 to 3)", d->nd);
    if (d->in_channels < 1 || d->out_channels < 1 || d->groups < 1 ||
        d->in_channels % d->groups || d->out_channels % d->groups)
        return ladle__raise(LADLE_ERR_ARG, f,
                            "channels %lld -> %lld must be positive multiples of groups %lld",
                            (long long)d->in_channels, (long long)d->out_channels,
                            (long long)d->groups);
    if (xs[1] != d->in_channels)
        return ladle__raise(LADLE_ERR_SHAPE, f, "x has %lld channels, the layer %lld",
                            (long long)xs[1], (long long)d->in_channels);
    v->c = d->in_channels;
    v->co = d->out_channels;
    v->g = d->groups;
    v->cg = v->c / v->g;
    v->cog = v->co / v->g;
    if ((st = plan_window(d, xs, v)) != LADLE_OK)
        return st;
    /* the weight (Co x Cg x kernel) and one image's output must be tensors */
    int64_t ws[5] = {v->co, v->cg, v->k[0], v->k[1], v->k[2]};
    int64_t ys[4] = {v->co, v->out[0], v->out[1], v->out[2]};
    if (ladle__volume_within(5, ws, LADLE_MAX_ELEMS) < 0)
        return ladle__raise(LADLE_ERR_ARG, f,
                            "the weight, %s, is too large (more than 2^57 elements)",
                            ladle__fmt_shape64(a, sizeof a, 5, ws));
    if (ladle__volume_within(4, ys, LADLE_MAX_ELEMS) < 0)
        return ladle__raise(LADLE_ERR_SHAPE, f,
                            "the output of one image, %s, is too large (more than 2^57 "
                            "elements)",
                            ladle__fmt_shape64(a, sizeof a, 4, ys));
    v->kvol = v->k[0] * v->k[1] * v->k[2];
    v->pin = v->in[0] * v->in[1] * v->in[2];
    v->pout = v->out[0] * v->out[1] * v->out[2];
    v->kk = v->cg * v->kvol;
    if (v->kk > INT32_MAX || v->pout > INT32_MAX || v->co > INT32_MAX)
        return ladle__raise(LADLE_ERR_SHAPE, f, "matrices above 2^31 rows or columns");
    v->pointwise = v->kvol == 1 && v->s[0] * v->s[1] * v->s[2] == 1 &&
                   v->p[0] + v->p[1] + v->p[2] == 0;
    v->hp = v->in[1] + 2 * v->p[1]; /* the padded planes of plane_cols and conv_wide.c */
    v->wp = v->in[2] + 2 * v->p[2];
    v->wide = ladle__conv_wide_plan(v);
    int64_t per = v->wide ? v->q : v->pout;
    int64_t target = v->wide ? LADLE_CONV_WIDE_COLUMNS : TARGET_COLUMNS;
    int64_t b = per >= target || v->pointwise ? 1 : (target + per - 1) / per;
    if (b > xs[0])
        b = xs[0];
    /* kk, b and per are below 2^31 each: kk * b * per fits */
    while (b > 1 && v->kk * b * per > COL_BUDGET)
        b--;
    v->batch_per_gemm = b < 1 ? 1 : b;
    if (v->batch_per_gemm * v->pout > INT32_MAX)
        return ladle__raise(LADLE_ERR_SHAPE, f, "matrices above 2^31 rows or columns");
    return LADLE_OK;
}

ladle_status ladle_conv_create(const ladle_conv_desc *d, const int64_t x_shape[],
                               ladle_dtype dtype, uint64_t seed, ladle_op **out)
{
    ladle_status st = LADLE_OK;
    ladle_op *op = NULL;
    conv *v = NULL;
    int64_t ys[5], ws[5];
    LADLE_NOT_NULL(d);
    LADLE_NOT_NULL(out);
    LADLE_CHECK(d->nd >= 1 && d->nd <= 3, LADLE_ERR_ARG, "%d spatial dimensions (1 to 3)",
                d->nd);
    LADLE_CALL(ladle__layer_check_args(__func__, dtype, 2 + d->nd, x_shape, 3));
    v = ladle__calloc(1, sizeof *v);
    LADLE_CHECK(v != NULL, LADLE_ERR_ALLOC, "out of memory");
    LADLE_CALL(plan(d, x_shape, v));
    ys[0] = x_shape[0];
    ys[1] = v->co;
    ws[0] = v->co;
    ws[1] = v->cg;
    for (int i = 0; i < d->nd; i++) {
        ys[2 + i] = v->out[3 - d->nd + i];
        ws[2 + i] = d->kernel[i];
    }
    int64_t numel;
    /* the whole batch's y */
    LADLE_CALL(ladle__check_shape(__func__, 2 + d->nd, ys, &numel));
    size_t es = ladle_dtype_size(dtype);
    const ladle_backend *be = ladle__backend(LADLE_CPU);
    /* the wide path's column and matrix buffers (B q columns) also serve
     * the backward, which takes the im2col path (B P <= B q columns) */
    if (v->wide)
        LADLE_CALL(ladle__conv_wide_alloc(v, be, es));
    else if (!v->pointwise)
        LADLE_CALL(ladle__conv_buffer(be, v->kk, v->batch_per_gemm * v->pout, es,
                                      "column buffer", &v->col));
    if (!v->pointwise && v->in[0] == 1 && v->k[0] == 1 && v->s[2] == 1) /* plane_cols */
        LADLE_CALL(
            ladle__conv_buffer(be, 2 * v->hp, v->wp, es, "padded planes", &v->plane));
    if (v->batch_per_gemm > 1 && !v->wide)
        LADLE_CALL(ladle__conv_buffer(be, v->cog, v->batch_per_gemm * v->pout, es,
                                      "output matrix", &v->mat));
    LADLE_CALL(ladle__layer_new(&conv_vt, dtype, 2 + d->nd, x_shape, 2 + d->nd, ys, 1, &op));
    op->impl = v;
    v = NULL;
    op->weighted = 1;
    op->linear = !d->bias;
    op->fan_in = (double)(((conv *)op->impl)->kk);
    op->fan_out = (double)(((conv *)op->impl)->co * ((conv *)op->impl)->kvol);
    LADLE_CALL(ladle__layer_add_param(op, "weight", 2 + d->nd, ws, NULL));
    if (d->bias)
        LADLE_CALL(ladle__layer_add_param(op, "bias", 1, &ys[1], NULL));
    LADLE_CALL(ladle_layer_init(op, LADLE_INIT_DEFAULT, seed));
    *out = op;
    return LADLE_OK;
fail:
    if (v != NULL) {
        const ladle_backend *be = ladle__backend(LADLE_CPU);
        be->fn->free(be, v->col);
        be->fn->free(be, v->mat);
        be->fn->free(be, v->plane);
        ladle__conv_wide_free(v, be);
        ladle__free(v);
    }
    ladle_op_destroy(&op);
    return st;
}
