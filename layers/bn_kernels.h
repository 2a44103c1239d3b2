/*
 * Batch norm's per-channel kernels, shared by the sequential and the
 * distributed layer. Tensors are N x C x inner, contiguous; sums go to C
 * doubles.
 */
#ifndef LADLE_BN_KERNELS_H
#define LADLE_BN_KERNELS_H

#include "src/op/op_impl.h"

/* s1[c] = sum of x (mean NULL) or of (x - mean[c])^2 over channel c. */
void ladle__bn_moment(ladle_dtype dt, const void *x, int64_t n, int64_t c, int64_t inner,
                      const double *mean, double *s1);
/* s1[c] = sum of dy, s2[c] = sum of dy (x - mean[c]). */
void ladle__bn_dsums(ladle_dtype dt, const void *x, const void *dy, int64_t n, int64_t c,
                     int64_t inner, const double *mean, double *s1, double *s2);
/* out = a[c] u + b[c] w + k[c] (w may be NULL). */
void ladle__bn_affine(ladle_dtype dt, const void *u, const void *w, void *out, int64_t n,
                      int64_t c, int64_t inner, const double *a, const double *b,
                      const double *k);

#endif /* LADLE_BN_KERNELS_H */
