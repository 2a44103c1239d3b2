/*
 * The CPU backend's slots, one file per kernel family, gathered into the
 * table by cpu.c. They are the reference every other backend is tested
 * against, and the guarded test device runs them behind its fence. Never
 * included outside src/backends/.
 */
#ifndef LADLE_BACKEND_CPU_H
#define LADLE_BACKEND_CPU_H

#include "src/core/backend.h"

extern const ladle_backend_table ladle__cpu_table;

/* memory.c */
ladle_status ladle__cpu_alloc(const ladle_backend *be, size_t bytes, void **out);
ladle_status ladle__cpu_free(const ladle_backend *be, void *ptr);
ladle_status ladle__cpu_to_device(const ladle_backend *be, size_t bytes, const void *host,
                                  void *dst);
ladle_status ladle__cpu_to_host(const ladle_backend *be, size_t bytes, const void *src,
                                void *host);
ladle_status ladle__cpu_synchronize(const ladle_backend *be);

/* box.c */
ladle_status ladle__cpu_copy(const ladle_backend *be, ladle_dtype dtype, int64_t n,
                             const void *src, void *dst);
ladle_status ladle__cpu_copy_box(const ladle_backend *be, ladle_dtype dtype,
                                 ladle_box_mode mode, int ndim, const int64_t *ext,
                                 const void *src, const int64_t *sstr, void *dst,
                                 const int64_t *dstr);
ladle_status ladle__cpu_pack(const ladle_backend *be, ladle_dtype dtype, int ndim,
                             const int64_t *ext, const void *src, const int64_t *sstr,
                             void *dst);
ladle_status ladle__cpu_unpack(const ladle_backend *be, ladle_dtype dtype,
                               ladle_box_mode mode, int ndim, const int64_t *ext,
                               const void *src, void *dst, const int64_t *dstr);

/* blas.c */
ladle_status ladle__cpu_add(const ladle_backend *be, ladle_dtype dtype, int64_t n,
                            const void *a, const void *b, void *c);
ladle_status ladle__cpu_axpy(const ladle_backend *be, ladle_dtype dtype, int64_t n,
                             double alpha, const void *x, void *y);
ladle_status ladle__cpu_fill(const ladle_backend *be, ladle_dtype dtype, int64_t n,
                             double value, void *x);
ladle_status ladle__cpu_dot2(const ladle_backend *be, ladle_dtype dtype, int64_t n,
                             const void *x, const void *y, double out[2]);
ladle_status ladle__cpu_gemm(const ladle_backend *be, ladle_dtype dtype, int trans_a,
                             int trans_b, int64_t m, int64_t n, int64_t k, double alpha,
                             const void *a, int64_t lda, const void *b, int64_t ldb,
                             double beta, void *c, int64_t ldc);

/* random.c */
ladle_status ladle__cpu_fill_random(const ladle_backend *be, ladle_dtype dtype, int ndim,
                                    const int64_t *shape, const int64_t *strides,
                                    uint64_t seed, uint64_t stream, void *x);

/* activation.c, softmax.c: activations and softmax */

/* loss.c: losses */

/* dropout.c: dropout */

/* batchnorm.c: batch norm */

/* pool.c, pool_direct.c: pooling */
ladle_status ladle__cpu_pool_plan(const ladle_backend *be, ladle_dtype dtype,
                                  const ladle_pool_geom *g, size_t *ws_bytes,
                                  size_t *saved_bytes);
ladle_status ladle__cpu_pool_setup(const ladle_backend *be, ladle_dtype dtype,
                                   const ladle_pool_geom *g, void *ws);
ladle_status ladle__cpu_pool_forward(const ladle_backend *be, ladle_dtype dtype,
                                     const ladle_pool_geom *g, int64_t planes, const void *x,
                                     void *y, void *saved, void *ws);
ladle_status ladle__cpu_pool_backward(const ladle_backend *be, ladle_dtype dtype,
                                      const ladle_pool_geom *g, int64_t planes,
                                      const void *dy, void *dx, const void *saved, void *ws);

/* conv.c: convolution: im2col, the wide path, bias */

/* optim.c: optimizer updates */

#endif /* LADLE_BACKEND_CPU_H */
