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

#include "layers/sequential/conv_impl.h"
#include "layers/sequential/layer_impl.h"

/* GEMMs aim for at least this many columns; the column buffer stays below
 * COL_BUDGET elements. Measured (bench_layers): batching more images than
 * 256 columns need only grows the column buffer out of L2 and adds the
 * shuffles between the matrix and the tensors; an image of 256 outputs or
 * more goes alone, straight to and from the tensors. */
#define TARGET_COLUMNS 256
#define COL_BUDGET (4 << 20)
/* On a device whose calls are queued (a GPU), every call is a kernel
 * launch of a few microseconds whatever its size, and a GEMM of one image
 * (6 x 576 x 25 for LeNet-5's first layer) leaves all but a few of the
 * multiprocessors idle: measured on an H200, that layer's forward and
 * backward at batch 256 took 11.2 ms one image per GEMM, 115x cuBLAS's
 * GEMMs of the same flops. There GEMMs take images up to this many
 * columns, the column buffer up to this many elements (64 MiB in f32). */
#define QUEUED_TARGET_COLUMNS 65536
#define QUEUED_COL_BUDGET (16 << 20)

/* The first of image n's channels of group g in a tensor of c channels of
 * per positions each. */
static char *image(const ladle_op *op, const void *t, int64_t c, int64_t per, int64_t n,
                   int64_t g, int64_t per_group)
{
    return (char *)t + (size_t)((n * c + g * per_group) * per) * ladle_dtype_size(op->dtype);
}

/* Copy between the planned Co_g x B*P matrix and images n0.. of a tensor
 * of Co channels (to_tensor: matrix -> tensor). */
static ladle_status shuffle(const ladle_op *op, void *t, int64_t n0, int64_t nb, int64_t g,
                            int to_tensor)
{
    const conv *v = op->impl;
    size_t es = ladle_dtype_size(op->dtype);
    int64_t ext[3] = {v->cog, nb, v->pout};
    int64_t mstr[3] = {v->ldcol, v->pout, 1};
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

/* Where the B images' columns come from: the column buffer, filled by
 * im2col, or (pointwise, B = 1) the image itself. */
static ladle_status col_source(const ladle_op *op, const void *x, int64_t n, int64_t g,
                               int64_t nb, const void **out)
{
    const conv *v = op->impl;
    const char *img = image(op, x, v->c, v->pin, n, g, v->cg);
    if (v->pointwise) {
        *out = img;
        return LADLE_OK;
    }
    *out = v->col;
    return op->be->fn->conv_im2col(op->be, op->dtype, &v->geom, nb, img, v->c * v->pin,
                                   v->col, v->ldcol, v->plane);
}

/*
 * The direct path: the backend's conv_direct slots compute the forward and
 * the weight gradient from padded planes with no column matrix, for the
 * geometries where its plan says that is faster (on the CPU: few taps, a
 * network's first layer, where im2col's GEMMs are too thin to run near
 * the peak and the columns are K times the image; small planes with few
 * output channels and many taps). The backward of dx takes the
 * conv_direct_backward slot where the plan says (the second kind), else
 * im2col.
 */
static ladle_status direct_plan(conv *v, const ladle_backend *be, ladle_dtype dtype)
{
    ladle_status st = LADLE_OK;
    int64_t scratch = 0, sums = 0;
    size_t es = ladle_dtype_size(dtype);
    v->direct_fwd = v->direct_wgt = v->direct_bwd = 0;
    if (be->fn->conv_direct_plan == NULL || v->pointwise)
        return LADLE_OK;
    LADLE_CALL(be->fn->conv_direct_plan(be, dtype, &v->geom, &v->direct_fwd, &v->direct_wgt,
                                        &v->direct_bwd, &scratch, &sums));
    if (be->fn->conv_direct_backward == NULL)
        v->direct_bwd = 0;
    if (scratch > 0)
        LADLE_CALL(ladle__conv_buffer(be, scratch, 1, es, "direct scratch", &v->dpad));
    if (sums > 0)
        LADLE_CALL(ladle__conv_buffer(be, sums, 1, sizeof(double), "direct sums",
                                      (void **)&v->dws));
fail:
    return st;
}

static ladle_status direct_forward(const ladle_op *op, const void *x, void *y, int64_t n)
{
    ladle_status st = LADLE_OK;
    const conv *v = op->impl;
    size_t es = ladle_dtype_size(op->dtype);
    for (int64_t g = 0; g < v->g; g++) {
        const char *b = op->nparams > 1
                            ? (const char *)op->params[1]->data + (size_t)(g * v->cog) * es
                            : NULL;
        LADLE_CALL(op->be->fn->conv_direct_forward(
            op->be, op->dtype, &v->geom, n, image(op, x, v->c, v->pin, 0, g, v->cg),
            v->c * v->pin, weight(op, g), b, v->dpad,
            image(op, y, v->co, v->pout, 0, g, v->cog), v->co * v->pout, v->direct_fwd));
    }
fail:
    return st;
}

static ladle_status direct_backward_weight(const ladle_op *op, const void *x,
                                           const void *dy, int64_t n)
{
    ladle_status st = LADLE_OK;
    const conv *v = op->impl;
    for (int64_t g = 0; g < v->g; g++) {
        LADLE_CALL(op->be->fn->conv_direct_weight(
            op->be, op->dtype, &v->geom, n, image(op, x, v->c, v->pin, 0, g, v->cg),
            v->c * v->pin, image(op, dy, v->co, v->pout, 0, g, v->cog), v->co * v->pout,
            v->dpad, v->dws, wgrad(op, g), v->direct_wgt));
        LADLE_CALL(ladle__conv_bias_chunk(op, 1, dy, 0, n, g));
    }
fail:
    return st;
}

static ladle_status conv_forward(ladle_op *op, ladle_ctx *ctx, const ladle_tensor *x,
                                 ladle_tensor *y, int64_t n)
{
    ladle_status st = LADLE_OK;
    const conv *v = op->impl;
    size_t es = ladle_dtype_size(op->dtype);
    const void *xd = x->data;
    if (v->padded) { /* the ctx keeps the padded x for the weight gradient */
        void *xp = ctx != NULL ? ctx->buf : v->xpin;
        LADLE_CALL(ladle__conv_pad_in(op, x->data, n, xp));
        xd = xp;
    }
    if (v->direct_fwd) /* the bias too */
        return direct_forward(op, xd, y->data, n);
    if (v->wide)
        LADLE_CALL(ladle__conv_wide_forward(op, xd, y->data, n));
    else
        for (int64_t n0 = 0; n0 < n; n0 += v->batch_per_gemm) {
            int64_t nb = n - n0 < v->batch_per_gemm ? n - n0 : v->batch_per_gemm;
            for (int64_t g = 0; g < v->g; g++) {
                const void *col;
                LADLE_CALL(col_source(op, xd, n0, g, nb, &col));
                int64_t ldb = v->pointwise ? v->pout : v->ldcol;
                if (nb == 1 && v->batch_per_gemm == 1) { /* straight into y */
                    char *out = (char *)y->data +
                                (size_t)((n0 * v->co + g * v->cog) * v->pout) * es;
                    LADLE_CALL(op->be->fn->gemm(op->be, op->dtype, 0, 0, v->cog, v->pout, v->kk,
                                                1.0, weight(op, g), v->kk, col, ldb, 0.0, out,
                                                v->pout));
                } else {
                    int64_t ldm = v->ldcol;
                    LADLE_CALL(op->be->fn->gemm(op->be, op->dtype, 0, 0, v->cog, nb * v->pout,
                                                v->kk, 1.0, weight(op, g), v->kk, col, ldb, 0.0,
                                                v->mat, ldm));
                    LADLE_CALL(shuffle(op, y->data, n0, nb, g, 1));
                }
                LADLE_CALL(ladle__conv_bias_chunk(op, 0, y->data, n0, nb, g));
            }
        }
    if (op->nparams > 1 && !op->be->host_access)
        LADLE_CALL(op->be->fn->bias_add(op->be, op->dtype, n, v->co, v->pout,
                                        op->params[1]->data, y->data));
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
    *ld = v->ldcol;
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
    /* with explicit padding the columns fold into the padded gradient */
    void *dxd = v->padded ? v->gpad : dx->data;
    if (v->direct_bwd) {
        for (int64_t g = 0; g < v->g; g++)
            LADLE_CALL(op->be->fn->conv_direct_backward(
                op->be, op->dtype, &v->geom, n,
                image(op, dy->data, v->co, v->pout, 0, g, v->cog), v->co * v->pout,
                weight(op, g), v->dpad, image(op, dxd, v->c, v->pin, 0, g, v->cg),
                v->c * v->pin, v->direct_bwd));
        if (v->padded)
            LADLE_CALL(ladle__conv_pad_out(op, v->gpad, dx->data, n));
        return LADLE_OK;
    }
    if (!v->pointwise)
        LADLE_CALL(op->be->fn->fill(op->be, op->dtype, n * v->c * v->pin, 0.0, dxd));
    for (int64_t n0 = 0; n0 < n; n0 += v->batch_per_gemm) {
        int64_t nb = n - n0 < v->batch_per_gemm ? n - n0 : v->batch_per_gemm, ld;
        for (int64_t g = 0; g < v->g; g++) {
            const void *dym = dy_matrix(op, dy->data, n0, nb, g, &ld, &st);
            LADLE_CALL(st);
            if (v->pointwise) { /* colgrad is dx itself */
                char *out = (char *)dxd + (size_t)((n0 * v->c + g * v->cg) * v->pin) * es;
                LADLE_CALL(op->be->fn->gemm(op->be, op->dtype, 1, 0, v->kk, v->pout, v->cog, 1.0,
                                            weight(op, g), v->kk, dym, ld, 0.0, out, v->pout));
                continue;
            }
            int64_t ldc = v->ldcol;
            LADLE_CALL(op->be->fn->gemm(op->be, op->dtype, 1, 0, v->kk, nb * v->pout, v->cog, 1.0,
                                        weight(op, g), v->kk, dym, ld, 0.0, v->col, ldc));
            LADLE_CALL(op->be->fn->conv_col2im(op->be, op->dtype, &v->geom, nb, v->col, ldc,
                                               image(op, dxd, v->c, v->pin, n0, g, v->cg),
                                               v->c * v->pin, v->plane));
        }
    }
    if (v->padded)
        LADLE_CALL(ladle__conv_pad_out(op, v->gpad, dx->data, n));
fail:
    return st;
}

static ladle_status conv_backward_weight(ladle_op *op, ladle_ctx *ctx, const ladle_tensor *dy,
                                         int64_t n)
{
    ladle_status st = LADLE_OK;
    const conv *v = op->impl;
    const void *xd = v->padded ? ctx->buf : ctx->x->data;
    if (v->direct_wgt)
        LADLE_CALL(direct_backward_weight(op, xd, dy->data, n));
    else if (v->wide)
        LADLE_CALL(ladle__conv_wide_backward_weight(op, xd, dy->data, n));
    else
        for (int64_t n0 = 0; n0 < n; n0 += v->batch_per_gemm) {
            int64_t nb = n - n0 < v->batch_per_gemm ? n - n0 : v->batch_per_gemm, ld;
            for (int64_t g = 0; g < v->g; g++) {
                const void *col;
                LADLE_CALL(col_source(op, xd, n0, g, nb, &col));
                int64_t ldb = v->pointwise ? v->pout : v->ldcol;
                const void *dym = dy_matrix(op, dy->data, n0, nb, g, &ld, &st);
                LADLE_CALL(st);
                LADLE_CALL(op->be->fn->gemm(op->be, op->dtype, 0, 1, v->cog, v->kk, nb * v->pout,
                                            1.0, dym, ld, col, ldb, 1.0, wgrad(op, g), v->kk));
                LADLE_CALL(ladle__conv_bias_chunk(op, 1, dy->data, n0, nb, g));
            }
        }
    if (op->nparams > 1 && !op->be->host_access)
        LADLE_CALL(op->be->fn->bias_grad(op->be, op->dtype, n, v->co, v->pout, dy->data,
                                         op->grads[1]->data));
fail:
    return st;
}

/* The device buffers of a conv (the wide-row path's too). */
static const ladle__part conv_parts[] = {
    LADLE__PART_DEVICE(conv, col),   LADLE__PART_DEVICE(conv, mat),
    LADLE__PART_DEVICE(conv, plane), LADLE__PART_DEVICE(conv, xpin),
    LADLE__PART_DEVICE(conv, gpad),  LADLE__PART_DEVICE(conv, dpad),
    LADLE__PART_DEVICE(conv, dws),   LADLE__PART_DEVICE(conv, dyw),
    LADLE__PART_DEVICE(conv, dwt),   LADLE__PART_DEVICE(conv, xpad), LADLE__PARTS_END};

static void conv_destroy(ladle_op *op) { ladle__parts_free(op->impl, conv_parts, op->be); }

static const ladle_op_vtable conv_vt = {
    .kind = LADLE_OP_CONV,
    .name = "conv",
    .destroy = conv_destroy,
    .layer_forward = conv_forward,
    .layer_backward = conv_backward,
    .layer_backward_weight = conv_backward_weight,
};

void ladle_conv_desc_init(ladle_conv_desc *d, int nd, int64_t in_channels, int64_t out_channels,
                          int64_t kernel)
{
    if (LADLE_DESC_START(d))
        LADLE__CONV_DESC_DEFAULTS(d, nd, in_channels, out_channels, kernel);
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

/* How the GEMMs take the images: in place (pointwise), by the wide path or
 * by columns, and how many images (of a batch of n) one GEMM takes. */
static ladle_status plan_gemm(conv *v, int64_t n, int queued, const char *f)
{
    /* a 1x1 convolution multiplies the images in place, one GEMM each: on
     * a queued device it takes the batched column path instead, a copy of
     * the images for one GEMM of many */
    v->pointwise = !queued && v->kvol == 1 && v->s[0] * v->s[1] * v->s[2] == 1 &&
                   v->p[0] + v->p[1] + v->p[2] == 0;
    v->hp = v->in[1] + 2 * v->p[1]; /* the padded planes of plane_cols and conv_wide.c */
    v->wp = v->in[2] + 2 * v->p[2];
    v->wide = ladle__conv_wide_plan(v);
    int64_t per = v->wide ? v->q : v->pout;
    int64_t target = queued    ? QUEUED_TARGET_COLUMNS
                     : v->wide ? LADLE_CONV_WIDE_COLUMNS
                               : TARGET_COLUMNS;
    int64_t budget = queued ? QUEUED_COL_BUDGET : COL_BUDGET;
    int64_t b = per >= target || v->pointwise ? 1 : (target + per - 1) / per;
    if (b > n)
        b = n;
    /* kk, b and per are below 2^31 each: kk * b * per fits */
    while (b > 1 && v->kk * b * per > budget)
        b--;
    v->batch_per_gemm = b < 1 ? 1 : b;
    /* A row stride of a multiple of 1 KiB (f32) puts the rows the GEMM
     * packs side by side in a few of the L1 cache's sets, which then
     * evict each other: the weight gradient of 32 x 32 channels k3 on a
     * 64 x 128 plane (B P = 8192) took 1.46x the time of the same on 63 x
     * 128 rows. 16 elements more shift each row by a cache line or two. */
    v->ldcol = v->batch_per_gemm * v->pout;
    if (v->ldcol % 256 == 0)
        v->ldcol += 16;
    if (v->ldcol > INT32_MAX)
        return ladle__raise(LADLE_ERR_SHAPE, f, "matrices above 2^31 rows or columns");
    return LADLE_OK;
}

/* Check the description against x's shape and fill the geometry; queued:
 * the device queues its calls (the GEMMs' batching above). */
static ladle_status plan(const ladle_conv_desc *d, const int64_t *xs, int queued, conv *v)
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
    if ((st = plan_gemm(v, xs[0], queued, f)) != LADLE_OK)
        return st;
    v->geom.cg = v->cg;
    v->geom.cog = v->cog;
    for (int i = 0; i < 3; i++) {
        v->geom.in[i] = v->in[i];
        v->geom.out[i] = v->out[i];
        v->geom.k[i] = v->k[i];
        v->geom.s[i] = v->s[i];
        v->geom.p[i] = v->p[i];
        v->geom.d[i] = v->d[i];
    }
    return LADLE_OK;
}

/* The device buffers the plan asks for (xn: the padded x's batch). */
static ladle_status allocate(conv *v, const ladle_backend *be, ladle_dtype dtype, int64_t xn)
{
    ladle_status st = LADLE_OK;
    size_t es = ladle_dtype_size(dtype);
    /* the wide path's column and matrix buffers (B q columns) also serve
     * the backward, which takes the im2col path (B P <= B q columns) */
    if (v->wide)
        LADLE_CALL(ladle__conv_wide_alloc(v, be, es));
    else if (!v->pointwise)
        LADLE_CALL(ladle__conv_buffer(be, v->kk, v->ldcol, es, "column buffer", &v->col));
    if (!v->pointwise && v->in[0] == 1 && v->k[0] == 1 && v->s[2] == 1) /* plane_cols */
        LADLE_CALL(
            ladle__conv_buffer(be, 2 * v->hp, v->wp, es, "padded planes", &v->plane));
    if (v->batch_per_gemm > 1 && !v->wide)
        LADLE_CALL(ladle__conv_buffer(be, v->cog, v->ldcol, es, "output matrix", &v->mat));
    LADLE_CALL(direct_plan(v, be, dtype));
    if (v->padded) {
        LADLE_CALL(ladle__conv_buffer(be, xn * v->c, v->pin, es, "padded x", &v->xpin));
        LADLE_CALL(ladle__conv_buffer(be, xn * v->c, v->pin, es, "padded dx", &v->gpad));
    }
fail:
    return st;
}

ladle_status ladle_conv_create(const ladle_conv_desc *d, const int64_t x_shape[],
                               ladle_dtype dtype, ladle_device device, uint64_t seed,
                               ladle_op **out)
{
    ladle_status st = LADLE_OK;
    ladle_op *op = NULL;
    conv *v = NULL;
    ladle_conv_desc inner;
    int64_t ys[5], ws[5], xps[5];
    LADLE__CHECK_DESC(d);
    LADLE_NOT_NULL(out);
    LADLE_CALL(ladle__window_layer_check(d->nd, d->flags, dtype, x_shape, __func__));
    v = ladle__calloc(1, sizeof *v);
    LADLE_CHECK(v != NULL, LADLE_ERR_ALLOC, "out of memory");
    LADLE_CALL(ladle__conv_pad_plan(d, x_shape, v, &inner, xps));
    const ladle_backend *be = NULL;
    LADLE_CALL(ladle__backend_get(device, __func__, &be));
    LADLE_CALL(plan(&inner, xps, be->async, v));
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
    LADLE_CALL(allocate(v, be, dtype, xps[0]));
    LADLE_CALL(ladle__layer_new(&conv_vt, dtype, device, 2 + d->nd, x_shape, 2 + d->nd, ys, 1, &op,
                                __func__));
    op->impl = v;
    if (v->padded) /* the padded x the weight gradient reads */
        op->ctx_bytes = (size_t)(xps[0] * v->c * v->pin) * es;
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
    /* no backend: nothing was allocated on the device */
    ladle__parts_free(v, conv_parts, ladle__backend(device));
    ladle_op_destroy(&op);
    return st;
}

/* deprecated (include/ladle/deprecated.h): the options are the desc's */
void ladle_conv_opts_init(ladle_conv_opts *o)
{
    if (o == NULL)
        return;
    memset(o, 0, sizeof *o);
    o->size = sizeof *o;
    o->padding_mode = LADLE_PAD_ZEROS;
}

ladle_status ladle__conv_fold_opts(const ladle_conv_desc *d, const ladle_conv_opts *o,
                                   const char *f, ladle_conv_desc *out)
{
    if (d == NULL)
        return ladle__raise(LADLE_ERR_NULL, f, "d is NULL");
    if (d->size < sizeof *d)
        return ladle__check_size(f, "d", d->size, sizeof *d);
    *out = *d;
    if (o == NULL)
        return LADLE_OK;
    if (o->size != sizeof *o)
        return ladle__raise(
            LADLE_ERR_ARG, f,
            "the options' size is %zu, this ladle's ladle_conv_opts is %zu (set "
            "it with ladle_conv_opts_init)",
            o->size, sizeof *o);
    out->padding_mode = o->padding_mode;
    out->same = o->same;
    return LADLE_OK;
}

ladle_status ladle_conv_create_ex(const ladle_conv_desc *d, const ladle_conv_opts *o,
                                  const int64_t x_shape[], ladle_dtype dtype,
                                  ladle_device device, uint64_t seed, ladle_op **out)
{
    ladle_conv_desc full;
    ladle_status st = ladle__conv_fold_opts(d, o, __func__, &full);
    return st != LADLE_OK ? st
                          : ladle_conv_create(&full, x_shape, dtype, device, seed, out);
}
