/*
 * Private to the convolution: its plan, shared by the im2col path
 * (conv.c) and the wide-row path (conv_wide.c).
 */
#ifndef LADLE_CONV_IMPL_H
#define LADLE_CONV_IMPL_H

#include "src/op/op_impl.h"

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
    ladle_conv_geom geom;              /* one group's geometry, for the column slots */
} conv;

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
