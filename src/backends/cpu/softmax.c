/*
 * Softmax and log-softmax on the CPU (the loops are in softmax_rows.inc).
 */
#include <math.h>

#include "src/backends/cpu/cpu.h"
#include "src/backends/cpu/fastmath.h"
#include "src/backends/cpu/simd.h"

#define T float
#define FWD softmax_fwd_f32
#define BWD softmax_bwd_f32
#include "src/backends/cpu/softmax_rows.inc"
#undef T
#undef FWD
#undef BWD
#define T double
#define FWD softmax_fwd_f64
#define BWD softmax_bwd_f64
#include "src/backends/cpu/softmax_rows.inc"
#undef T
#undef FWD
#undef BWD

/*
 * Rows that are contiguous (the softmax along the last dimension, as in a
 * transformer): vectorised (softmax_vec.inc). The maximum and the sums are kept in SL lanes
 * (a fixed inner loop the compiler turns into vectors, where a running
 * reduction would stay scalar without reassociation), the sums in double;
 * the exponentials are fastmath.h's (a few ulps), each computed once and
 * kept in y, which the normalisation then scales. Below e^-87 an
 * exponential is 0 (a -inf entry, a mask, gives exactly 0, as in f64). The
 * general loops above took 15 ns an element with two calls of the C
 * library's exp in double. 32 lanes, not 8: with one vector of sums each
 * step waited on the last one's add (forward + backward 1.40 -> 1.08 ns an
 * element at AVX-512, docs/runs/2026-11-29-lenet-step-and-layer-kernels.md).
 */
#define SL 32

LADLE_INLINE float exp_or_zero(float d) { return d < -87.0f ? 0.0f : ladle_expf(d); }

#define T float
#define RFWD rows_fwd_f32
#define RBWD rows_bwd_f32
#define EXPD ladle_exp_diff_f32
#define EXPY exp_or_zero
#include "src/backends/cpu/softmax_vec.inc"
#undef T
#undef RFWD
#undef RBWD
#undef EXPD
#undef EXPY
#define T double
#define RFWD rows_fwd_f64
#define RBWD rows_bwd_f64
#define EXPD ladle_exp_diff_f64 /* once an element, not the general loops' two calls */
#define EXPY ladle_exp_f64
#include "src/backends/cpu/softmax_vec.inc"
#undef T
#undef RFWD
#undef RBWD
#undef EXPD
#undef EXPY

ladle_status ladle__cpu_softmax_forward(const ladle_backend *be, ladle_dtype dtype, int log,
                                       int64_t outer, int64_t len, int64_t inner,
                                       const void *x, void *y)
{
    (void)be;
    if (inner == 1)
        LADLE_CPU_TYPED(dtype == LADLE_F32, rows_fwd, (log, outer, len, x, y));
    else
        LADLE_CPU_TYPED(dtype == LADLE_F32, softmax_fwd, (log, outer, len, inner, x, y));
    return LADLE_OK;
}

ladle_status ladle__cpu_softmax_backward(const ladle_backend *be, ladle_dtype dtype, int log,
                                        int64_t outer, int64_t len, int64_t inner,
                                        const void *y, const void *dy, void *dx)
{
    (void)be;
    if (inner == 1)
        LADLE_CPU_TYPED(dtype == LADLE_F32, rows_bwd, (log, outer, len, y, dy, dx));
    else
        LADLE_CPU_TYPED(dtype == LADLE_F32, softmax_bwd, (log, outer, len, inner, y, dy, dx));
    return LADLE_OK;
}
