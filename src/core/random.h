/*
 * Counter-based random numbers, the specification every backend's random
 * slots reproduce: a well-mixed 64-bit value of (seed, stream, counter),
 * the uniform double in [-1, 1) made from its top 53 bits, and a standard
 * normal value by Box-Muller from the uniforms of counters 2 counter and
 * 2 counter + 1. Defined here, inline, so that host code (through the
 * ladle__random_* functions of internal.h) and device kernels compute the
 * same values: the uniform bit for bit everywhere, the normal to the
 * rounding of the device's log, sqrt and cos.
 */
#ifndef LADLE_RANDOM_H
#define LADLE_RANDOM_H

#include <math.h>
#include <stdint.h>

#if defined(__CUDACC__) || defined(LADLE_CUDA_EMU)
#define LADLE_HD __host__ __device__
#else
#define LADLE_HD
#endif

/* splitmix64's finaliser: a bijective mix with full avalanche. */
static inline LADLE_HD uint64_t ladle__rng_mix(uint64_t z)
{
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

/* The value is in two steps: a key of (seed, stream), then the key's value
 * at a counter, so that a loop over counters mixes its key once. */
static inline LADLE_HD uint64_t ladle__rng_key(uint64_t seed, uint64_t stream)
{
    uint64_t k = ladle__rng_mix(seed + 0x9e3779b97f4a7c15ull);
    return ladle__rng_mix(k ^ (stream * 0xd1b54a32d192ed03ull + 0x8cb92ba72f3d8dd7ull));
}

static inline LADLE_HD uint64_t ladle__rng_at(uint64_t key, uint64_t counter)
{
    return ladle__rng_mix(key ^ (counter * 0x9e3779b97f4a7c15ull));
}

static inline LADLE_HD uint64_t ladle__rng_bits(uint64_t seed, uint64_t stream,
                                                uint64_t counter)
{
    return ladle__rng_at(ladle__rng_key(seed, stream), counter);
}

static inline LADLE_HD double ladle__rng_uniform(uint64_t seed, uint64_t stream,
                                                 uint64_t counter)
{
    /* 53 random bits -> [0, 1) -> [-1, 1); both steps are exact */
    double u = (double)(ladle__rng_bits(seed, stream, counter) >> 11) * 0x1.0p-53;
    return 2.0 * u - 1.0;
}

static inline LADLE_HD double ladle__rng_normal(uint64_t seed, uint64_t stream,
                                                uint64_t counter)
{
    /* the uniforms moved to [0, 1), the first kept off 0 for the log */
    double u1 = 0.5 * (ladle__rng_uniform(seed, stream, 2 * counter) + 1.0);
    double u2 = 0.5 * (ladle__rng_uniform(seed, stream, 2 * counter + 1) + 1.0);
    if (u1 < 1e-300)
        u1 = 1e-300;
    return sqrt(-2.0 * log(u1)) * cos(6.283185307179586 * u2);
}

#endif /* LADLE_RANDOM_H */
