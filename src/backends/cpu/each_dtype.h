/*
 * Includes the type-generic kernel file named by LADLE_CPU_KERNELS once per
 * dtype, with T its element type and S its suffix (FN in cpu.h), and
 * forgets the name:
 *
 *     #define LADLE_CPU_KERNELS "src/backends/cpu/norm_rows.inc"
 *     #include "src/backends/cpu/each_dtype.h"
 *
 * No include guard: a file includes it once per kernel file.
 */
#define T float
#define S f32
#include LADLE_CPU_KERNELS
#undef T
#undef S

#define T double
#define S f64
#include LADLE_CPU_KERNELS
#undef T
#undef S

#undef LADLE_CPU_KERNELS
