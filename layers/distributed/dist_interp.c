/*
 * Distributed interpolation (see ladle/distributed.h): x and y are split in
 * balance over the same partition. The output tile of a rank reads, along
 * each spatial dimension, the input indices from the first tap of its first
 * output to the last tap of its last (taps never go back as the output
 * index grows), a window that may reach into its neighbours' blocks:
 *
 *   y = I W x,      dx = W* I* dy
 *
 * W gathers every rank's window from the owners (a box exchange like a
 * repartition's, to boxes that overlap), I is the interpolation of the
 * window into the tile at global coordinates (the backend's interp slots
 * with the window's and the tile's offsets). I* scatters dy into the
 * window, W* adds every window back into the owners of its cells.
 */
#include <string.h>

#include "layers/distributed/dist_window.h"
#include "layers/sequential/interp_impl.h"

/* The checks every rank makes alike; the global geometry and y's shape. */
static ladle_status di_checks(const ladle_interp_desc *d, const ladle_partition *p_x,
                              const int64_t *xs, ladle_dtype dtype, unsigned flags,
                              ladle_interp_geom *g, int64_t *ys, const char *f)
{
    ladle_status st = ladle__interp_plan(d, xs, dtype, g, ys, f);
    if (st == LADLE_OK)
        st = ladle__make_check_kind(dtype, flags, f);
    if (st == LADLE_OK && ladle_partition_ndim(p_x) != 2 + d->nd)
        st = ladle__raise(LADLE_ERR_PARTITION, f, "p_x has %d dimensions; x has %d",
                          ladle_partition_ndim(p_x), 2 + d->nd);
    return st;
}

ladle_status ladle_dist_interp_create(const ladle_interp_desc *d,
                                      const ladle_partition *p_x, const int64_t x_shape[],
                                      ladle_dtype dtype, ladle_device device,
                                      ladle_op **out)
{
    const char *f = __func__;
    ladle_status st = LADLE_OK, local = LADLE_OK;
    ladle__make m = {f, dtype, device, 0, MPI_COMM_NULL, NULL, NULL};
    ladle__planes p = {.kind = LADLE__PLANES_INTERP};
    int64_t ys[5] = {0}, args[24] = {0};
    LADLE_NOT_NULL(d);
    LADLE_CHECK_SIZE(d);
    unsigned flags = d->flags;
    m.flags = flags;
    LADLE_NOT_NULL(p_x);
    LADLE_NOT_NULL(x_shape);
    LADLE_NOT_NULL(out);
    const ladle_partition *parts[1] = {p_x};
    local = di_checks(d, p_x, x_shape, dtype, flags, &p.g.interp, ys, f);
    if (local == LADLE_OK) {
        int64_t head[6] = {d->nd, d->mode, d->align_corners, dtype, flags, 0};
        memcpy(args, head, sizeof head);
        memcpy(args + 6, d->out_size, sizeof d->out_size);
        memcpy(args + 9, d->scale, sizeof d->scale);
        memcpy(args + 12, x_shape, sizeof(int64_t) * (size_t)(2 + d->nd));
    }
    st = ladle__dist_window_create(&m, local,
                                   ladle__make_hash(LADLE_HASH_INIT, 1, parts, 24, args),
                                   p_x, &p, d->nd, x_shape, ys, out);
fail:
    return st;
}
