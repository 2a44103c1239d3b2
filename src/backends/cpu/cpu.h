/*
 * The CPU backend's slots, one file per kernel family, gathered into the
 * table by cpu.c. They are the reference every other backend is tested
 * against, and the guarded test device runs them behind its fence. Never
 * included outside src/backends/.
 */
#ifndef LADLE_BACKEND_CPU_H
#define LADLE_BACKEND_CPU_H

#include <string.h>

#include "src/core/backend.h"

extern const ladle_backend_table ladle__cpu_table;

/* The kernels, ladle__cpu_<slot>, declared for every entry of the slot list
 * (src/core/backend_slots.h); the CPU defines those its table fills (cpu.c),
 * one file per family, named in the family's comment in the list. */
#define LADLE_SLOT(name, params, args, devptrs) ladle_status ladle__cpu_##name params;
#include "src/core/backend_slots.h"
#undef LADLE_SLOT

/* The 2-byte dtypes' parts of fill and of the box copies
 * (src/backends/cpu/convert.c): n elements of bf16 or f16 set to value
 * rounded to nearest even; one row of a box copy, strides in elements. */
void ladle__cpu_fill_half(ladle_dtype dtype, int64_t n, double value, void *x);
void ladle__cpu_row_half(ladle_box_mode mode, ladle_dtype dtype, int64_t n, const uint16_t *s,
                         int64_t ss, uint16_t *d, int64_t ds);

/* The bf16 GEMM's paths (src/backends/cpu/gemm_half.c): the slot runs
 * the AUTO one, the tests each in turn. DPBF16 is refused
 * (LADLE_ERR_UNSUPPORTED) on a CPU without AVX-512 BF16. */
enum { LADLE__GEMM_HALF_AUTO = 0, LADLE__GEMM_HALF_CONVERT = 1, LADLE__GEMM_HALF_DPBF16 = 2 };
int ladle__cpu_has_dpbf16(void);
size_t ladle__cpu_gemm_half_bytes(int path, ladle_dtype ct, int64_t m, int64_t n, int64_t k);
ladle_status ladle__cpu_gemm_half_path(int path, ladle_dtype ab, ladle_dtype ct, int trans_a,
                                       int trans_b, int64_t m, int64_t n, int64_t k,
                                       double alpha, const void *a, int64_t lda, const void *b,
                                       int64_t ldb, double beta, void *c, int64_t ldc, void *ws);

/* The type-generic kernel files (*.inc) hold each kernel once over an
 * element type T; each_dtype.h includes one once per dtype with T and its
 * suffix S (f32, f64) defined, and FN(name) names the instance, name_f32
 * or name_f64. */
#define FN(name) LADLE_CPU_FN_(name, S)
#define LADLE_CPU_FN_(name, s) LADLE_CPU_FN__(name, s)
#define LADLE_CPU_FN__(name, s) name##_##s

/* Calls the f32 instance of kernel fn with args (in parentheses) where
 * is_f32, the f64 one elsewhere. */
#define LADLE_CPU_TYPED(is_f32, fn, args) ((is_f32) ? fn##_f32 args : fn##_f64 args)

/* One plane of a forward that gathers (adjoint 0) or of its adjoint, which
 * scatters into a zeroed dst (adjoint 1): its input starts at element bx,
 * its output at by. */
typedef void ladle__cpu_plane_fn(const void *geom, ladle_dtype dtype, int adjoint,
                                 const void *src, void *dst, int64_t bx, int64_t by);

/* The walk a plane-wise forward and its adjoint share: planes planes of
 * x_n[0] x_n[1] x_n[2] inputs and y_n[0] x y_n[1] x y_n[2] outputs, dst
 * (dx) zeroed first for the adjoint. */
static inline void ladle__cpu_each_plane(ladle__cpu_plane_fn *plane, const void *geom,
                                         const int64_t *x_n, const int64_t *y_n,
                                         ladle_dtype dtype, int adjoint, int64_t planes,
                                         const void *src, void *dst)
{
    int64_t in = x_n[0] * x_n[1] * x_n[2], out = y_n[0] * y_n[1] * y_n[2];
    if (adjoint && planes * in > 0)
        memset(dst, 0, (size_t)(planes * in) * ladle_dtype_size(dtype));
    for (int64_t p = 0; p < planes; p++)
        plane(geom, dtype, adjoint, src, dst, p * in, p * out);
}

#endif /* LADLE_BACKEND_CPU_H */
