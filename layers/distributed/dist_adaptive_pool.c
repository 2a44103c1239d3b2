/*
 * Distributed adaptive average and max pooling (see ladle/distributed.h):
 * x and y
 * are split in balance over the same partition. The output tile of a rank
 * reads, along each spatial dimension, the inputs from the window of its
 * first output to the window of its last (windows never go back as the
 * output index grows), a box that may reach into its neighbours' blocks:
 *
 *   y = A W x,      dx = W* A* dy
 *
 * W gathers every rank's box from the owners (the window gather the
 * distributed interpolation uses, dist_window.c), A pools the box into the
 * tile at global coordinates (the backend's adaptive_pool slots with the
 * box's and the tile's offsets). A* spreads dy over the box, W* adds every
 * box back into the owners of its cells. The max is the same with A the
 * max over each window of the box (the box holds whole windows, so each
 * winner is the sequential layer's) and A* routing dy to the winners it
 * saved in the ctx; W and W* are unchanged.
 */
#include <string.h>

#include "layers/distributed/dist_window.h"
#include "layers/sequential/adaptive_impl.h"

/* Either kind's layer (ladle__planes_kind), raising for f. */
static ladle_status dist_adaptive_create(ladle__planes_kind kind,
                                         const ladle_partition *p_x, const int64_t *x_shape,
                                         const int64_t *out_size, ladle_dtype dtype,
                                         ladle_device device, unsigned flags,
                                         ladle_op **out, const char *f)
{
    ladle_status local = LADLE_OK;
    ladle__make m = {f, dtype, device, flags, MPI_COMM_NULL, NULL, NULL};
    ladle__planes p = {.kind = kind};
    int64_t ys[5] = {0}, args[16] = {0};
    if (p_x == NULL || x_shape == NULL || out_size == NULL || out == NULL)
        return ladle__raise(LADLE_ERR_NULL, f, "%s is NULL",
                            p_x == NULL        ? "p_x"
                            : x_shape == NULL  ? "x_shape"
                            : out_size == NULL ? "out_size"
                                               : "out");
    const ladle_partition *parts[1] = {p_x};
    int ndim = ladle_partition_ndim(p_x);
    local = ladle__adaptive_plan(ndim, x_shape, out_size, dtype, &p.g.adaptive, ys, f);
    if (local == LADLE_OK)
        local = ladle__make_check_kind(dtype, flags, f);
    if (local == LADLE_OK) {
        int64_t head[4] = {ndim, dtype, flags, kind};
        memcpy(args, head, sizeof head);
        memcpy(args + 4, x_shape, sizeof(int64_t) * (size_t)ndim);
        memcpy(args + 9, out_size, sizeof(int64_t) * (size_t)(ndim - 2));
    }
    return ladle__dist_window_create(&m, local,
                                     ladle__make_hash(LADLE_HASH_INIT, 1, parts, 16, args),
                                     p_x, &p, ndim - 2, x_shape, ys, out);
}

ladle_status ladle_dist_adaptive_avg_pool_create(const ladle_partition *p_x,
                                                 const int64_t x_shape[],
                                                 const int64_t out_size[],
                                                 ladle_dtype dtype, ladle_device device,
                                                 unsigned flags, ladle_op **out)
{
    return dist_adaptive_create(LADLE__PLANES_ADAPTIVE, p_x, x_shape, out_size, dtype,
                                device, flags, out, __func__);
}

ladle_status ladle_dist_adaptive_max_pool_create(const ladle_partition *p_x,
                                                 const int64_t x_shape[],
                                                 const int64_t out_size[],
                                                 ladle_dtype dtype, ladle_device device,
                                                 unsigned flags, ladle_op **out)
{
    return dist_adaptive_create(LADLE__PLANES_ADAPTIVE_MAX, p_x, x_shape, out_size, dtype,
                                device, flags, out, __func__);
}
