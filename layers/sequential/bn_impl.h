/*
 * What the sequential and the distributed batch norm share: moving their
 * per-channel host doubles to and from device memory through the op's
 * backend. The statistics, coefficients and saved state of both layers live
 * on the host (they are c values, and the distributed layer reduces and
 * merges them over MPI); the kernels that read or write tensor data are the
 * backend's bn_* slots.
 */
#ifndef LADLE_BN_IMPL_H
#define LADLE_BN_IMPL_H

#include "src/op/op_impl.h"

/* host[0..bytes) = dev[0..bytes), complete on return (not collective). */
ladle_status ladle__bn_fetch(const ladle_backend *be, size_t bytes, const void *dev,
                             void *host);
/* dev[0..bytes) = host[0..bytes), complete on return, so host may be
 * rewritten at once (not collective). */
ladle_status ladle__bn_send(const ladle_backend *be, size_t bytes, const void *host,
                            void *dev);
/* out[i] = t's element i widened to double, i < c; stage is host memory for
 * c elements of t's dtype. */
ladle_status ladle__bn_read(const ladle_backend *be, const ladle_tensor *t, int64_t c,
                            void *stage, double *out);
/* t's element i = in[i] rounded to t's dtype, i < c (stage as above). */
ladle_status ladle__bn_write(const ladle_backend *be, ladle_tensor *t, int64_t c,
                             const double *in, void *stage);

/* Both layers' running statistics after a batch of count values per
 * channel with the given mean and (biased) var: each moves by momentum
 * toward the batch's (var unbiased), or, with a momentum below 0, to the
 * cumulative average over the batches seen (*batches_seen counts this one).
 * rm, rv: host scratch of c doubles each; stage as above. Not collective. */
ladle_status ladle__bn_update_running(const ladle_backend *be, int64_t c, double momentum,
                                      int64_t *batches_seen, const double *mean,
                                      const double *var, double count,
                                      ladle_tensor *running_mean, ladle_tensor *running_var,
                                      double *rm, double *rv, void *stage);

/* The device workspace of both layers, c doubles at each of these (times
 * c): the mean and the two sums the bn_* slots read and write, and the
 * coefficients of bn_affine. */
enum {
    LADLE__BN_DMEAN,
    LADLE__BN_DS1,
    LADLE__BN_DS2,
    LADLE__BN_DA,
    LADLE__BN_DB,
    LADLE__BN_DK,
    LADLE__BN_NDEV
};

/* The backend's bn_moment, bn_dsums and bn_affine over op's backend and
 * dtype for an n x c x inner tensor, with the per-channel arrays (mean, s,
 * s1, s2, a, b, k) on the host and dev the workspace above: they are sent
 * in, and the sums fetched back, around the slot. */
ladle_status ladle__bn_moment(const ladle_op *op, int64_t n, int64_t c, int64_t inner,
                              const void *x, const double *mean, double *s, double *dev);
ladle_status ladle__bn_dsums(const ladle_op *op, int64_t n, int64_t c, int64_t inner,
                             const void *x, const void *dy, const double *mean, double *s1,
                             double *s2, double *dev);
ladle_status ladle__bn_affine(const ladle_op *op, int64_t n, int64_t c, int64_t inner,
                              const void *u, const void *w, void *out, const double *a,
                              const double *b, const double *k, double *dev);

#endif /* LADLE_BN_IMPL_H */
