/*
 * Dropout masks on the CPU: the counter-based hash decides each element, so
 * nothing is stored and the backward recomputes the forward's mask.
 */
#include <math.h>

#include "src/backends/cpu/cpu.h"
#include "src/backends/cpu/simd.h"
#include "src/core/random.h"

/*
 * Element i is kept where its uniform moved to [0, 1), 0.5 (u + 1), is >= p
 * (the GPU's test, in double). That value is t 2^-53 exactly, t the top 53
 * bits of the element's random word (src/core/random.h: every step of
 * making u is exact), so the test is the integer comparison t >= ceil(p
 * 2^53): the same decision, without a call and a conversion per element.
 * The key of (seed, step) is mixed once per call. Measured on 2048 x 1024
 * f32 (bench_layers' dropout row): 27.7 ms forward + backward before.
 */
static uint64_t threshold(double p) { return (uint64_t)ceil(p * 0x1p53); }

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
    LADLE_CPU_TYPED(dtype == LADLE_F32, dropout, (n, p, seed, step, offset, in, out));
    return LADLE_OK;
}
