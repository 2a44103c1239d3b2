/*
 * Private to the convolution: its plan, shared by the im2col path
 * (conv.c) and the wide-row path (conv_wide.c).
 */
#ifndef LADLE_CONV_IMPL_H
#define LADLE_CONV_IMPL_H

#include "layers/sequential/pad_impl.h"
#include "src/op/op_impl.h"

typedef struct conv {
    int64_t c, co, g, cg, cog;         /* channels, groups, per group */
    int64_t in[3], out[3];             /* spatial extents (D, H, W) */
    int64_t k[3], s[3], p[3], d[3];
    int64_t kvol, kk;                  /* kernel volume; K = cg * kvol */
    int64_t pin, pout;                 /* positions per image in and out */
    int64_t batch_per_gemm;            /* B */
    int64_t ldcol;                     /* the column and output matrices' row
                                          stride: B P, off multiples of 256 */
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
    /* the direct path (conv.c, and the conv_direct slots) for the passes
     * the backend takes that way (0: not; else the backend's variant, for
     * its calls): its scratch and sums */
    int direct_fwd, direct_wgt, direct_bwd;
    void *dpad;
    double *dws;
    /* explicit padding (conv_pad.c): x is first padded into a buffer (the
     * ctx's, or xpin without a ctx) and the geometry above is the padded
     * x's, with padding 0; dx comes back through gpad */
    int padded;
    ladle_padding_mode mode;
    int ndim;                          /* x's: 2 + nd */
    int64_t pshape[5];                 /* the padded x at the planned batch */
    ladle__pad_dim pd[5];
    void *xpin, *gpad;
} conv;

/* The padding of every spatial dimension of d (its padding, padding_mode
 * and same), left in lo and right in hi, after checking the options (an
 * unknown mode, same with a stride or a padding). Local; raises for func. */
ladle_status ladle__conv_padding(const ladle_conv_desc *d, const char *func, int64_t lo[3],
                                 int64_t hi[3]);

/* The deprecated ladle_conv_opts folded into a copy of d (o may be NULL),
 * after checking both sizes. Local; raises for f. */
ladle_status ladle__conv_fold_opts(const ladle_conv_desc *d, const ladle_conv_opts *o,
                                   const char *f, ladle_conv_desc *out);

/* Plan explicit padding for x of shape xs when d asks for it (another mode
 * or uneven sides): v->padded, the padded shape in xps and the inner
 * description (padding 0) in inner; otherwise inner = *d with the padding
 * and xps = xs. Checks the padding against the extents. Local. */
ladle_status ladle__conv_pad_plan(const ladle_conv_desc *d, const int64_t *xs, conv *v,
                                  ladle_conv_desc *inner, int64_t *xps);

/* x (n images) padded into xp; the gradient gp of the padded x folded back
 * into dx (gp is overwritten). Local. */
ladle_status ladle__conv_pad_in(const ladle_op *op, const void *x, int64_t n, void *xp);
ladle_status ladle__conv_pad_out(const ladle_op *op, void *gp, void *dx, int64_t n);

/* The wide path's columns per GEMM: two LeNet conv2 images (measured flat
 * from 136 to 300, slower from 512). */
#define LADLE_CONV_WIDE_COLUMNS 256

/* rows x cols elements of es bytes from be into *out, or a status saying
 * which buffer (what) is too large or could not be had. */
ladle_status ladle__conv_buffer(const ladle_backend *be, int64_t rows, int64_t cols,
                                size_t es, const char *what, void **out);

/* Whether the wide-row path suits v (a plan filled by conv.c, padded
 * extents included; sets q), and its workspace (freed with conv.c's). */
int ladle__conv_wide_plan(conv *v);
ladle_status ladle__conv_wide_alloc(conv *v, const ladle_backend *be, size_t es);

ladle_status ladle__conv_wide_forward(const ladle_op *op, const void *x, void *y, int64_t n);
/* The bias over group g's channels of images n0 .. n0 + nb - 1 of y, just
 * after they are written (grad 0), or their sums of dy added to the bias
 * gradient in image order, just after the GEMM read them (grad 1; the
 * order of the one pass, so the same bits). See conv_shared.c. Nothing without a
 * bias, or where the layer takes one pass at the end (a device the host
 * cannot read). */
ladle_status ladle__conv_bias_chunk(const ladle_op *op, int grad, const void *t, int64_t n0,
                                    int64_t nb, int64_t g);
ladle_status ladle__conv_wide_backward_weight(const ladle_op *op, const void *x, const void *dy,
                                      int64_t n);

/* The defaults that ladle_conv_desc_init and ladle_conv_transpose_desc_init
 * share (d already zeroed by LADLE_DESC_START): groups 1, every spatial
 * dimension's kernel k with stride and dilation 1, a bias. */
#define LADLE__CONV_DESC_DEFAULTS(d, nd_, cin, cout, k)                                    \
    do {                                                                                   \
        (d)->nd = (nd_);                                                                   \
        (d)->in_channels = (cin);                                                          \
        (d)->out_channels = (cout);                                                        \
        (d)->groups = 1;                                                                   \
        for (int i_ = 0; i_ < 3; i_++) {                                                   \
            (d)->kernel[i_] = (k);                                                         \
            (d)->stride[i_] = 1;                                                           \
            (d)->dilation[i_] = 1;                                                         \
        }                                                                                  \
        (d)->bias = 1;                                                                     \
    } while (0)

#endif /* LADLE_CONV_IMPL_H */
