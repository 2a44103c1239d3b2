/*
 * What the sequential and the distributed group norm share: the passes over
 * x and dy on the batch norm slots. A group (sample sm, group gr) is the
 * c / groups consecutive channels of the group in sample sm, all their
 * positions; x viewed as 1 x (n c) x inner is a batch norm input whose
 * "channels" are the (sample, channel) rows, so bn_moment, bn_dsums and
 * bn_affine give per-row sums and apply per-row coefficients, and the host
 * folds rows into groups. A distributed layer passes reduce, which sums the
 * per-group values over the ranks that hold parts of the same groups.
 */
#ifndef LADLE_GN_IMPL_H
#define LADLE_GN_IMPL_H

#include "layers/sequential/bn_impl.h"

/* v[0 .. count) summed in place over the ranks that share this rank's
 * groups (the same values on each of them). Collective over those ranks. */
typedef ladle_status ladle__gn_reduce_fn(ladle_op *op, int64_t count, double *v);

typedef struct ladle__gn {
    int64_t c, groups, inner; /* this rank's channels and groups, positions per channel */
    int64_t nmax;             /* the largest batch */
    double count;             /* values of one group over every rank */
    double eps;
    int affine;
    ladle__gn_reduce_fn *reduce; /* NULL: one rank */
    /* host: nmax c each (a group's mean per row, two sums, the coefficients
     * a, b, k), nmax groups each (mean, 1/std), c each (gamma, beta, two
     * accumulators, a stage) */
    double *mx, *s1, *s2, *ca, *cb, *cc, *gm, *gi, *g, *bt, *t0, *t1, *stage;
    double *dev; /* device: LADLE__BN_NDEV nmax c doubles, the bn_* slots' */
} ladle__gn;

/* What a forward saves for its backward (a ctx's impl, host memory). */
typedef struct ladle__gn_saved {
    const void *sums_of; /* the dy the sums belong to; NULL when none */
    int group_sums;      /* the reduced group sums are in place */
    /* mean, invstd (nmax groups each), per row sum dy and sum dy (x -
     * mean) (nmax c each), per group sums of gamma dy and gamma dy (x -
     * mean) (nmax groups each) */
    double v[];
} ladle__gn_saved;

/* v's host arrays in one block (v->mx owns it) and its device workspace on
 * op's backend. Local. */
ladle_status ladle__gn_alloc(const ladle_op *op, ladle__gn *v);
void ladle__gn_free(ladle__gn *v, const ladle_backend *be);
/* A ctx's impl for v (ladle__gn_saved and its values). Local. */
ladle_status ladle__gn_ctx_init(const ladle__gn *v, ladle_ctx *ctx);

/* The passes on this rank's n samples: params holds gamma and beta (NULL
 * when not affine), grads their gradients; sv may be NULL in forward
 * (nothing saved). Collective over reduce's ranks when it is set. */
ladle_status ladle__gn_forward(ladle_op *op, ladle__gn *v, ladle_tensor *const *params,
                               const void *x, void *y, int64_t n, ladle__gn_saved *sv);
ladle_status ladle__gn_backward(ladle_op *op, ladle__gn *v, ladle_tensor *const *params,
                                const void *x, const void *dy, void *dx, int64_t n,
                                ladle__gn_saved *sv);
/* Accumulating: grads[0] += sum dy x-hat, grads[1] += sum dy per channel
 * over this rank's values (a distributed layer sums them over its peers
 * afterwards). Local. */
ladle_status ladle__gn_backward_weight(ladle_op *op, ladle__gn *v,
                                       ladle_tensor *const *grads, const void *x,
                                       const void *dy, int64_t n, ladle__gn_saved *sv);

/* The checks of the descriptor against x (2 to 5 dimensions, its size
 * checked already) that both creates make, raised for func. Local. */
ladle_status ladle__gn_check(const ladle_groupnorm_desc *d, int ndim,
                             const int64_t *x_shape, const char *func);

#endif /* LADLE_GN_IMPL_H */
