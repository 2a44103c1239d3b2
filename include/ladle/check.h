/*
 * ladle/check.h - the dot-product (adjoint) test, for users.
 */
#ifndef LADLE_CHECK_H
#define LADLE_CHECK_H

#include "core.h"
#include "op.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct ladle_adjoint_result {
    double fx_y;     /* <F x, y>, summed over all ranks */
    double x_fty;    /* <x, F* y>, summed over all ranks */
    double mismatch; /* |fx_y - x_fty| / max(|fx_y|, |x_fty|), 0 if both are 0 */
} ladle_adjoint_result;

/* Run the dot-product test on op: x and y are filled with uniform random
 * values in [-1, 1) from seed (each rank a different stream), F x and F* y
 * are computed, and the inner products are accumulated in double precision
 * over every rank of the op. The result is the same on every rank of the op;
 * ranks that take no part get zeros. For an exact adjoint the mismatch is a
 * small multiple of the dtype's machine epsilon. Allocates its tensors (this
 * is a test, not a hot path). Collective over the op's ranks.
 * Returns LADLE_ERR_NULL, LADLE_ERR_ALLOC, LADLE_ERR_NUMERIC (on every
 * rank) when either inner product is not finite (the op made NaN or
 * infinite values: no mismatch can be measured, and result->mismatch is
 * NaN), and whatever the op returns. */
LADLE_API ladle_status ladle_adjoint_test(ladle_op *op, uint64_t seed,
                                          ladle_adjoint_result *result);

/* The gradient test of a layer: central finite differences against the
 * hand-written backward. With a random x and a random projection w of y,
 * L = <f(x), w>; backward(w) must give dL/dx and backward_weight(w) dL/dW.
 * Up to `samples` elements of x and of each parameter (all of them when
 * there are fewer) are perturbed by +-h, h = 1e-6 (scaled by the element's
 * magnitude), and each error is |fd - analytic| / max(|fd|, |analytic|,
 * 1e-3 * the tensor's largest analytic entry). Meant for f64 layers (errors
 * near 1e-8); stochastic layers are replayed at the same step. Allocates.
 * Local: meant for sequential layers (a distributed layer's calls are
 * collective, and its ranks would perturb different elements; compare it
 * with its sequential twin instead). Returns LADLE_ERR_NULL, LADLE_ERR_ARG (not a layer),
 * LADLE_ERR_NUMERIC when a gradient or a difference is not finite (its
 * error is then NaN in result), and whatever the layer returns. */
typedef struct ladle_gradient_result {
    double input_error;     /* worst over the sampled x entries */
    double param_error[4];  /* worst per parameter (the first four); deprecated:
                               read it through ladle_gradient_result_param_error */
    double max_param_error; /* worst over all parameters */
    int nparams;
} ladle_gradient_result;

/* The gradient test described above the result struct. Local; on a
 * distributed layer its calls are that layer's, collective over its ranks. */
LADLE_API ladle_status ladle_gradient_test(ladle_op *op, uint64_t seed, int samples,
                                           ladle_gradient_result *result);
/* The worst error of parameter i in a gradient test's result, or NaN when
 * r is NULL or parameter i was not reported (i < 0, i >= nparams, or
 * beyond the four the struct holds: max_param_error covers them all).
 * Local. */
LADLE_API double ladle_gradient_result_param_error(const ladle_gradient_result *r, int i);

/* The tolerance ladle's own tests and tools accept for dtype: 1e-13 for
 * f64, 1e-5 for f32. Local. */
LADLE_API double ladle_adjoint_tolerance(ladle_dtype dtype);

#ifdef __cplusplus
}
#endif

#endif /* LADLE_CHECK_H */
