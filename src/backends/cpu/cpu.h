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
ladle_status ladle__cpu_scal(const ladle_backend *be, ladle_dtype dtype, int64_t n,
                             double alpha, void *x);
ladle_status ladle__cpu_abs_max(const ladle_backend *be, ladle_dtype dtype, int64_t n,
                                const void *x, double *out);
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
ladle_status ladle__cpu_fill_init(const ladle_backend *be, ladle_dtype dtype,
                                  const ladle_init_desc *d, void *x);

/* activation.c, softmax.c: activations and softmax */
ladle_status ladle__cpu_act_forward(const ladle_backend *be, ladle_dtype dtype,
                                   ladle_activation kind, double slope, int64_t n,
                                   const void *x, void *y);
ladle_status ladle__cpu_act_backward(const ladle_backend *be, ladle_dtype dtype,
                                    ladle_activation kind, double slope, int64_t n,
                                    const void *x, const void *y, const void *dy, void *dx);
ladle_status ladle__cpu_softmax_forward(const ladle_backend *be, ladle_dtype dtype, int log,
                                       int64_t outer, int64_t len, int64_t inner,
                                       const void *x, void *y);
ladle_status ladle__cpu_softmax_backward(const ladle_backend *be, ladle_dtype dtype, int log,
                                        int64_t outer, int64_t len, int64_t inner,
                                        const void *y, const void *dy, void *dx);

/* loss.c: losses */
ladle_status ladle__cpu_loss_forward(const ladle_backend *be, ladle_dtype dtype,
                                    const ladle_loss_plan *l, const void *x,
                                    const void *target, void *out);
ladle_status ladle__cpu_loss_backward(const ladle_backend *be, ladle_dtype dtype,
                                     const ladle_loss_plan *l, const void *x,
                                     const void *target, const void *dloss, void *dx);
ladle_status ladle__cpu_find_outside(const ladle_backend *be, int64_t n, const int64_t *v,
                                    int64_t lo, int64_t hi, int64_t *first);
ladle_status ladle__cpu_find_non_finite(const ladle_backend *be, ladle_dtype dtype, int64_t n,
                                       const void *x, int64_t *first);
ladle_status ladle__cpu_adaptive_pool_forward(const ladle_backend *be, ladle_dtype dtype,
                                              const ladle_adaptive_geom *g, int64_t planes,
                                              const void *x, void *y);
ladle_status ladle__cpu_adaptive_pool_backward(const ladle_backend *be, ladle_dtype dtype,
                                               const ladle_adaptive_geom *g, int64_t planes,
                                               const void *dy, void *dx);
ladle_status ladle__cpu_lse_rows(const ladle_backend *be, ladle_dtype dtype, int64_t rows,
                                 int64_t len, const void *x, double *lse);
ladle_status ladle__cpu_exp_rows(const ladle_backend *be, ladle_dtype dtype, int64_t rows,
                                 int64_t len, const void *x, const double *shift,
                                 const double *scale, void *y);
ladle_status ladle__cpu_loss_weight_sum(const ladle_backend *be, const ladle_loss_plan *l,
                                        int64_t n, const int64_t *labels, double *sum,
                                        int64_t *first);

/* dropout.c: dropout */
ladle_status ladle__cpu_dropout(const ladle_backend *be, ladle_dtype dtype, int64_t n, double p,
                               uint64_t seed, uint64_t step, int64_t offset, const void *in,
                               void *out);

/* batchnorm.c: batch norm */
ladle_status ladle__cpu_bn_moment(const ladle_backend *be, ladle_dtype dtype, int64_t n,
                                  int64_t c, int64_t inner, const void *x, const double *mean,
                                  double *s);
ladle_status ladle__cpu_bn_dsums(const ladle_backend *be, ladle_dtype dtype, int64_t n,
                                 int64_t c, int64_t inner, const void *x, const void *dy,
                                 const double *mean, double *s1, double *s2);
ladle_status ladle__cpu_bn_affine(const ladle_backend *be, ladle_dtype dtype, int64_t n,
                                  int64_t c, int64_t inner, const void *u, const void *w,
                                  void *out, const double *a, const double *b,
                                  const double *k);

/* interp.c: interpolation */
ladle_status ladle__cpu_interp_forward(const ladle_backend *be, ladle_dtype dtype,
                                       const ladle_interp_geom *g, int64_t planes,
                                       const void *x, void *y);
ladle_status ladle__cpu_interp_backward(const ladle_backend *be, ladle_dtype dtype,
                                        const ladle_interp_geom *g, int64_t planes,
                                        const void *dy, void *dx);

/* norm.c: layer norm, RMS norm, the token embedding */
ladle_status ladle__cpu_norm_forward(const ladle_backend *be, ladle_dtype dtype, int rms,
                                     int64_t rows, int64_t len, double eps, const void *x,
                                     const void *w, const void *b, void *y, double *mean,
                                     double *invstd);
ladle_status ladle__cpu_norm_backward(const ladle_backend *be, ladle_dtype dtype, int rms,
                                      int64_t rows, int64_t len, const void *x, const void *w,
                                      const void *dy, const double *mean,
                                      const double *invstd, void *dx);
ladle_status ladle__cpu_norm_weight_grad(const ladle_backend *be, ladle_dtype dtype, int rms,
                                         int64_t rows, int64_t len, const void *x,
                                         const void *dy, const double *mean,
                                         const double *invstd, void *dw, void *db, double *ws);
ladle_status ladle__cpu_embed_forward(const ladle_backend *be, ladle_dtype dtype, int64_t n,
                                      int64_t dim, const int64_t *ids, const void *w, void *y);
ladle_status ladle__cpu_embed_backward(const ladle_backend *be, ladle_dtype dtype, int64_t n,
                                       int64_t dim, const int64_t *ids, const void *dy,
                                       void *dw);

/* attention.c: multi-head attention, tiled */
ladle_status ladle__cpu_attn_forward(const ladle_backend *be, ladle_dtype dtype,
                                     const ladle_attn_geom *g, const void *qkv, void *o,
                                     double *lse, double *ws);
ladle_status ladle__cpu_attn_backward(const ladle_backend *be, ladle_dtype dtype,
                                      const ladle_attn_geom *g, const void *qkv, const void *o,
                                      const double *lse, const void *dout, void *dqkv,
                                      double *ws);

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
ladle_status ladle__cpu_conv_im2col(const ladle_backend *be, ladle_dtype dtype,
                                    const ladle_conv_geom *geom, int64_t nb, const void *x,
                                    int64_t x_stride, void *col, int64_t ld, void *planes);
ladle_status ladle__cpu_conv_col2im(const ladle_backend *be, ladle_dtype dtype,
                                    const ladle_conv_geom *geom, int64_t nb, const void *col,
                                    int64_t ld, void *dx, int64_t dx_stride, void *planes);
ladle_status ladle__cpu_conv_wide_im2col(const ladle_backend *be, ladle_dtype dtype,
                                         const ladle_conv_geom *geom, int64_t nb,
                                         const void *x, int64_t x_stride, void *xpad,
                                         void *col, int64_t ld);
ladle_status ladle__cpu_conv_wide_grid(const ladle_backend *be, ladle_dtype dtype,
                                       const ladle_conv_geom *geom, int to_tensor, int64_t nb,
                                       void *grid, int64_t ld, void *t, int64_t t_stride);
ladle_status ladle__cpu_conv_direct_plan(const ladle_backend *be, ladle_dtype dtype,
                                         const ladle_conv_geom *geom, int *forward,
                                         int *weight, int *backward, int64_t *scratch,
                                         int64_t *sums);
ladle_status ladle__cpu_conv_direct_forward(const ladle_backend *be, ladle_dtype dtype,
                                            const ladle_conv_geom *geom, int64_t nb,
                                            const void *x, int64_t x_stride, const void *w,
                                            const void *b, void *scratch, void *y,
                                            int64_t y_stride, int variant);
ladle_status ladle__cpu_conv_direct_weight(const ladle_backend *be, ladle_dtype dtype,
                                           const ladle_conv_geom *geom, int64_t nb,
                                           const void *x, int64_t x_stride, const void *dy,
                                           int64_t dy_stride, void *scratch, double *ws,
                                           void *dw, int variant);
ladle_status ladle__cpu_conv_direct_backward(const ladle_backend *be, ladle_dtype dtype,
                                             const ladle_conv_geom *geom, int64_t nb,
                                             const void *dy, int64_t dy_stride,
                                             const void *w, void *scratch, void *dx,
                                             int64_t dx_stride, int variant);
ladle_status ladle__cpu_bias_add(const ladle_backend *be, ladle_dtype dtype, int64_t rows,
                                 int64_t channels, int64_t inner, const void *b, void *y);
ladle_status ladle__cpu_bias_grad(const ladle_backend *be, ladle_dtype dtype, int64_t rows,
                                  int64_t channels, int64_t inner, const void *dy, void *db);

/* optim.c: optimizer updates */
ladle_status ladle__cpu_optim_step(const ladle_backend *be, ladle_dtype dtype,
                                  const ladle_optimizer_desc *d, int64_t t, int64_t n, void *p,
                                  const void *g, void *s0, void *s1);

#endif /* LADLE_BACKEND_CPU_H */
