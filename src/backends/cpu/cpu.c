/*
 * The CPU backend: the reference implementation of every kernel slot.
 * Box kernels walk all but the innermost dimension with an index counter and
 * run the innermost one as a plain loop (memcpy when both sides are unit
 * stride), so packing a box costs one pass over its bytes.
 */
#define _DEFAULT_SOURCE /* MAP_ANONYMOUS */
#include <cblas.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "src/core/backend.h"

/*
 * Planned buffers and tensors come straight from mmap: glibc's malloc moves
 * its mmap threshold up after large frees and then serves big blocks from
 * the heap, where transfers and copies ran up to 3x slower here; asking the
 * kernel directly keeps every planned buffer alike however the process
 * allocated before.
 *
 * Page-aligned blocks all share their offset within a 4 KiB page, and a
 * copy or add whose source and destination share their low 12 address bits
 * runs much slower on x86 (loads falsely match pending stores: "4K
 * aliasing"). Each block is therefore shifted by a multiple of 64 bytes
 * taken from its own address. A header before the block records the mapping.
 */
#define STAGGER_SLOTS 62

/*
 * Neither AddressSanitizer nor memcheck sees into an mmap'd block, so for
 * them the blocks are made visible: under ASan (make asan) they come from
 * the heap, with its redzones, use-after-free and leak reports; under
 * valgrind (where memcheck.h is at hand at build time) each block is
 * announced as a heap block and the rest of its mapping marked off limits,
 * so a read or write past a tensor's end, a use after free and a buffer
 * never freed are reported. Outside valgrind the requests cost a few
 * instructions at plan time only.
 */
#if defined(__SANITIZE_ADDRESS__)
#define LADLE_HEAP_BLOCKS 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define LADLE_HEAP_BLOCKS 1
#endif
#endif
#if !defined(LADLE_HEAP_BLOCKS) && defined(__has_include)
#if __has_include(<valgrind/memcheck.h>)
#include <valgrind/memcheck.h>
#define LADLE_MEMCHECK 1
#endif
#endif

typedef struct block_header {
    void *map;
    size_t len;
} block_header;

#ifdef LADLE_HEAP_BLOCKS
static void *cpu_alloc(size_t bytes)
{
    void *p = NULL; /* exactly the bytes asked for: the redzone starts at the end */
    if (posix_memalign(&p, 64, bytes ? bytes : 1) != 0)
        return NULL;
    memset(p, 0, bytes);
    return p;
}

static void cpu_free(void *p) { free(p); }
#else
static void *cpu_alloc(size_t bytes)
{
    size_t len = bytes + 64 * (STAGGER_SLOTS + 2);
    len = (len + 4095) & ~(size_t)4095;
    char *map = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (map == MAP_FAILED)
        return NULL;
    uintptr_t slot = (((uintptr_t)map >> 12) ^ ((uintptr_t)map >> 21)) % STAGGER_SLOTS;
    char *p = map + 64 * (slot + 1);
    block_header *h = (block_header *)p - 1;
    h->map = map;
    h->len = len;
    /* zeroing touches every page now, at plan time, not in the first call */
    memset(p, 0, bytes);
#ifdef LADLE_MEMCHECK
    VALGRIND_MAKE_MEM_NOACCESS(map, len);
    VALGRIND_MALLOCLIKE_BLOCK(p, bytes, 0, 1);
    VALGRIND_MAKE_MEM_DEFINED(p, bytes);
#endif
    return p;
}

static void cpu_free(void *p)
{
    if (p != NULL) {
        block_header *h = (block_header *)p - 1;
#ifdef LADLE_MEMCHECK
        VALGRIND_MAKE_MEM_DEFINED(h, sizeof *h);
#endif
        void *map = h->map;
        size_t len = h->len;
#ifdef LADLE_MEMCHECK
        VALGRIND_FREELIKE_BLOCK(p, 0);
#endif
        munmap(map, len);
    }
}
#endif

static void cpu_copy(ladle_dtype dtype, int64_t n, const void *src, void *dst)
{
    if (n > 0 && src != dst)
        memmove(dst, src, (size_t)n * ladle_dtype_size(dtype));
}

#define DEFINE_ROW_KERNELS(T, SUFFIX)                                                      \
    static void row_##SUFFIX(ladle_box_mode mode, int64_t n, const T *s, int64_t ss, T *d, \
                             int64_t ds)                                                   \
    {                                                                                      \
        if (mode == LADLE_BOX_ZERO) {                                                      \
            if (ds == 1)                                                                   \
                memset(d, 0, (size_t)n * sizeof(T));                                       \
            else                                                                           \
                for (int64_t i = 0; i < n; i++)                                            \
                    d[i * ds] = 0;                                                         \
        } else if (mode == LADLE_BOX_COPY) {                                               \
            if (ss == 1 && ds == 1)                                                        \
                memcpy(d, s, (size_t)n * sizeof(T));                                       \
            else                                                                           \
                for (int64_t i = 0; i < n; i++)                                            \
                    d[i * ds] = s[i * ss];                                                 \
        } else {                                                                           \
            if (ss == 1 && ds == 1)                                                        \
                for (int64_t i = 0; i < n; i++)                                            \
                    d[i] += s[i];                                                          \
            else                                                                           \
                for (int64_t i = 0; i < n; i++)                                            \
                    d[i * ds] += s[i * ss];                                                \
        }                                                                                  \
    }

DEFINE_ROW_KERNELS(float, f32)
DEFINE_ROW_KERNELS(double, f64)

static void cpu_copy_box(ladle_dtype dtype, ladle_box_mode mode, int ndim,
                         const int64_t *ext, const void *src, const int64_t *sstr,
                         void *dst, const int64_t *dstr)
{
    int64_t idx[LADLE_MAX_NDIM] = {0};
    size_t es = ladle_dtype_size(dtype);
    if (ndim == 0) {
        static const int64_t one = 1;
        cpu_copy_box(dtype, mode, 1, &one, src, &one, dst, &one);
        return;
    }
    for (int d = 0; d < ndim; d++)
        if (ext[d] <= 0)
            return;
    int inner = ndim - 1;
    for (;;) {
        int64_t so = 0, doff = 0;
        for (int d = 0; d < inner; d++) {
            so += idx[d] * (mode == LADLE_BOX_ZERO ? 0 : sstr[d]);
            doff += idx[d] * dstr[d];
        }
        const char *s = mode == LADLE_BOX_ZERO ? NULL : (const char *)src + (size_t)so * es;
        char *dp = (char *)dst + (size_t)doff * es;
        int64_t ss = mode == LADLE_BOX_ZERO ? 0 : sstr[inner];
        if (dtype == LADLE_F32)
            row_f32(mode, ext[inner], (const float *)s, ss, (float *)dp, dstr[inner]);
        else
            row_f64(mode, ext[inner], (const double *)s, ss, (double *)dp, dstr[inner]);
        int d = inner - 1;
        while (d >= 0 && ++idx[d] == ext[d])
            idx[d--] = 0;
        if (d < 0)
            break;
    }
}

static void contiguous(int ndim, const int64_t *ext, int64_t *str)
{
    int64_t s = 1;
    for (int d = ndim - 1; d >= 0; d--) {
        str[d] = s;
        s *= ext[d];
    }
}

static void cpu_pack(ladle_dtype dtype, int ndim, const int64_t *ext, const void *src,
                     const int64_t *sstr, void *dst)
{
    int64_t dstr[LADLE_MAX_NDIM];
    contiguous(ndim, ext, dstr);
    cpu_copy_box(dtype, LADLE_BOX_COPY, ndim, ext, src, sstr, dst, dstr);
}

static void cpu_unpack(ladle_dtype dtype, ladle_box_mode mode, int ndim, const int64_t *ext,
                       const void *src, void *dst, const int64_t *dstr)
{
    int64_t sstr[LADLE_MAX_NDIM];
    contiguous(ndim, ext, sstr);
    cpu_copy_box(dtype, mode, ndim, ext, src, sstr, dst, dstr);
}

static void cpu_add(ladle_dtype dtype, int64_t n, const void *a, const void *b, void *c)
{
    if (dtype == LADLE_F32) {
        const float *x = a, *y = b;
        float *z = c;
        for (int64_t i = 0; i < n; i++)
            z[i] = x[i] + y[i];
    } else {
        const double *x = a, *y = b;
        double *z = c;
        for (int64_t i = 0; i < n; i++)
            z[i] = x[i] + y[i];
    }
}

static void cpu_axpy(ladle_dtype dtype, int64_t n, double alpha, const void *x, void *y)
{
    if (dtype == LADLE_F32) {
        const float *a = x;
        float *b = y, al = (float)alpha;
        for (int64_t i = 0; i < n; i++)
            b[i] += al * a[i];
    } else {
        const double *a = x;
        double *b = y;
        for (int64_t i = 0; i < n; i++)
            b[i] += alpha * a[i];
    }
}

/* Compensated inner product (Ogita, Rump and Oishi's Dot2): every product
 * and every addition carries its rounding error along, so the result is as
 * accurate as if computed in twice double precision. The adjoint test
 * compares two inner products that differ only by rounding; computed
 * naively, long random vectors whose products nearly cancel would hide
 * that difference under the summation error. */
#define DEFINE_DOT2(T, SUFFIX)                                                             \
    static void dot2_##SUFFIX(int64_t n, const T *a, const T *b, double out[2])            \
    {                                                                                      \
        double s = 0.0, c = 0.0;                                                           \
        for (int64_t i = 0; i < n; i++) {                                                  \
            double x = (double)a[i], y = (double)b[i];                                     \
            double p = x * y, ep = fma(x, y, -p);                                          \
            double t = s + p, z = t - s, es = (s - (t - z)) + (p - z);                     \
            s = t;                                                                         \
            c += ep + es;                                                                  \
        }                                                                                  \
        out[0] = s + c;                                                                    \
        out[1] = c - (out[0] - s);                                                         \
    }

DEFINE_DOT2(float, f32)
DEFINE_DOT2(double, f64)

static void cpu_dot2(ladle_dtype dtype, int64_t n, const void *x, const void *y,
                     double out[2])
{
    if (dtype == LADLE_F32)
        dot2_f32(n, x, y, out);
    else
        dot2_f64(n, x, y, out);
}

static double cpu_dot(ladle_dtype dtype, int64_t n, const void *x, const void *y)
{
    double r[2];
    cpu_dot2(dtype, n, x, y, r);
    return r[0] + r[1];
}

static void cpu_fill(ladle_dtype dtype, int64_t n, double value, void *x)
{
    if (dtype == LADLE_F32) {
        float *a = x, v = (float)value;
        for (int64_t i = 0; i < n; i++)
            a[i] = v;
    } else {
        double *a = x;
        for (int64_t i = 0; i < n; i++)
            a[i] = value;
    }
}

static void cpu_gemm(ladle_dtype dtype, int trans_a, int trans_b, int64_t m, int64_t n,
                     int64_t k, double alpha, const void *a, int64_t lda, const void *b,
                     int64_t ldb, double beta, void *c, int64_t ldc)
{
    enum CBLAS_TRANSPOSE ta = trans_a ? CblasTrans : CblasNoTrans;
    enum CBLAS_TRANSPOSE tb = trans_b ? CblasTrans : CblasNoTrans;
    if (dtype == LADLE_F32)
        cblas_sgemm(CblasRowMajor, ta, tb, (int)m, (int)n, (int)k, (float)alpha, a,
                    (int)lda, b, (int)ldb, (float)beta, c, (int)ldc);
    else
        cblas_dgemm(CblasRowMajor, ta, tb, (int)m, (int)n, (int)k, alpha, a, (int)lda, b,
                    (int)ldb, beta, c, (int)ldc);
}

const ladle_backend ladle__cpu_backend = {
    .name = "cpu",
    .device = LADLE_CPU,
    .alloc = cpu_alloc,
    .free = cpu_free,
    .copy = cpu_copy,
    .copy_box = cpu_copy_box,
    .pack = cpu_pack,
    .unpack = cpu_unpack,
    .add = cpu_add,
    .axpy = cpu_axpy,
    .dot = cpu_dot,
    .dot2 = cpu_dot2,
    .fill = cpu_fill,
    .gemm = cpu_gemm,
};

ladle_status ladle_set_num_threads(int n)
{
    if (n < 1)
        return ladle__raise(LADLE_ERR_ARG, __func__, "%d threads", n);
    openblas_set_num_threads(n);
    return LADLE_OK;
}

int ladle_get_num_threads(void) { return openblas_get_num_threads(); }
