/*
 * Padding modes (ladle_padding_mode) as box copies on a padded tensor, for
 * the convolutions (conv.c, conv_pad.c, dist_conv.c). Private to layers/.
 */
#ifndef LADLE_PAD_IMPL_H
#define LADLE_PAD_IMPL_H

#include "src/op/op_impl.h"

/* One dimension of a contiguous padded tensor: cell c holds global index
 * off + c of a dimension of global extent n; the cells of global index in
 * [-lo, 0) and [n, n + hi) are padding, the others in [0, n) data (cells
 * beyond both are left alone). Non-spatial dimensions: off 0, lo = hi = 0. */
typedef struct ladle__pad_dim {
    int64_t off, n, lo, hi;
} ladle__pad_dim;

/* The global index a padding cell g reads under mode (g itself for data). */
int64_t ladle__pad_source(ladle_padding_mode mode, int64_t g, int64_t n);

/* Whether a mode can pad lo and hi cells onto an extent n (reflect: both
 * below n; circular: both at most n; zeros and replicate: any). */
int ladle__pad_fits(ladle_padding_mode mode, int64_t lo, int64_t hi, int64_t n);

/* The name of a mode ("reflect"), or NULL for an unknown one. */
const char *ladle__pad_name(ladle_padding_mode mode);

/*
 * Fill the padding cells of t (ndim dimensions of extents shape, described
 * by dims) from its data cells, one dimension after the other (the corners
 * are the composition). adjoint nonzero: the adjoint, dimension by
 * dimension in reverse, adding each padding cell into the cell it was read
 * from (the padding cells keep stale values; nothing reads them after).
 * Zeros writes zeros (its adjoint does nothing). Every source cell must lie
 * in t (the caller checked). Local; on be.
 */
ladle_status ladle__pad_fill(const ladle_backend *be, ladle_dtype dtype, ladle_padding_mode mode,
                             int ndim, const int64_t *shape, const ladle__pad_dim *dims, void *t,
                             int adjoint);

#endif /* LADLE_PAD_IMPL_H */
