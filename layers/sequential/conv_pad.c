/*
 * The convolution's padding options (ladle_conv_desc's padding_mode and
 * same): padding modes other
 * than zeros and the uneven padding of 'same'. Such a layer is
 *
 *   y = C Pad x,     dx = Pad* C* dy,     dW += (dy, Pad x)
 *
 * with C the convolution without padding on the padded extents and Pad the
 * padding (pad_impl.h): a copy of x into the middle of the padded buffer and
 * the padding cells filled by box copies. Pad is linear, so the layer stays
 * linear in x without a bias.
 */
#include <stdio.h>
#include <string.h>

#include "layers/sequential/conv_impl.h"

ladle_status ladle__conv_padding(const ladle_conv_desc *d, const char *f, int64_t lo[3],
                                 int64_t hi[3])
{
    ladle_status st = LADLE_OK;
    for (int i = 0; i < 3; i++)
        lo[i] = hi[i] = i < d->nd ? d->padding[i] : 0;
    LADLE_CHECK(ladle__pad_name(d->padding_mode) != NULL, LADLE_ERR_ARG,
                "unknown padding mode %d (zeros, reflect, replicate, circular)",
                (int)d->padding_mode);
    if (!d->same)
        return LADLE_OK;
    for (int i = 0; i < d->nd; i++) {
        LADLE_CHECK(d->stride[i] == 1, LADLE_ERR_ARG,
                    "padding 'same' needs stride 1 (spatial dimension %d has %lld)", i,
                    (long long)d->stride[i]);
        LADLE_CHECK(d->padding[i] == 0, LADLE_ERR_ARG,
                    "padding 'same' replaces the padding, which must be 0 (spatial dimension "
                    "%d has %lld)", i, (long long)d->padding[i]);
        LADLE_CHECK(d->kernel[i] >= 1 && d->dilation[i] >= 1 &&
                        d->kernel[i] - 1 <= LADLE_MAX_ELEMS / d->dilation[i],
                    LADLE_ERR_ARG, "spatial dimension %d: kernel %lld, dilation %lld", i,
                    (long long)d->kernel[i], (long long)d->dilation[i]);
        int64_t total = d->dilation[i] * (d->kernel[i] - 1);
        lo[i] = total / 2;
        hi[i] = total - lo[i];
    }
fail:
    return st;
}

ladle_status ladle__conv_pad_plan(const ladle_conv_desc *d, const int64_t *xs, conv *v,
                                  ladle_conv_desc *inner, int64_t *xps)
{
    const char *f = "ladle_conv_create";
    int64_t lo[3], hi[3];
    ladle_status st = ladle__conv_padding(d, f, lo, hi);
    if (st != LADLE_OK)
        return st;
    ladle_padding_mode mode = d->padding_mode;
    int uneven = 0;
    *inner = *d;
    v->ndim = 2 + d->nd;
    for (int i = 0; i < v->ndim; i++) {
        xps[i] = xs[i];
        v->pd[i] = (ladle__pad_dim){0, xs[i], 0, 0};
    }
    for (int i = 0; i < d->nd; i++) {
        uneven |= lo[i] != hi[i];
        if (!ladle__pad_fits(mode, lo[i], hi[i], xs[2 + i]))
            return ladle__raise(LADLE_ERR_ARG, f,
                                "%s padding of %lld and %lld cells does not fit spatial "
                                "dimension %d of extent %lld (reflect: below the extent; "
                                "circular: at most the extent)",
                                ladle__pad_name(mode), (long long)lo[i], (long long)hi[i], i,
                                (long long)xs[2 + i]);
        inner->padding[i] = lo[i];
    }
    if (mode == LADLE_PAD_ZEROS && !uneven)
        return LADLE_OK;
    v->padded = 1;
    v->mode = mode;
    for (int i = 0; i < d->nd; i++) {
        /* the padding is at most 2^57 (checked above or by 'same'), the extent too */
        if (xs[2 + i] > LADLE_MAX_ELEMS - lo[i] - hi[i])
            return ladle__raise(LADLE_ERR_ARG, f, "the padded extent of spatial dimension %d "
                                "is above 2^57", i);
        xps[2 + i] = xs[2 + i] + lo[i] + hi[i];
        inner->padding[i] = 0;
        v->pd[2 + i] = (ladle__pad_dim){-lo[i], xs[2 + i], lo[i], hi[i]};
    }
    for (int i = 0; i < v->ndim; i++)
        v->pshape[i] = xps[i];
    return LADLE_OK;
}

/* The padded and the unpadded shapes of n images, their strides and the
 * offset of x's first cell in the padded buffer. */
typedef struct boxes {
    int64_t ps[5], ext[5], pstr[5], xstr[5];
    size_t off; /* bytes */
} boxes;

static void plan_boxes(const ladle_op *op, int64_t n, boxes *b)
{
    const conv *v = op->impl;
    int64_t sx = 1, sp = 1, off = 0;
    for (int i = v->ndim - 1; i >= 0; i--) {
        b->ps[i] = i == 0 ? n : v->pshape[i];
        b->ext[i] = i == 0 ? n : v->pd[i].n;
        b->xstr[i] = sx;
        b->pstr[i] = sp;
        sx *= b->ext[i];
        sp *= b->ps[i];
        off += v->pd[i].lo * b->pstr[i];
    }
    b->off = (size_t)off * ladle_dtype_size(op->dtype);
}

ladle_status ladle__conv_pad_in(const ladle_op *op, const void *x, int64_t n, void *xp)
{
    const conv *v = op->impl;
    boxes b;
    plan_boxes(op, n, &b);
    ladle_status st = op->be->fn->copy_box(op->be, op->dtype, LADLE_BOX_COPY, v->ndim, b.ext, x,
                                           b.xstr, (char *)xp + b.off, b.pstr);
    if (st != LADLE_OK)
        return st;
    return ladle__pad_fill(op->be, op->dtype, v->mode, v->ndim, b.ps, v->pd, xp, 0);
}

ladle_status ladle__conv_pad_out(const ladle_op *op, void *gp, void *dx, int64_t n)
{
    const conv *v = op->impl;
    boxes b;
    plan_boxes(op, n, &b);
    ladle_status st = ladle__pad_fill(op->be, op->dtype, v->mode, v->ndim, b.ps, v->pd, gp, 1);
    if (st != LADLE_OK)
        return st;
    return op->be->fn->copy_box(op->be, op->dtype, LADLE_BOX_COPY, v->ndim, b.ext,
                                (char *)gp + b.off, b.pstr, dx, b.xstr);
}
