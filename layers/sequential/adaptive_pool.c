/*
 * Adaptive average and max pooling to any output size, as PyTorch's
 * AdaptiveAvgPool1d/2d/3d and AdaptiveMaxPool1d/2d/3d (see ladle/layers.h):
 * output o of a dimension reads the inputs [floor(o L / O),
 * ceil((o + 1) L / O)). The layer checks the sizes; the kernels are the
 * backend's adaptive_pool and adaptive_max slots. The average is linear in
 * x (the backward is the adjoint, no ctx needed); the max saves each
 * output's winner in the ctx and routes dy there.
 */
#include <string.h>

#include "layers/sequential/adaptive_impl.h"
#include "layers/sequential/planes_impl.h"

/* An extent per dimension: 2^31 keeps (o + 1) L below 2^62. */
#define ADAPTIVE_MAX_EXTENT ((int64_t)1 << 31)

static ladle_status plan(int ndim, const int64_t *xs, const int64_t *out_size,
                         ladle_adaptive_geom *g, int64_t *ys, const char *f);

ladle_status ladle__adaptive_plan(int ndim, const int64_t *xs, const int64_t *out_size,
                                  ladle_dtype dtype, ladle_adaptive_geom *g, int64_t *ys,
                                  const char *f)
{
    ladle_status st = LADLE_OK;
    LADLE_CHECK(ndim >= 3 && ndim <= 5, LADLE_ERR_SHAPE,
                "x has %d dimensions: N x C and 1 to 3 spatial ones", ndim);
    LADLE_CALL(ladle__layer_check_args(f, dtype, ndim, xs, 3));
    st = plan(ndim, xs, out_size, g, ys, f);
fail:
    return st;
}

/* The geometry from x's shape and the output sizes; ys gets y's shape. */
static ladle_status plan(int ndim, const int64_t *xs, const int64_t *out_size,
                         ladle_adaptive_geom *g, int64_t *ys, const char *f)
{
    int nd = ndim - 2;
    memset(g, 0, sizeof *g);
    ys[0] = xs[0];
    ys[1] = xs[1];
    for (int a = 0; a < 3; a++) {
        int s = a - (3 - nd);
        int64_t in = s < 0 ? 1 : xs[2 + s], out = s < 0 ? 1 : out_size[s];
        if (in < 1 || in > ADAPTIVE_MAX_EXTENT)
            return ladle__raise(LADLE_ERR_SHAPE, f,
                                "spatial extent %lld of dimension %d is outside 1 .. 2^31",
                                (long long)in, s);
        if (out < 1 || out > ADAPTIVE_MAX_EXTENT)
            return ladle__raise(LADLE_ERR_SHAPE, f,
                                "output size %lld of spatial dimension %d is outside 1 .. 2^31",
                                (long long)out, s);
        g->in[a] = g->x_n[a] = in;
        g->out[a] = g->y_n[a] = out; /* the whole of both, offsets 0 */
        if (s >= 0)
            ys[2 + s] = out;
    }
    int64_t numel;
    return ladle__check_shape(f, ndim, ys, &numel);
}

/* Either kind's layer (ladle__planes_kind), raising for f. */
static ladle_status adaptive_create(ladle__planes_kind kind, int ndim, const int64_t *xs,
                                    const int64_t *out_size, ladle_dtype dtype,
                                    ladle_device device, ladle_op **out, const char *f)
{
    ladle_status st = LADLE_OK;
    ladle__planes p = {.kind = kind};
    int64_t ys[5];
    if (xs == NULL || out_size == NULL || out == NULL)
        return ladle__raise(LADLE_ERR_NULL, f, "%s is NULL",
                            xs == NULL         ? "x_shape"
                            : out_size == NULL ? "out_size"
                                               : "out");
    LADLE_CALL(ladle__adaptive_plan(ndim, xs, out_size, dtype, &p.g.adaptive, ys, f));
    st = ladle__planes_layer(&p, dtype, device, ndim, xs, ys, out, f);
fail:
    return st;
}

ladle_status ladle_adaptive_avg_pool_create(int ndim, const int64_t x_shape[],
                                            const int64_t out_size[], ladle_dtype dtype,
                                            ladle_device device, ladle_op **out)
{
    return adaptive_create(LADLE__PLANES_ADAPTIVE, ndim, x_shape, out_size, dtype, device,
                           out, __func__);
}

ladle_status ladle_adaptive_max_pool_create(int ndim, const int64_t x_shape[],
                                            const int64_t out_size[], ladle_dtype dtype,
                                            ladle_device device, ladle_op **out)
{
    return adaptive_create(LADLE__PLANES_ADAPTIVE_MAX, ndim, x_shape, out_size, dtype,
                           device, out, __func__);
}
