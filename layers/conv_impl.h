/*
 * Private to the convolution: its plan, shared by the im2col path
 * (conv.c) and the wide-row path (conv_wide.c).
 */
#ifndef LADLE_CONV_IMPL_H
#define LADLE_CONV_IMPL_H

#include <string.h>

#include "src/op/op_impl.h"
#include "src/backends/cpu/simd.h"

typedef struct conv {
    int64_t c, co, g, cg, cog;         /* channels, groups, per group */
    int64_t in[3], out[3];             /* spatial extents (D, H, W) */
    int64_t k[3], s[3], p[3], d[3];
    int64_t kvol, kk;                  /* kernel volume; K = cg * kvol */
    int64_t pin, pout;                 /* positions per image in and out */
    int64_t batch_per_gemm;            /* B */
    int pointwise;                     /* 1x1, stride 1, no padding: no im2col */
    void *col, *mat;                   /* workspace: K x B*P and Co_g x B*P */
    void *plane;                       /* zero-bordered planes (hp x wp) for x and dx */
    /* the wide-row path (conv_wide.c): rows of the padded width */
    int wide;
    int64_t hp, wp, q;                 /* padded extents; wide: columns per image */
    void *xpad;                        /* cg padded planes of x */
    void *dyw;                         /* Co_g x B q, dy spread, zero between rows */
    void *dwt;                         /* the weight gradient transposed, K x Co */
} conv;

/*
 * Rows of a few elements (an 8 x 8 or 4 x 4 output's width) are most of
 * im2col's copies, and a call to memcpy per 16-byte row costs more than the
 * move. These move a row as vectors of 8 and 4 elements, the last one
 * overlapping its neighbour rather than stepping through a remainder. The
 * add reads the overlapping vector of dst before it writes any, so the
 * overlap is stored twice with the same sums.
 */
#define DEFINE_ROWS(T, S)                                                                \
    typedef T v8##S __attribute__((vector_size(8 * sizeof(T))));                         \
    typedef T v4##S __attribute__((vector_size(4 * sizeof(T))));                         \
    LADLE_INLINE void row_copy_##S(T *restrict d, const T *restrict s, int64_t n)       \
    {                                                                                    \
        if (n >= 8) {                                                                    \
            v8##S a;                                                                     \
            for (int64_t e = 0; e + 8 < n; e += 8) {                                     \
                memcpy(&a, s + e, sizeof a);                                             \
                memcpy(d + e, &a, sizeof a);                                             \
            }                                                                            \
            memcpy(&a, s + n - 8, sizeof a);                                             \
            memcpy(d + n - 8, &a, sizeof a);                                             \
        } else if (n >= 4) {                                                             \
            v4##S a, b;                                                                  \
            memcpy(&a, s, sizeof a);                                                     \
            memcpy(&b, s + n - 4, sizeof b);                                             \
            memcpy(d, &a, sizeof a);                                                     \
            memcpy(d + n - 4, &b, sizeof b);                                             \
        } else {                                                                         \
            for (int64_t e = 0; e < n; e++)                                              \
                d[e] = s[e];                                                             \
        }                                                                                \
    }                                                                                    \
    LADLE_INLINE void row_add_##S(T *restrict d, const T *restrict s, int64_t n)        \
    {                                                                                    \
        if (n >= 8) {                                                                    \
            /* the last vector first: it may overlap the one before */                   \
            v8##S a, b, x, y;                                                            \
            memcpy(&b, d + n - 8, sizeof b);                                             \
            memcpy(&y, s + n - 8, sizeof y);                                             \
            b += y;                                                                      \
            for (int64_t e = 0; e + 8 < n; e += 8) {                                     \
                memcpy(&a, d + e, sizeof a);                                             \
                memcpy(&x, s + e, sizeof x);                                             \
                a += x;                                                                  \
                memcpy(d + e, &a, sizeof a);                                             \
            }                                                                            \
            memcpy(d + n - 8, &b, sizeof b);                                             \
        } else if (n >= 4) {                                                             \
            v4##S a, b, x, y;                                                            \
            memcpy(&a, d, sizeof a);                                                     \
            memcpy(&b, d + n - 4, sizeof b);                                             \
            memcpy(&x, s, sizeof x);                                                     \
            memcpy(&y, s + n - 4, sizeof y);                                             \
            a += x;                                                                      \
            b += y;                                                                      \
            memcpy(d + n - 4, &b, sizeof b);                                             \
            memcpy(d, &a, sizeof a);                                                     \
        } else {                                                                         \
            for (int64_t e = 0; e < n; e++)                                              \
                d[e] += s[e];                                                            \
        }                                                                                \
    }

DEFINE_ROWS(float, f32)
DEFINE_ROWS(double, f64)

/* The wide path's columns per GEMM: two LeNet conv2 images (measured flat
 * from 136 to 300, slower from 512). */
#define LADLE_CONV_WIDE_COLUMNS 256

/* rows x cols elements of es bytes from be into *out, or a status saying
 * which buffer (what) is too large or could not be had. */
ladle_status ladle__conv_buffer(const ladle_backend *be, int64_t rows, int64_t cols,
                                size_t es, const char *what, void **out);

/* Whether the wide-row path suits v (a plan filled by conv.c, padded
 * extents included; sets q), and its workspace. */
int ladle__conv_wide_plan(conv *v);
ladle_status ladle__conv_wide_alloc(conv *v, const ladle_backend *be, size_t es);
void ladle__conv_wide_free(conv *v, const ladle_backend *be);

ladle_status ladle__conv_wide_forward(const ladle_op *op, const void *x, void *y, int64_t n);
ladle_status ladle__conv_wide_backward_weight(const ladle_op *op, const void *x, const void *dy,
                                      int64_t n);

#endif /* LADLE_CONV_IMPL_H */
