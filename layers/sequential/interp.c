/*
 * Interpolation (upsampling) by nearest or (bi, tri)linear taps over 1 to 3
 * spatial dimensions (lower ones are 3-D with unit extents), the source
 * coordinates as PyTorch's interpolate defines them (see ladle/layers.h).
 * The layer checks the sizes and works out each dimension's ratio; the
 * kernels are the backend's interp slots. Linear in x: the backward is the
 * adjoint, and no ctx is needed.
 */
#include <string.h>

#include "layers/sequential/interp_impl.h"
#include "layers/sequential/layer_impl.h"
#include "layers/sequential/planes_impl.h"

void ladle_interp_desc_init(ladle_interp_desc *d, ladle_interp_mode mode, int nd, int64_t scale)
{
    if (!LADLE_DESC_START(d))
        return;
    d->mode = mode;
    d->nd = nd;
    for (int i = 0; i < 3; i++)
        d->scale[i] = scale;
}

/* An extent per dimension: 2^31 keeps o in, the nearest tap's product,
 * below 2^62. */
#define INTERP_MAX_EXTENT ((int64_t)1 << 31)

/* The descriptor's own values (everything but x's shape). */
static ladle_status check_desc(const ladle_interp_desc *d, const char *f)
{
    if (d->mode != LADLE_INTERP_NEAREST && d->mode != LADLE_INTERP_LINEAR)
        return ladle__raise(LADLE_ERR_ARG, f, "unknown interpolation mode %d", (int)d->mode);
    if (d->nd < 1 || d->nd > 3)
        return ladle__raise(LADLE_ERR_ARG, f, "%d spatial dimensions (1 to 3)", d->nd);
    if (d->flags & ~(unsigned)LADLE_CHECKED)
        return ladle__raise(LADLE_ERR_ARG, f, "unknown flags 0x%x", d->flags);
    if (d->align_corners != 0 && d->align_corners != 1)
        return ladle__raise(LADLE_ERR_ARG, f, "align_corners %d is not 0 or 1",
                            d->align_corners);
    if (d->align_corners && d->mode == LADLE_INTERP_NEAREST)
        return ladle__raise(LADLE_ERR_ARG, f, "align_corners is linear interpolation's");
    for (int i = 0; i < d->nd; i++) {
        if (d->out_size[i] < 0 || d->out_size[i] > INTERP_MAX_EXTENT)
            return ladle__raise(LADLE_ERR_ARG, f, "output size %lld of spatial dimension %d "
                                "is outside 0 .. 2^31", (long long)d->out_size[i], i);
        if (d->out_size[i] == 0 && (d->scale[i] < 1 || d->scale[i] > INTERP_MAX_EXTENT))
            return ladle__raise(LADLE_ERR_ARG, f, "scale %lld of spatial dimension %d is "
                                "outside 1 .. 2^31", (long long)d->scale[i], i);
    }
    return LADLE_OK;
}

/* The geometry from the descriptor and x's shape; ys gets y's shape. */
static ladle_status plan(const ladle_interp_desc *d, const int64_t *xs, ladle_interp_geom *g,
                         int64_t *ys, const char *f)
{
    memset(g, 0, sizeof *g);
    g->linear = d->mode == LADLE_INTERP_LINEAR;
    g->align_corners = d->align_corners;
    ys[0] = xs[0];
    ys[1] = xs[1];
    for (int a = 0; a < 3; a++) {
        int s = a - (3 - d->nd);
        int64_t in = s < 0 ? 1 : xs[2 + s];
        if (in < 1 || in > INTERP_MAX_EXTENT)
            return ladle__raise(LADLE_ERR_SHAPE, f, "spatial extent %lld of dimension %d is "
                                "outside 1 .. 2^31", (long long)in, s);
        int64_t out = s < 0 ? 1 : d->out_size[s] ? d->out_size[s] : in * d->scale[s];
        if (out < 1 || out > INTERP_MAX_EXTENT)
            return ladle__raise(LADLE_ERR_SHAPE, f, "output extent %lld of spatial dimension "
                                "%d is outside 1 .. 2^31", (long long)out, s);
        g->in[a] = g->x_n[a] = in;
        g->out[a] = g->y_n[a] = out; /* the whole of both, offsets 0 */
        if (d->align_corners)
            g->ratio[a] = out > 1 ? (double)(in - 1) / (double)(out - 1) : 0.0;
        else
            g->ratio[a] = (double)in / (double)out;
        if (s >= 0)
            ys[2 + s] = out;
    }
    int64_t numel;
    return ladle__check_shape(f, 2 + d->nd, ys, &numel);
}

ladle_status ladle__interp_plan(const ladle_interp_desc *d, const int64_t *x_shape,
                                ladle_dtype dtype, ladle_interp_geom *g, int64_t *y_shape,
                                const char *func)
{
    ladle_status st = LADLE_OK;
    LADLE_CALL(ladle__check_size(func, "d", d->size, sizeof *d));
    LADLE_CALL(check_desc(d, func));
    LADLE_CALL(ladle__layer_check_args(func, dtype, 2 + d->nd, x_shape, 3));
    LADLE_CALL(plan(d, x_shape, g, y_shape, func));
fail:
    return st;
}

ladle_status ladle_interp_create(const ladle_interp_desc *d, const int64_t x_shape[],
                                 ladle_dtype dtype, ladle_device device, ladle_op **out)
{
    ladle_status st = LADLE_OK;
    ladle__planes p = {.kind = LADLE__PLANES_INTERP};
    int64_t ys[5];
    LADLE_NOT_NULL(d);
    LADLE_NOT_NULL(x_shape);
    LADLE_NOT_NULL(out);
    LADLE_CALL(ladle__interp_plan(d, x_shape, dtype, &p.g.interp, ys, __func__));
    st = ladle__planes_layer(&p, dtype, device, 2 + d->nd, x_shape, ys, out, __func__);
fail:
    return st;
}
