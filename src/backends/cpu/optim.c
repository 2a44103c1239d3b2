/*
 * Optimizer updates on the CPU (the loops are in optim_rows.inc).
 */
#include <math.h>

#include "src/backends/cpu/cpu.h"
#include "src/backends/cpu/simd.h"

#define T float
#define SGD sgd_f32
#define ADAM adam_f32
#include "src/backends/cpu/optim_rows.inc"
#undef T
#undef SGD
#undef ADAM
#define T double
#define SGD sgd_f64
#define ADAM adam_f64
#include "src/backends/cpu/optim_rows.inc"
#undef T
#undef SGD
#undef ADAM

ladle_status ladle__cpu_optim_step(const ladle_backend *be, ladle_dtype dtype,
                                  const ladle_optimizer_desc *d, int64_t t, int64_t n, void *p,
                                  const void *g, void *s0, void *s1)
{
    (void)be;
    int f32 = dtype == LADLE_F32;
    if (d->kind == LADLE_OPT_SGD) {
        if (f32)
            sgd_f32(d, t == 1, n, p, g, s0);
        else
            sgd_f64(d, t == 1, n, p, g, s0);
    } else if (f32) {
        adam_f32(d, t, n, p, g, s0, s1);
    } else {
        adam_f64(d, t, n, p, g, s0, s1);
    }
    return LADLE_OK;
}
