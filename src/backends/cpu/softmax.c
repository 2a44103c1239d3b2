/*
 * Softmax and log-softmax on the CPU (the loops are in softmax_rows.inc).
 */
#include <math.h>

#include "src/backends/cpu/cpu.h"

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

ladle_status ladle__cpu_softmax_forward(const ladle_backend *be, ladle_dtype dtype, int log,
                                       int64_t outer, int64_t len, int64_t inner,
                                       const void *x, void *y)
{
    (void)be;
    if (dtype == LADLE_F32)
        softmax_fwd_f32(log, outer, len, inner, x, y);
    else
        softmax_fwd_f64(log, outer, len, inner, x, y);
    return LADLE_OK;
}

ladle_status ladle__cpu_softmax_backward(const ladle_backend *be, ladle_dtype dtype, int log,
                                        int64_t outer, int64_t len, int64_t inner,
                                        const void *y, const void *dy, void *dx)
{
    (void)be;
    if (dtype == LADLE_F32)
        softmax_bwd_f32(log, outer, len, inner, y, dy, dx);
    else
        softmax_bwd_f64(log, outer, len, inner, y, dy, dx);
    return LADLE_OK;
}
