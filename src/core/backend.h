/*
 * The compute backend: a table of kernels, one per device. Every kernel ladle
 * runs on tensor data goes through this table, so a device backend replaces
 * slots without touching the callers. The CPU backend fills every slot; the
 * table is append-only.
 */
#ifndef LADLE_BACKEND_H
#define LADLE_BACKEND_H

#include "src/core/internal.h"

/* What a box kernel does with each element pair. */
typedef enum ladle_box_mode {
    LADLE_BOX_COPY = 0, /* dst = src */
    LADLE_BOX_ADD = 1,  /* dst += src */
    LADLE_BOX_ZERO = 2  /* dst = 0 (src unused) */
} ladle_box_mode;

typedef struct ladle_backend {
    const char *name;
    ladle_device device;
    /* Memory that is zeroed (and so touched) before it is returned. */
    void *(*alloc)(size_t bytes);
    void (*free)(void *ptr);
    /* Contiguous copy of n elements (memmove semantics). */
    void (*copy)(ladle_dtype dtype, int64_t n, const void *src, void *dst);
    /* A box of extents ext[0..ndim-1] read with strides sstr from src and
     * written with strides dstr into dst (strides in elements). */
    void (*copy_box)(ladle_dtype dtype, ladle_box_mode mode, int ndim, const int64_t *ext,
                     const void *src, const int64_t *sstr, void *dst, const int64_t *dstr);
    /* Gather a strided box into contiguous dst, and scatter (or add)
     * contiguous src into a strided box. */
    void (*pack)(ladle_dtype dtype, int ndim, const int64_t *ext, const void *src,
                 const int64_t *sstr, void *dst);
    void (*unpack)(ladle_dtype dtype, ladle_box_mode mode, int ndim, const int64_t *ext,
                   const void *src, void *dst, const int64_t *dstr);
    /* c = a + b, elementwise over n elements (c may alias a or b). */
    void (*add)(ladle_dtype dtype, int64_t n, const void *a, const void *b, void *c);
    /* y += alpha * x */
    void (*axpy)(ladle_dtype dtype, int64_t n, double alpha, const void *x, void *y);
    /* sum of x[i] * y[i], accumulated in double */
    double (*dot)(ladle_dtype dtype, int64_t n, const void *x, const void *y);
    /* the same sum as an unevaluated pair (hi, lo): hi + lo carries about
     * twice double precision */
    void (*dot2)(ladle_dtype dtype, int64_t n, const void *x, const void *y, double out[2]);
    /* x[i] = value */
    void (*fill)(ladle_dtype dtype, int64_t n, double value, void *x);
    /* C = alpha op(A) op(B) + beta C, row-major, op = transpose if trans_* */
    void (*gemm)(ladle_dtype dtype, int trans_a, int trans_b, int64_t m, int64_t n,
                 int64_t k, double alpha, const void *a, int64_t lda, const void *b,
                 int64_t ldb, double beta, void *c, int64_t ldc);
} ladle_backend;

/* The backend for a device, or NULL if ladle was built without it. */
const ladle_backend *ladle__backend(ladle_device device);

extern const ladle_backend ladle__cpu_backend;

#endif /* LADLE_BACKEND_H */
