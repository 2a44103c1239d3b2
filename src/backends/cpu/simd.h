/*
 * LADLE_KERNEL marks a hot loop nest to be compiled three times: for
 * x86-64-v4 (AVX-512), x86-64-v3 (AVX2 and FMA: twice the vector width of
 * the baseline and fused multiply-adds) and the baseline; the dynamic loader
 * picks the best copy the CPU can run. Elsewhere, or with -DLADLE_NO_CLONES,
 * it is nothing. Measured on an AVX-512 machine (bench_layers, f32): GELU
 * forward + backward 23.4 ms baseline, 6.4 ms v3, 3.9 ms v4; batch norm
 * 10.5 ms before the rewrite to 3.3 ms. `make check` runs the copy this
 * machine picks; `make asan` builds without clones, so it runs the
 * baseline copy.
 *
 * The kernel files that came from layers/ (CPU_FUSED in the Makefile) are
 * built with -ffp-contract=fast so that polynomials become FMAs; the
 * error-free sums of blas.c and the optimizers' updates are not.
 */
#ifndef LADLE_SIMD_H
#define LADLE_SIMD_H

#if defined(__x86_64__) && defined(__ELF__) && defined(__GNUC__) && !defined(__clang__) && \
    __GNUC__ >= 12 && !defined(LADLE_NO_CLONES)
#define LADLE_KERNEL __attribute__((target_clones("arch=x86-64-v4", "arch=x86-64-v3", "default")))
/* whether the x86-64-v4 copies run here: for a kernel whose best code differs
 * between the copies, asked once at plan time */
#define LADLE_RUNS_V4() (__builtin_cpu_supports("x86-64-v4") != 0)
#define LADLE_RUNS_V3() (__builtin_cpu_supports("x86-64-v3") != 0)
/* one copy for one level, for a kernel written per vector width, which
 * plan time picks by LADLE_RUNS_V4/V3 (src/backends/cpu/conv_direct.c) */
#define LADLE_TARGET_V4 __attribute__((target("arch=x86-64-v4")))
#define LADLE_TARGET_V3 __attribute__((target("arch=x86-64-v3")))
#else
#define LADLE_KERNEL
#define LADLE_RUNS_V4() 0
#define LADLE_RUNS_V3() 0
#define LADLE_TARGET_V4
#define LADLE_TARGET_V3
#endif

/* A helper a kernel's loops must see through (constant arguments fold). */
#if defined(__GNUC__)
#define LADLE_INLINE static inline __attribute__((always_inline))
#else
#define LADLE_INLINE static inline
#endif

/* The widest vector the direct convolution's per-width kernels run at on
 * this CPU, in bytes: 64 where the x86-64-v4 copies run, 32 where only the
 * x86-64-v3 ones do, 0 before. A build without the copies runs both
 * widths' kernels as code for the build's own target, so that the
 * sanitizers check them: 64, or 32 in a build for AVX2 without AVX-512
 * (-march=x86-64-v3), whose 16 registers the 64-byte blocks overflow. The
 * tests ask it too, to know which path a layer takes. */
static inline int ladle__simd_width(void)
{
#if defined(LADLE_NO_CLONES) && defined(__AVX2__) && !defined(__AVX512F__)
    return 32;
#elif defined(LADLE_NO_CLONES)
    return 64;
#else
    return LADLE_RUNS_V4() ? 64 : LADLE_RUNS_V3() ? 32 : 0;
#endif
}

#endif /* LADLE_SIMD_H */
