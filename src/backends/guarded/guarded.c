/*
 * The guarded test device (LADLE_GUARDED): the CPU's kernels behind a
 * fence. Its memory is host memory, but the instance says that neither host
 * code nor MPI may touch it (host_access and mpi_access 0), so everything
 * ladle does with it goes the way it must go on a GPU: through the slots,
 * with messages staged and scalars fetched by to_host.
 *
 * Under AddressSanitizer the fence is real: every block is poisoned (ASan's
 * manual poisoning interface) except while one of the device's own slots
 * runs, and a slot opens only the blocks its pointer arguments fall in. A
 * read or write of device memory anywhere else is reported as a
 * use-after-poison and fails `make asan`. Without ASan the device still
 * runs every path a device without host access takes.
 *
 * The device keeps a registry of its blocks, sorted by address, so that a
 * slot can find the block of any pointer into it. Like a GPU driver's
 * allocator it is process-wide state of the device, guarded by a mutex; it
 * is the one piece of mutable state outside ladle's objects, and it exists
 * only in this test device.
 */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "src/backends/cpu/cpu.h"

#if defined(__SANITIZE_ADDRESS__)
#define GUARD_POISON 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define GUARD_POISON 1
#endif
#endif

#ifdef GUARD_POISON
#include <sanitizer/asan_interface.h>
#define POISON(p, n) ASAN_POISON_MEMORY_REGION(p, n)
#define UNPOISON(p, n) ASAN_UNPOISON_MEMORY_REGION(p, n)
#else
#define POISON(p, n) ((void)(p), (void)(n))
#define UNPOISON(p, n) ((void)(p), (void)(n))
#endif

typedef struct block {
    char *base;
    size_t bytes;
    int open; /* slots running on it now (nested calls, threads) */
} block;

typedef struct registry {
    pthread_mutex_t lock;
    block *blocks;
    int n, cap;
} registry;

static registry reg = {PTHREAD_MUTEX_INITIALIZER, NULL, 0, 0};

/* The block holding p, or -1 (memory the device did not allocate: a
 * wrapped host buffer, a NULL pointer). Called with the lock held. */
static int find(const void *p)
{
    const char *c = p;
    int lo = 0, hi = reg.n - 1;
    while (lo <= hi) {
        int mid = lo + (hi - lo) / 2;
        const block *b = &reg.blocks[mid];
        if (c < b->base)
            hi = mid - 1;
        else if (c >= b->base + (b->bytes ? b->bytes : 1))
            lo = mid + 1;
        else
            return mid;
    }
    return -1;
}

#define MAX_ARGS 8

/* The blocks one slot call opened, to close them again. */
typedef struct fence {
    char *base[MAX_ARGS];
    int n;
} fence;

static void fence_open(fence *f, int n, const void *const *ptrs)
{
    f->n = 0;
    pthread_mutex_lock(&reg.lock);
    for (int i = 0; i < n; i++) {
        int k = ptrs[i] != NULL ? find(ptrs[i]) : -1;
        if (k < 0)
            continue;
        block *b = &reg.blocks[k];
        if (b->open++ == 0)
            UNPOISON(b->base, b->bytes);
        f->base[f->n++] = b->base;
    }
    pthread_mutex_unlock(&reg.lock);
}

static void fence_close(const fence *f)
{
    pthread_mutex_lock(&reg.lock);
    for (int i = 0; i < f->n; i++) {
        int k = find(f->base[i]);
        if (k >= 0 && --reg.blocks[k].open == 0)
            POISON(reg.blocks[k].base, reg.blocks[k].bytes);
    }
    pthread_mutex_unlock(&reg.lock);
}

/* Run `call` (a CPU slot on the CPU instance) with the blocks of the
 * listed pointers open. */
#define FENCED(call, ...)                                                                  \
    do {                                                                                   \
        const void *const ptrs_[] = {__VA_ARGS__};                                         \
        fence f_;                                                                          \
        fence_open(&f_, (int)(sizeof ptrs_ / sizeof ptrs_[0]), ptrs_);                     \
        ladle_status st_ = (call);                                                         \
        fence_close(&f_);                                                                  \
        return st_;                                                                        \
    } while (0)

extern const ladle_backend ladle__cpu_backend;
#define CPU (&ladle__cpu_backend)

/* ---- memory ---- */

static ladle_status g_alloc(const ladle_backend *be, size_t bytes, void **out)
{
    (void)be;
    *out = NULL;
    if (bytes == 0)
        return LADLE_OK;
    size_t padded = (bytes + 63) / 64 * 64;
    char *p = NULL;
    if (padded < bytes || posix_memalign((void **)&p, 64, padded) != 0)
        return ladle__raise(LADLE_ERR_ALLOC, "guarded", "cannot allocate %zu bytes", bytes);
    memset(p, 0, padded);
    pthread_mutex_lock(&reg.lock);
    if (reg.n == reg.cap) {
        int cap = reg.cap ? 2 * reg.cap : 256;
        block *nb = realloc(reg.blocks, sizeof(block) * (size_t)cap);
        if (nb == NULL) {
            pthread_mutex_unlock(&reg.lock);
            free(p);
            return ladle__raise(LADLE_ERR_ALLOC, "guarded", "cannot grow the block registry");
        }
        reg.blocks = nb;
        reg.cap = cap;
    }
    int at = reg.n;
    while (at > 0 && reg.blocks[at - 1].base > p)
        at--;
    memmove(&reg.blocks[at + 1], &reg.blocks[at], sizeof(block) * (size_t)(reg.n - at));
    reg.blocks[at] = (block){p, padded, 0};
    reg.n++;
    POISON(p, padded);
    pthread_mutex_unlock(&reg.lock);
    *out = p;
    return LADLE_OK;
}

static ladle_status g_free(const ladle_backend *be, void *ptr)
{
    (void)be;
    if (ptr == NULL)
        return LADLE_OK;
    pthread_mutex_lock(&reg.lock);
    int k = find(ptr);
    if (k < 0 || reg.blocks[k].base != ptr) {
        pthread_mutex_unlock(&reg.lock);
        return ladle__raise(LADLE_ERR_INTERNAL, "guarded", "free of %p, not a block", ptr);
    }
    UNPOISON(reg.blocks[k].base, reg.blocks[k].bytes);
    memmove(&reg.blocks[k], &reg.blocks[k + 1], sizeof(block) * (size_t)(reg.n - k - 1));
    reg.n--;
    if (reg.n == 0) { /* the last block: the registry goes too (no leak at exit) */
        free(reg.blocks);
        reg.blocks = NULL;
        reg.cap = 0;
    }
    pthread_mutex_unlock(&reg.lock);
    free(ptr);
    return LADLE_OK;
}

static ladle_status g_to_device(const ladle_backend *be, size_t bytes, const void *host,
                                void *dst)
{
    FENCED(ladle__cpu_to_device(CPU, bytes, host, dst), host, dst);
}

static ladle_status g_to_host(const ladle_backend *be, size_t bytes, const void *src,
                              void *host)
{
    FENCED(ladle__cpu_to_host(CPU, bytes, src, host), src, host);
}

static ladle_status g_synchronize(const ladle_backend *be)
{
    return ladle__cpu_synchronize(CPU);
}

/* ---- copies and boxes ---- */

static ladle_status g_copy(const ladle_backend *be, ladle_dtype dtype, int64_t n,
                           const void *src, void *dst)
{
    FENCED(ladle__cpu_copy(CPU, dtype, n, src, dst), src, dst);
}

static ladle_status g_copy_box(const ladle_backend *be, ladle_dtype dtype, ladle_box_mode mode,
                               int ndim, const int64_t *ext, const void *src,
                               const int64_t *sstr, void *dst, const int64_t *dstr)
{
    FENCED(ladle__cpu_copy_box(CPU, dtype, mode, ndim, ext, src, sstr, dst, dstr), src, dst);
}

static ladle_status g_pack(const ladle_backend *be, ladle_dtype dtype, int ndim,
                           const int64_t *ext, const void *src, const int64_t *sstr, void *dst)
{
    FENCED(ladle__cpu_pack(CPU, dtype, ndim, ext, src, sstr, dst), src, dst);
}

static ladle_status g_unpack(const ladle_backend *be, ladle_dtype dtype, ladle_box_mode mode,
                             int ndim, const int64_t *ext, const void *src, void *dst,
                             const int64_t *dstr)
{
    FENCED(ladle__cpu_unpack(CPU, dtype, mode, ndim, ext, src, dst, dstr), src, dst);
}

/* ---- vectors ---- */

static ladle_status g_add(const ladle_backend *be, ladle_dtype dtype, int64_t n, const void *a,
                          const void *b, void *c)
{
    FENCED(ladle__cpu_add(CPU, dtype, n, a, b, c), a, b, c);
}

static ladle_status g_axpy(const ladle_backend *be, ladle_dtype dtype, int64_t n, double alpha,
                           const void *x, void *y)
{
    FENCED(ladle__cpu_axpy(CPU, dtype, n, alpha, x, y), x, y);
}

static ladle_status g_dot2(const ladle_backend *be, ladle_dtype dtype, int64_t n, const void *x,
                           const void *y, double out[2])
{
    FENCED(ladle__cpu_dot2(CPU, dtype, n, x, y, out), x, y);
}

static ladle_status g_scal(const ladle_backend *be, ladle_dtype dtype, int64_t n, double alpha,
                           void *x)
{
    FENCED(ladle__cpu_scal(CPU, dtype, n, alpha, x), x);
}

static ladle_status g_abs_max(const ladle_backend *be, ladle_dtype dtype, int64_t n,
                              const void *x, double *out)
{
    FENCED(ladle__cpu_abs_max(CPU, dtype, n, x, out), x);
}

static ladle_status g_fill(const ladle_backend *be, ladle_dtype dtype, int64_t n, double value,
                           void *x)
{
    FENCED(ladle__cpu_fill(CPU, dtype, n, value, x), x);
}

/* ---- random fills ---- */

static ladle_status g_fill_random(const ladle_backend *be, ladle_dtype dtype, int ndim,
                                  const int64_t *shape, const int64_t *strides, uint64_t seed,
                                  uint64_t stream, void *x)
{
    FENCED(ladle__cpu_fill_random(CPU, dtype, ndim, shape, strides, seed, stream, x), x);
}

static ladle_status g_fill_init(const ladle_backend *be, ladle_dtype dtype,
                                const ladle_init_desc *d, void *x)
{
    FENCED(ladle__cpu_fill_init(CPU, dtype, d, x), x);
}

/* ---- dense linear algebra ---- */

static ladle_status g_gemm(const ladle_backend *be, ladle_dtype dtype, int trans_a, int trans_b,
                           int64_t m, int64_t n, int64_t k, double alpha, const void *a,
                           int64_t lda, const void *b, int64_t ldb, double beta, void *c,
                           int64_t ldc)
{
    FENCED(ladle__cpu_gemm(CPU, dtype, trans_a, trans_b, m, n, k, alpha, a, lda, b, ldb, beta,
                           c, ldc),
           a, b, c);
}

/* ---- activations and softmax ---- */

static ladle_status g_act_forward(const ladle_backend *be, ladle_dtype dtype,
                                  ladle_activation kind, double slope, int64_t n, const void *x,
                                  void *y)
{
    FENCED(ladle__cpu_act_forward(CPU, dtype, kind, slope, n, x, y), x, y);
}

static ladle_status g_act_backward(const ladle_backend *be, ladle_dtype dtype,
                                   ladle_activation kind, double slope, int64_t n,
                                   const void *x, const void *y, const void *dy, void *dx)
{
    FENCED(ladle__cpu_act_backward(CPU, dtype, kind, slope, n, x, y, dy, dx), x, y, dy, dx);
}

static ladle_status g_softmax_forward(const ladle_backend *be, ladle_dtype dtype, int log,
                                      int64_t outer, int64_t len, int64_t inner, const void *x,
                                      void *y)
{
    FENCED(ladle__cpu_softmax_forward(CPU, dtype, log, outer, len, inner, x, y), x, y);
}

static ladle_status g_softmax_backward(const ladle_backend *be, ladle_dtype dtype, int log,
                                       int64_t outer, int64_t len, int64_t inner,
                                       const void *y, const void *dy, void *dx)
{
    FENCED(ladle__cpu_softmax_backward(CPU, dtype, log, outer, len, inner, y, dy, dx), y, dy,
           dx);
}

/* ---- losses ---- */

static ladle_status g_loss_forward(const ladle_backend *be, ladle_dtype dtype,
                                   const ladle_loss_plan *l, const void *x, const void *target,
                                   void *out)
{
    FENCED(ladle__cpu_loss_forward(CPU, dtype, l, x, target, out), x, target, out);
}

static ladle_status g_loss_backward(const ladle_backend *be, ladle_dtype dtype,
                                    const ladle_loss_plan *l, const void *x, const void *target,
                                    const void *dloss, void *dx)
{
    FENCED(ladle__cpu_loss_backward(CPU, dtype, l, x, target, dloss, dx), x, target, dloss, dx);
}

static ladle_status g_loss_weight_sum(const ladle_backend *be, const ladle_loss_plan *l,
                                      int64_t n, const int64_t *labels, double *sum,
                                      int64_t *first)
{
    FENCED(ladle__cpu_loss_weight_sum(CPU, l, n, labels, sum, first), labels);
}

static ladle_status g_lse_rows(const ladle_backend *be, ladle_dtype dtype, int64_t rows,
                               int64_t len, const void *x, double *lse)
{
    FENCED(ladle__cpu_lse_rows(CPU, dtype, rows, len, x, lse), x, lse);
}

static ladle_status g_exp_rows(const ladle_backend *be, ladle_dtype dtype, int64_t rows,
                               int64_t len, const void *x, const double *shift,
                               const double *scale, void *y)
{
    FENCED(ladle__cpu_exp_rows(CPU, dtype, rows, len, x, shift, scale, y), x, shift, scale,
           y);
}

static ladle_status g_find_outside(const ladle_backend *be, int64_t n, const int64_t *v,
                                   int64_t lo, int64_t hi, int64_t *first)
{
    FENCED(ladle__cpu_find_outside(CPU, n, v, lo, hi, first), v);
}

static ladle_status g_find_non_finite(const ladle_backend *be, ladle_dtype dtype, int64_t n,
                                      const void *x, int64_t *first)
{
    FENCED(ladle__cpu_find_non_finite(CPU, dtype, n, x, first), x);
}

/* ---- dropout ---- */

static ladle_status g_dropout(const ladle_backend *be, ladle_dtype dtype, int64_t n, double p,
                              uint64_t seed, uint64_t step, int64_t offset, const void *in,
                              void *out)
{
    FENCED(ladle__cpu_dropout(CPU, dtype, n, p, seed, step, offset, in, out), in, out);
}

/* ---- batch norm ---- */

static ladle_status g_bn_moment(const ladle_backend *be, ladle_dtype dtype, int64_t n, int64_t c,
                                int64_t inner, const void *x, const double *mean, double *s)
{
    FENCED(ladle__cpu_bn_moment(CPU, dtype, n, c, inner, x, mean, s), x, mean, s);
}

static ladle_status g_bn_dsums(const ladle_backend *be, ladle_dtype dtype, int64_t n, int64_t c,
                               int64_t inner, const void *x, const void *dy, const double *mean,
                               double *s1, double *s2)
{
    FENCED(ladle__cpu_bn_dsums(CPU, dtype, n, c, inner, x, dy, mean, s1, s2), x, dy, mean, s1,
           s2);
}

static ladle_status g_bn_affine(const ladle_backend *be, ladle_dtype dtype, int64_t n, int64_t c,
                                int64_t inner, const void *u, const void *w, void *out,
                                const double *a, const double *b, const double *k)
{
    FENCED(ladle__cpu_bn_affine(CPU, dtype, n, c, inner, u, w, out, a, b, k), u, w, out, a, b,
           k);
}

/* ---- pooling ---- */

static ladle_status g_pool_plan(const ladle_backend *be, ladle_dtype dtype,
                                const ladle_pool_geom *g, size_t *ws_bytes, size_t *saved_bytes)
{
    return ladle__cpu_pool_plan(CPU, dtype, g, ws_bytes, saved_bytes);
}

static ladle_status g_pool_setup(const ladle_backend *be, ladle_dtype dtype,
                                 const ladle_pool_geom *g, void *ws)
{
    FENCED(ladle__cpu_pool_setup(CPU, dtype, g, ws), ws);
}

static ladle_status g_pool_forward(const ladle_backend *be, ladle_dtype dtype,
                                   const ladle_pool_geom *g, int64_t planes, const void *x,
                                   void *y, void *saved, void *ws)
{
    FENCED(ladle__cpu_pool_forward(CPU, dtype, g, planes, x, y, saved, ws), x, y, saved, ws);
}

static ladle_status g_pool_backward(const ladle_backend *be, ladle_dtype dtype,
                                    const ladle_pool_geom *g, int64_t planes, const void *dy,
                                    void *dx, const void *saved, void *ws)
{
    FENCED(ladle__cpu_pool_backward(CPU, dtype, g, planes, dy, dx, saved, ws), dy, dx, saved,
           ws);
}

/* ---- adaptive pooling ---- */

static ladle_status g_adaptive_forward(const ladle_backend *be, ladle_dtype dtype,
                                       const ladle_adaptive_geom *g, int64_t planes,
                                       const void *x, void *y)
{
    FENCED(ladle__cpu_adaptive_pool_forward(CPU, dtype, g, planes, x, y), x, y);
}

static ladle_status g_adaptive_backward(const ladle_backend *be, ladle_dtype dtype,
                                        const ladle_adaptive_geom *g, int64_t planes,
                                        const void *dy, void *dx)
{
    FENCED(ladle__cpu_adaptive_pool_backward(CPU, dtype, g, planes, dy, dx), dy, dx);
}

/* ---- interpolation ---- */

static ladle_status g_interp_forward(const ladle_backend *be, ladle_dtype dtype,
                                     const ladle_interp_geom *g, int64_t planes, const void *x,
                                     void *y)
{
    FENCED(ladle__cpu_interp_forward(CPU, dtype, g, planes, x, y), x, y);
}

static ladle_status g_interp_backward(const ladle_backend *be, ladle_dtype dtype,
                                      const ladle_interp_geom *g, int64_t planes,
                                      const void *dy, void *dx)
{
    FENCED(ladle__cpu_interp_backward(CPU, dtype, g, planes, dy, dx), dy, dx);
}

/* ---- layer norm, RMS norm, the token embedding ---- */

static ladle_status g_norm_forward(const ladle_backend *be, ladle_dtype dtype, int rms,
                                   int64_t rows, int64_t len, double eps, const void *x,
                                   const void *w, const void *b, void *y, double *mean,
                                   double *invstd)
{
    FENCED(ladle__cpu_norm_forward(CPU, dtype, rms, rows, len, eps, x, w, b, y, mean, invstd),
           x, w, b, y, mean, invstd);
}

static ladle_status g_norm_backward(const ladle_backend *be, ladle_dtype dtype, int rms,
                                    int64_t rows, int64_t len, const void *x, const void *w,
                                    const void *dy, const double *mean, const double *invstd,
                                    void *dx)
{
    FENCED(ladle__cpu_norm_backward(CPU, dtype, rms, rows, len, x, w, dy, mean, invstd, dx), x,
           w, dy, mean, invstd, dx);
}

static ladle_status g_norm_weight_grad(const ladle_backend *be, ladle_dtype dtype, int rms,
                                       int64_t rows, int64_t len, const void *x, const void *dy,
                                       const double *mean, const double *invstd, void *dw,
                                       void *db, double *ws)
{
    FENCED(ladle__cpu_norm_weight_grad(CPU, dtype, rms, rows, len, x, dy, mean, invstd, dw, db,
                                       ws),
           x, dy, mean, invstd, dw, db, ws);
}

static ladle_status g_embed_forward(const ladle_backend *be, ladle_dtype dtype, int64_t n,
                                    int64_t dim, const int64_t *ids, const void *w, void *y)
{
    FENCED(ladle__cpu_embed_forward(CPU, dtype, n, dim, ids, w, y), ids, w, y);
}

static ladle_status g_embed_backward(const ladle_backend *be, ladle_dtype dtype, int64_t n,
                                     int64_t dim, const int64_t *ids, const void *dy, void *dw)
{
    FENCED(ladle__cpu_embed_backward(CPU, dtype, n, dim, ids, dy, dw), ids, dy, dw);
}

/* ---- attention ---- */

static ladle_status g_attn_forward(const ladle_backend *be, ladle_dtype dtype,
                                   const ladle_attn_geom *g, const void *qkv, void *o,
                                   double *lse, double *ws)
{
    FENCED(ladle__cpu_attn_forward(CPU, dtype, g, qkv, o, lse, ws), qkv, o, lse, ws);
}

static ladle_status g_attn_backward(const ladle_backend *be, ladle_dtype dtype,
                                    const ladle_attn_geom *g, const void *qkv, const void *o,
                                    const double *lse, const void *dout, void *dqkv,
                                    double *ws)
{
    FENCED(ladle__cpu_attn_backward(CPU, dtype, g, qkv, o, lse, dout, dqkv, ws), qkv, o, lse,
           dout, dqkv, ws);
}

/* ---- convolution ---- */

static ladle_status g_conv_im2col(const ladle_backend *be, ladle_dtype dtype,
                                  const ladle_conv_geom *geom, int64_t nb, const void *x,
                                  int64_t x_stride, void *col, int64_t ld, void *planes)
{
    FENCED(ladle__cpu_conv_im2col(CPU, dtype, geom, nb, x, x_stride, col, ld, planes), x, col,
           planes);
}

static ladle_status g_conv_col2im(const ladle_backend *be, ladle_dtype dtype,
                                  const ladle_conv_geom *geom, int64_t nb, const void *col,
                                  int64_t ld, void *dx, int64_t dx_stride, void *planes)
{
    FENCED(ladle__cpu_conv_col2im(CPU, dtype, geom, nb, col, ld, dx, dx_stride, planes), col, dx,
           planes);
}

static ladle_status g_conv_wide_im2col(const ladle_backend *be, ladle_dtype dtype,
                                       const ladle_conv_geom *geom, int64_t nb, const void *x,
                                       int64_t x_stride, void *xpad, void *col, int64_t ld)
{
    FENCED(ladle__cpu_conv_wide_im2col(CPU, dtype, geom, nb, x, x_stride, xpad, col, ld), x,
           xpad, col);
}

static ladle_status g_conv_wide_grid(const ladle_backend *be, ladle_dtype dtype,
                                     const ladle_conv_geom *geom, int to_tensor, int64_t nb,
                                     void *grid, int64_t ld, void *t, int64_t t_stride)
{
    FENCED(ladle__cpu_conv_wide_grid(CPU, dtype, geom, to_tensor, nb, grid, ld, t, t_stride),
           grid, t);
}

/* (plans on the host: nothing of the device's is read) */
static ladle_status g_conv_direct_plan(const ladle_backend *be, ladle_dtype dtype,
                                       const ladle_conv_geom *geom, int *forward,
                                       int *weight, int *backward, int64_t *scratch,
                                       int64_t *sums)
{
    return ladle__cpu_conv_direct_plan(CPU, dtype, geom, forward, weight, backward, scratch,
                                       sums);
}

static ladle_status g_conv_direct_forward(const ladle_backend *be, ladle_dtype dtype,
                                          const ladle_conv_geom *geom, int64_t nb,
                                          const void *x, int64_t x_stride, const void *w,
                                          const void *b, void *scratch, void *y,
                                          int64_t y_stride, int variant)
{
    FENCED(ladle__cpu_conv_direct_forward(CPU, dtype, geom, nb, x, x_stride, w, b, scratch,
                                          y, y_stride, variant),
           x, w, b, scratch, y);
}

static ladle_status g_conv_direct_weight(const ladle_backend *be, ladle_dtype dtype,
                                         const ladle_conv_geom *geom, int64_t nb,
                                         const void *x, int64_t x_stride, const void *dy,
                                         int64_t dy_stride, void *scratch, double *ws,
                                         void *dw, int variant)
{
    FENCED(ladle__cpu_conv_direct_weight(CPU, dtype, geom, nb, x, x_stride, dy, dy_stride,
                                         scratch, ws, dw, variant),
           x, dy, scratch, ws, dw);
}

static ladle_status g_conv_direct_backward(const ladle_backend *be, ladle_dtype dtype,
                                           const ladle_conv_geom *geom, int64_t nb,
                                           const void *dy, int64_t dy_stride, const void *w,
                                           void *scratch, void *dx, int64_t dx_stride,
                                           int variant)
{
    FENCED(ladle__cpu_conv_direct_backward(CPU, dtype, geom, nb, dy, dy_stride, w, scratch,
                                           dx, dx_stride, variant),
           dy, w, scratch, dx);
}

static ladle_status g_bias_add(const ladle_backend *be, ladle_dtype dtype, int64_t rows,
                               int64_t channels, int64_t inner, const void *b, void *y)
{
    FENCED(ladle__cpu_bias_add(CPU, dtype, rows, channels, inner, b, y), b, y);
}

static ladle_status g_bias_grad(const ladle_backend *be, ladle_dtype dtype, int64_t rows,
                                int64_t channels, int64_t inner, const void *dy, void *db)
{
    FENCED(ladle__cpu_bias_grad(CPU, dtype, rows, channels, inner, dy, db), dy, db);
}

/* ---- optimizer updates ---- */

static ladle_status g_optim_step(const ladle_backend *be, ladle_dtype dtype,
                                 const ladle_optimizer_desc *d, int64_t t, int64_t n, void *p,
                                 const void *g, void *s0, void *s1)
{
    FENCED(ladle__cpu_optim_step(CPU, dtype, d, t, n, p, g, s0, s1), p, g, s0, s1);
}

static const ladle_backend_table guarded_table = {
    .version = LADLE_BACKEND_VERSION,
    .name = "guarded",
    .alloc = g_alloc,
    .free = g_free,
    .to_device = g_to_device,
    .to_host = g_to_host,
    .synchronize = g_synchronize,
    .copy = g_copy,
    .copy_box = g_copy_box,
    .pack = g_pack,
    .unpack = g_unpack,
    .add = g_add,
    .axpy = g_axpy,
    .dot2 = g_dot2,
    .scal = g_scal,
    .abs_max = g_abs_max,
    .fill = g_fill,
    .fill_random = g_fill_random,
    .fill_init = g_fill_init,
    .gemm = g_gemm,
    .act_forward = g_act_forward,
    .act_backward = g_act_backward,
    .softmax_forward = g_softmax_forward,
    .softmax_backward = g_softmax_backward,
    .loss_forward = g_loss_forward,
    .loss_backward = g_loss_backward,
    .find_outside = g_find_outside,
    .find_non_finite = g_find_non_finite,
    .dropout = g_dropout,
    .bn_moment = g_bn_moment,
    .bn_dsums = g_bn_dsums,
    .bn_affine = g_bn_affine,
    .pool_plan = g_pool_plan,
    .pool_setup = g_pool_setup,
    .pool_forward = g_pool_forward,
    .pool_backward = g_pool_backward,
    .conv_im2col = g_conv_im2col,
    .conv_col2im = g_conv_col2im,
    .conv_wide_im2col = g_conv_wide_im2col,
    .conv_wide_grid = g_conv_wide_grid,
    .bias_add = g_bias_add,
    .bias_grad = g_bias_grad,
    .optim_step = g_optim_step,
    .interp_forward = g_interp_forward,
    .interp_backward = g_interp_backward,
    .loss_weight_sum = g_loss_weight_sum,
    .adaptive_pool_forward = g_adaptive_forward,
    .adaptive_pool_backward = g_adaptive_backward,
    .norm_forward = g_norm_forward,
    .norm_backward = g_norm_backward,
    .norm_weight_grad = g_norm_weight_grad,
    .embed_forward = g_embed_forward,
    .embed_backward = g_embed_backward,
    .attn_forward = g_attn_forward,
    .attn_backward = g_attn_backward,
    .conv_direct_plan = g_conv_direct_plan,
    .conv_direct_forward = g_conv_direct_forward,
    .conv_direct_weight = g_conv_direct_weight,
    .conv_direct_backward = g_conv_direct_backward,
    .lse_rows = g_lse_rows,
    .exp_rows = g_exp_rows,
};

const ladle_backend ladle__guarded_backend = {
    .fn = &guarded_table,
    .device = LADLE_GUARDED,
    .host_access = 0,
    .mpi_access = 0,
};
