/*
 * Private to the transposed convolution: the convolution it is the adjoint
 * of, shared by the sequential layer (conv_transpose.c) and its spatially
 * partitioned twin (layers/distributed/dist_conv_transpose.c).
 */
#ifndef LADLE_CONV_TRANSPOSE_IMPL_H
#define LADLE_CONV_TRANSPOSE_IMPL_H

#include "src/op/op_impl.h"

/* Check d against x's shape xs (2 + d->nd extents) and fill the
 * convolution whose adjoint it is (C_out -> C_in channels, no bias, no
 * flags) in *conv and the transposed convolution's y shape (that
 * convolution's x) in ys. allowed: the flags the caller takes. Local;
 * raises for f. */
ladle_status ladle__conv_transpose_plan(const ladle_conv_transpose_desc *d,
                                        const int64_t *xs, unsigned allowed, const char *f,
                                        ladle_conv_desc *conv, int64_t *ys);

#endif /* LADLE_CONV_TRANSPOSE_IMPL_H */
