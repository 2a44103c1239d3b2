/*
 * Dropout masks on the CPU: the counter-based hash decides each element, so
 * nothing is stored and the backward recomputes the forward's mask.
 */
#include "src/backends/cpu/cpu.h"

static int keep(double p, uint64_t seed, uint64_t step, int64_t i)
{
    return 0.5 * (ladle__random_uniform(seed, step, (uint64_t)i) + 1.0) >= p;
}

#define T float
#define MASK dropout_f32
#include "src/backends/cpu/dropout_rows.inc"
#undef T
#undef MASK
#define T double
#define MASK dropout_f64
#include "src/backends/cpu/dropout_rows.inc"
#undef T
#undef MASK

ladle_status ladle__cpu_dropout(const ladle_backend *be, ladle_dtype dtype, int64_t n, double p,
                               uint64_t seed, uint64_t step, int64_t offset, const void *in,
                               void *out)
{
    (void)be;
    if (dtype == LADLE_F32)
        dropout_f32(n, p, seed, step, offset, in, out);
    else
        dropout_f64(n, p, seed, step, offset, in, out);
    return LADLE_OK;
}
