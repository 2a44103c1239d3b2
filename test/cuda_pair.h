/*
 * The CUDA backend's slots against the CPU backend's, the oracle: helpers
 * for the test_cuda* programs, which run where the CUDA backend is built
 * (make CUDA=emu in make check, make CUDA=1 on a GPU machine) with
 * LADLE_TEST_DEVICE=cuda. A case makes random host data, runs a slot on
 * the CPU backend over host copies and on the CUDA backend over device
 * copies, brings the device's result back and compares.
 *
 * Tolerances: f64 results agree to about 1e-12 relative (the two backends
 * sum in different orders, and the GPU contracts a * b + c into one fused
 * multiply-add where the CPU may not); f32 ones to a bound each case
 * derives from its arithmetic and writes down (an element-wise op within a
 * few units in the last place, a sum of n terms within about n * 2^-24 of
 * its magnitude).
 */
#ifndef LADLE_TEST_CUDA_PAIR_H
#define LADLE_TEST_CUDA_PAIR_H

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "src/core/backend.h"
#include "src/core/random.h"
#include "harness.h"

/* The two backends. */
static inline const ladle_backend *cp_cpu(void) { return ladle__backend(LADLE_CPU); }
static inline const ladle_backend *cp_gpu(void)
{
    const ladle_backend *be = NULL;
    ladle_status st = ladle__backend_get(LADLE_CUDA, "cp_gpu", &be);
    if (st != LADLE_OK) {
        fprintf(stderr, "no CUDA backend: %s\n", ladle_error_message());
        MPI_Abort(MPI_COMM_WORLD, 1);
    }
    return be;
}

/* Run a slot on each backend, asserting success (collective). */
#define CP_CPU(slot, ...) LT_OK(cp_cpu()->fn->slot(cp_cpu(), __VA_ARGS__))
#define CP_GPU(slot, ...) LT_OK(cp_gpu()->fn->slot(cp_gpu(), __VA_ARGS__))

static inline size_t cp_size(ladle_dtype dtype) { return ladle_dtype_size(dtype); }

/* Element i of a host buffer of dtype (f32 or f64) as a double, and
 * setting it. */
static inline double cp_get(ladle_dtype dtype, const void *p, int64_t i)
{
    return dtype == LADLE_F32 ? ((const float *)p)[i] : ((const double *)p)[i];
}

static inline void cp_set(ladle_dtype dtype, void *p, int64_t i, double v)
{
    if (dtype == LADLE_F32)
        ((float *)p)[i] = (float)v;
    else
        ((double *)p)[i] = v;
}

/* Host memory for n elements, zeroed. */
static inline void *cp_host(ladle_dtype dtype, int64_t n)
{
    void *p = calloc((size_t)(n > 0 ? n : 1), cp_size(dtype));
    if (p == NULL)
        MPI_Abort(MPI_COMM_WORLD, 1);
    return p;
}

/* n values uniform in [lo, hi) (f32, f64) from seed. */
static inline void *cp_random(ladle_dtype dtype, int64_t n, double lo, double hi, uint64_t seed)
{
    void *p = cp_host(dtype, n);
    for (int64_t i = 0; i < n; i++) {
        double u = 0.5 * (ladle__rng_uniform(seed, 77, (uint64_t)i) + 1.0);
        double v = lo + (hi - lo) * u;
        if (dtype == LADLE_F32)
            ((float *)p)[i] = (float)v;
        else
            ((double *)p)[i] = v;
    }
    return p;
}

/* A copy of n host elements (for the CPU side of a case that writes). */
static inline void *cp_clone(ladle_dtype dtype, int64_t n, const void *host)
{
    void *p = cp_host(dtype, n);
    memcpy(p, host, (size_t)n * cp_size(dtype));
    return p;
}

/* Device memory holding n elements copied from host (zeros when host is
 * NULL); waits for the copy. */
static inline void *cp_upload(ladle_dtype dtype, int64_t n, const void *host)
{
    void *d = NULL;
    size_t bytes = (size_t)(n > 0 ? n : 1) * cp_size(dtype);
    CP_GPU(alloc, bytes, &d);
    if (host != NULL && n > 0) {
        CP_GPU(to_device, (size_t)n * cp_size(dtype), host, d);
        LT_OK(cp_gpu()->fn->synchronize(cp_gpu())); /* CP_GPU needs an argument */
    }
    return d;
}

/* n elements of device memory into new host memory (waits). */
static inline void *cp_download(ladle_dtype dtype, int64_t n, const void *dev)
{
    void *h = cp_host(dtype, n);
    if (n > 0) {
        CP_GPU(to_host, (size_t)n * cp_size(dtype), dev, h);
        LT_OK(cp_gpu()->fn->synchronize(cp_gpu())); /* CP_GPU needs an argument */
    }
    return h;
}

static inline void cp_free(void *dev) { CP_GPU(free, dev); }

/* A case's end: its device buffers (NULL skipped) and host ones freed. */
static inline void cp_release(size_t nd, void *const *dev, size_t nh, void *const *host)
{
    for (size_t i = 0; i < nd; i++)
        if (dev[i] != NULL)
            cp_free(dev[i]);
    for (size_t i = 0; i < nh; i++)
        free(host[i]);
}
#define CP_RELEASE(dev, host)                                                              \
    cp_release(sizeof(dev) / sizeof(dev)[0], dev, sizeof(host) / sizeof(host)[0], host)

/* The two dtypes a case runs in (k = 0: f32, 1: f64), and its tolerance:
 * 1e-12 for f64, the case's own bound f32 for f32. */
static inline ladle_dtype cp_dtype(int k) { return k ? LADLE_F64 : LADLE_F32; }
static inline double cp_tol(ladle_dtype dtype, double f32)
{
    return dtype == LADLE_F64 ? 1e-12 : f32;
}

/* The largest |a[i] - b[i]| / (1 + |b[i]|), b the oracle; NaN where one is
 * NaN and the other not (two NaNs, or two equal infinities, agree). */
static inline double cp_error(ladle_dtype dtype, int64_t n, const void *a, const void *b)
{
    double worst = 0.0;
    for (int64_t i = 0; i < n; i++) {
        double x = dtype == LADLE_F32 ? ((const float *)a)[i] : ((const double *)a)[i];
        double y = dtype == LADLE_F32 ? ((const float *)b)[i] : ((const double *)b)[i];
        if (isnan(x) || isnan(y)) {
            if (!(isnan(x) && isnan(y)))
                return NAN;
            continue;
        }
        if (isinf(x) || isinf(y)) {
            if (x != y)
                return INFINITY;
            continue;
        }
        double e = fabs(x - y) / (1.0 + fabs(y));
        if (e > worst)
            worst = e;
    }
    return worst;
}

/* Assert (collectively) that n elements of device memory equal the
 * oracle's host ones to tol; what names the case in the message. */
#define CP_CLOSE(dtype, n, dev, oracle, tol, what)                                         \
    do {                                                                                   \
        void *got_ = cp_download((dtype), (n), (dev));                                     \
        double err_ = cp_error((dtype), (n), got_, (oracle));                              \
        free(got_);                                                                        \
        LT_ASSERT(err_ <= (tol), "%s (%s): error %.3e, tolerance %.1e", (what),            \
                  ladle_dtype_name(dtype), err_, (double)(tol));                           \
    } while (0)

#endif /* LADLE_TEST_CUDA_PAIR_H */
