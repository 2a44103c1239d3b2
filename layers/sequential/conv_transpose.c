/*
 * Transposed convolution 1-3d: the convolution's adjoint as a layer. With C
 * the convolution from C_out to C_in channels over y's extents O (same
 * kernel, stride, padding, dilation and groups, and the same weight, whose
 * layout C_in x C_out/groups x K... is that convolution's C_out x
 * C_in/groups x K...):
 *
 *   forward          y   = C* x (+ bias)      C's input gradient of dy = x
 *   backward         dx  = C dy               C's forward of dy
 *   backward_weight  dW += C's weight gradient at input dy and output
 *                          gradient x;  db = sums of dy
 *
 * With O = (S - 1) s - 2p + d (K - 1) + a + 1 and the output padding a
 * below the stride, C maps O back onto x's extents:
 * floor((O + 2p - d (K - 1) - 1) / s) + 1 = S. With a at least the stride
 * (PyTorch allows it below the dilation) C's output is S + floor(a / s)
 * long, and the layer is C* E with E the zero extension of x at the far
 * ends (its adjoint the cut back). The layer owns its weight and bias;
 * the convolution's weight and gradient are bound to them.
 */
#include <stdio.h>
#include <string.h>

#include "layers/sequential/conv_impl.h"
#include "layers/sequential/conv_transpose_impl.h"
#include "layers/sequential/layer_impl.h"
#include "layers/sequential/pad_impl.h"

typedef struct tconv {
    ladle_op *conv;   /* C, without a bias */
    int64_t co, pout; /* y's channels and positions per channel */
    /* an output padding of at least the stride (below the dilation): C
     * maps y onto more cells than x has, the extra ones at the far ends
     * read by no input. x is zero-extended into xe (whose tail stays 0)
     * and C's output ye cut back to x: box is one image's channels and x's
     * extents, xs and es the strides of x and of xe (and ye) over it */
    int extended;
    int64_t box[4], xs[4], es[4];
    ladle_tensor *xe, *ye;
} tconv;

void ladle_conv_transpose_desc_init(ladle_conv_transpose_desc *d, int nd,
                                    int64_t in_channels, int64_t out_channels,
                                    int64_t kernel)
{
    if (LADLE_DESC_START(d))
        LADLE__CONV_DESC_DEFAULTS(d, nd, in_channels, out_channels, kernel);
}

/* Spatial dimension i's window, and its output extent in *o. */
static ladle_status plan_dim(const ladle_conv_transpose_desc *d, int i, int64_t len,
                             const char *f, ladle_conv_desc *c, int64_t *o)
{
    int64_t k = d->kernel[i], p = d->padding[i], a = d->output_padding[i];
    int64_t s = d->stride[i] ? d->stride[i] : 1, dl = d->dilation[i] ? d->dilation[i] : 1;
    int64_t t1, t2, t3;
    if (k < 1 || s < 1 || dl < 1 || p < 0 || a < 0)
        return ladle__raise(
            LADLE_ERR_ARG, f,
            "spatial dimension %d: kernel %lld, stride %lld and dilation %lld "
            "must be at least 1, padding %lld and output padding %lld at "
            "least 0",
            i, (long long)k, (long long)s, (long long)dl, (long long)p, (long long)a);
    if (a >= s && a >= dl)
        return ladle__raise(LADLE_ERR_ARG, f,
                            "spatial dimension %d: output padding %lld must be below the "
                            "stride %lld or the dilation %lld",
                            i, (long long)a, (long long)s, (long long)dl);
    if (!ladle__mul_ok(len - 1, s, &t1) || !ladle__mul_ok(dl, k - 1, &t2) ||
        !ladle__add_ok(t1, t2, &t3) || !ladle__add_ok(t3, a + 1, &t3) ||
        t3 > LADLE_MAX_ELEMS)
        return ladle__raise(
            LADLE_ERR_ARG, f,
            "spatial dimension %d: the output length overflows (extent %lld, "
            "stride %lld, dilated kernel %lld)",
            i, (long long)len, (long long)s, (long long)k);
    *o = t3 - 2 * p;
    if (*o < 1)
        return ladle__raise(
            LADLE_ERR_SHAPE, f,
            "spatial dimension %d: the output length %lld is below 1 (padding "
            "%lld on both sides of %lld)",
            i, (long long)*o, (long long)p, (long long)t3);
    c->kernel[i] = k;
    c->stride[i] = s;
    c->padding[i] = p;
    c->dilation[i] = dl;
    return LADLE_OK;
}

ladle_status ladle__conv_transpose_plan(const ladle_conv_transpose_desc *d,
                                        const int64_t *xs, unsigned allowed, const char *f,
                                        ladle_conv_desc *conv, int64_t *ys)
{
    ladle_status st = LADLE_OK;
    int64_t g = d->groups ? d->groups : 1;
    if (d->nd < 1 || d->nd > 3)
        return ladle__raise(LADLE_ERR_ARG, f, "%d spatial dimensions (1 to 3)", d->nd);
    if ((d->flags & ~allowed) != 0)
        return ladle__raise(LADLE_ERR_ARG, f, "unknown flags 0x%x", d->flags & ~allowed);
    if ((unsigned)d->padding_mode > LADLE_PAD_CIRCULAR)
        return ladle__raise(LADLE_ERR_ARG, f, "unknown padding mode %d",
                            (int)d->padding_mode);
    if (d->padding_mode != LADLE_PAD_ZEROS)
        return ladle__raise(
            LADLE_ERR_UNSUPPORTED, f,
            "padding mode %s: a transposed convolution pads with zeros only "
            "(as PyTorch's ConvTranspose)",
            ladle__pad_name(d->padding_mode));
    if (d->in_channels < 1 || d->out_channels < 1 || g < 1 || d->in_channels % g ||
        d->out_channels % g)
        return ladle__raise(
            LADLE_ERR_ARG, f,
            "channels %lld -> %lld must be positive multiples of groups %lld",
            (long long)d->in_channels, (long long)d->out_channels, (long long)g);
    if (xs[1] != d->in_channels)
        return ladle__raise(LADLE_ERR_SHAPE, f, "x has %lld channels, the layer %lld",
                            (long long)xs[1], (long long)d->in_channels);
    ladle_conv_desc_init(conv, d->nd, d->out_channels, d->in_channels, 1);
    conv->groups = g;
    conv->bias = 0;
    ys[0] = xs[0];
    ys[1] = d->out_channels;
    for (int i = 0; i < d->nd; i++)
        LADLE_CALL(plan_dim(d, i, xs[2 + i], f, conv, &ys[2 + i]));
fail:
    return st;
}

/* n images of x into xe (to_x 0), or of ye back into x (to_x 1). */
static ladle_status extend_copy(const ladle_op *op, int to_x, const void *src, void *dst,
                                int64_t n)
{
    const tconv *v = op->impl;
    int64_t ext[4] = {n * v->box[0], v->box[1], v->box[2], v->box[3]};
    return op->be->fn->copy_box(op->be, op->dtype, LADLE_BOX_COPY, 4, ext, src,
                                to_x ? v->es : v->xs, dst, to_x ? v->xs : v->es);
}

static ladle_status tc_forward(ladle_op *op, ladle_ctx *ctx, const ladle_tensor *x,
                               ladle_tensor *y, int64_t n)
{
    ladle_status st = LADLE_OK;
    const tconv *v = op->impl;
    (void)ctx;
    if (v->extended) {
        LADLE_CALL(extend_copy(op, 0, x->data, v->xe->data, n));
        x = v->xe;
    }
    LADLE_CALL(v->conv->vt->layer_backward(v->conv, NULL, x, y, n));
    if (op->nparams > 1)
        LADLE_CALL(op->be->fn->bias_add(op->be, op->dtype, n, v->co, v->pout,
                                        op->params[1]->data, y->data));
fail:
    return st;
}

static ladle_status tc_backward(ladle_op *op, ladle_ctx *ctx, const ladle_tensor *dy,
                                ladle_tensor *dx, int64_t n)
{
    ladle_status st = LADLE_OK;
    const tconv *v = op->impl;
    (void)ctx;
    if (dx == NULL)
        return LADLE_OK;
    LADLE_CALL(v->conv->vt->layer_forward(v->conv, NULL, dy, v->extended ? v->ye : dx, n));
    if (v->extended)
        LADLE_CALL(extend_copy(op, 1, v->ye->data, dx->data, n));
fail:
    return st;
}

static ladle_status tc_backward_weight(ladle_op *op, ladle_ctx *ctx, const ladle_tensor *dy,
                                       int64_t n)
{
    ladle_status st = LADLE_OK;
    const tconv *v = op->impl;
    /* C's weight gradient reads only its saved input, here dy: a ctx of C
     * made on the spot holds it (C keeps nothing else for zero padding) */
    ladle_ctx c;
    memset(&c, 0, sizeof c);
    c.op = v->conv;
    c.x = dy;
    c.batch = n;
    c.ready = 1;
    c.training = op->training;
    const ladle_tensor *x = ctx->x;
    if (v->extended) { /* another call may have left another x in xe */
        LADLE_CALL(extend_copy(op, 0, x->data, v->xe->data, n));
        x = v->xe;
    }
    LADLE_CALL(v->conv->vt->layer_backward_weight(v->conv, &c, x, n));
    if (op->nparams > 1)
        LADLE_CALL(op->be->fn->bias_grad(op->be, op->dtype, n, v->co, v->pout, dy->data,
                                         op->grads[1]->data));
fail:
    return st;
}

static const ladle__part tc_parts[] = {LADLE__PART_OP(tconv, conv),
                                       LADLE__PART_TENSOR(tconv, xe),
                                       LADLE__PART_TENSOR(tconv, ye), LADLE__PARTS_END};

static void tc_destroy(ladle_op *op) { ladle__parts_free(op->impl, tc_parts, op->be); }

/* C's weight and gradient follow the layer's to their memory. */
static ladle_status bind_conv(ladle_op *op)
{
    const tconv *v = op->impl;
    return ladle_op_bind_param(v->conv, 0, op->params[0]->data, op->grads[0]->data);
}

static void tc_param_bound(ladle_op *op, int i)
{
    /* the memory passed the same checks for the layer's own tensor */
    if (i == 0)
        (void)bind_conv(op);
}

static const ladle_op_vtable tc_vt = {
    .kind = LADLE_OP_CONV_TRANSPOSE,
    .name = "transposed convolution",
    .destroy = tc_destroy,
    .layer_forward = tc_forward,
    .layer_backward = tc_backward,
    .layer_backward_weight = tc_backward_weight,
    .param_bound = tc_param_bound,
};

/* Whether C's output (its y) has more cells than x, and then the
 * buffers and strides of the extension. */
static ladle_status plan_extension(tconv *v, int nd, const int64_t *xs, ladle_dtype dtype,
                                   ladle_device device)
{
    ladle_status st = LADLE_OK;
    int cn;
    int64_t cs[5], e[4] = {xs[1], 1, 1, 1};
    LADLE_CALL(ladle_op_y_shape(v->conv, &cn, cs));
    v->box[0] = xs[1];
    v->box[1] = v->box[2] = v->box[3] = 1;
    for (int i = 0; i < nd; i++) {
        v->box[4 - nd + i] = xs[2 + i];
        e[4 - nd + i] = cs[2 + i];
        v->extended |= cs[2 + i] != xs[2 + i];
    }
    if (!v->extended)
        return LADLE_OK;
    v->xs[3] = v->es[3] = 1;
    for (int i = 2; i >= 0; i--) {
        v->xs[i] = v->xs[i + 1] * v->box[i + 1];
        v->es[i] = v->es[i + 1] * e[i + 1];
    }
    LADLE_CALL(ladle_tensor_create(dtype, device, cn, cs, &v->xe)); /* zeros */
    LADLE_CALL(ladle_tensor_create(dtype, device, cn, cs, &v->ye));
fail:
    return st;
}

ladle_status ladle_conv_transpose_create(const ladle_conv_transpose_desc *d,
                                         const int64_t x_shape[], ladle_dtype dtype,
                                         ladle_device device, uint64_t seed, ladle_op **out)
{
    ladle_status st = LADLE_OK;
    ladle_op *op = NULL;
    tconv *v = NULL;
    ladle_conv_desc cd;
    int64_t ys[5], ws[5], numel;
    LADLE__CHECK_DESC(d);
    LADLE_NOT_NULL(x_shape);
    LADLE_NOT_NULL(out);
    LADLE_CALL(ladle__window_layer_check(d->nd, 0, dtype, x_shape, __func__));
    LADLE_CALL(ladle__conv_transpose_plan(d, x_shape, LADLE_CHECKED | LADLE_OVERLAP_HALO,
                                          __func__, &cd, ys));
    LADLE_CALL(ladle__check_shape(__func__, 2 + d->nd, ys, &numel));
    v = ladle__calloc(1, sizeof *v);
    LADLE_CHECK(v != NULL, LADLE_ERR_ALLOC, "out of memory");
    LADLE_CALL(ladle_conv_create(&cd, ys, dtype, device, seed, &v->conv));
    LADLE_CALL(plan_extension(v, d->nd, x_shape, dtype, device));
    v->co = ys[1];
    v->pout = 1;
    ws[0] = d->in_channels;
    ws[1] = d->out_channels / cd.groups;
    for (int i = 0; i < d->nd; i++) {
        v->pout *= ys[2 + i];
        ws[2 + i] = d->kernel[i];
    }
    LADLE_CALL(ladle__layer_new(&tc_vt, dtype, device, 2 + d->nd, x_shape, 2 + d->nd, ys, 1,
                                &op, __func__));
    op->impl = v;
    v = NULL;
    op->weighted = 1;
    op->linear = !d->bias;
    /* PyTorch's fans of a weight C_in x C_out/groups x K... */
    op->fan_in = (double)ws[1];
    op->fan_out = (double)ws[0];
    for (int i = 0; i < d->nd; i++) {
        op->fan_in *= (double)ws[2 + i];
        op->fan_out *= (double)ws[2 + i];
    }
    LADLE_CALL(ladle__layer_add_param(op, "weight", 2 + d->nd, ws, NULL));
    if (d->bias)
        LADLE_CALL(ladle__layer_add_param(op, "bias", 1, &ys[1], NULL));
    LADLE_CALL(bind_conv(op));
    LADLE_CALL(ladle_layer_init(op, LADLE_INIT_DEFAULT, seed));
    *out = op;
    return LADLE_OK;
fail:
    ladle__parts_free(v, tc_parts, NULL);
    ladle_op_destroy(&op);
    return st;
}
