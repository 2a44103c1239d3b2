/*
 * The window-gather layers (dist_adaptive_pool.c, dist_interp.c): what
 * their creation and their calls share. Never installed.
 */
#ifndef LADLE_DIST_WINDOW_H
#define LADLE_DIST_WINDOW_H

#include "layers/distributed/dist.h"
#include "layers/sequential/planes_impl.h"

/*
 * A layer whose output tile reads a window of x that may reach into its
 * neighbours' blocks (the layers of planes: adaptive pooling,
 * interpolation): x and y are split in balance over one partition, W
 * gathers each rank's window from the owners of its cells and the
 * sequential kernels run on it, y = K W x, dx = W* K* dy.
 */

/* The creation of such a layer after its own checks (local, this rank's
 * verdict; hash, the arguments every rank must pass alike) over p_x, for
 * the global geometry p over nd spatial dimensions, x of global shape xs
 * and y of ys; m's func, dtype, device and flags set. Collective over p_x. */
ladle_status ladle__dist_window_create(ladle__make *m, ladle_status local, uint64_t hash,
                                       const ladle_partition *p_x, const ladle__planes *p,
                                       int nd, const int64_t *xs, const int64_t *ys,
                                       ladle_op **out);

#endif /* LADLE_DIST_WINDOW_H */
