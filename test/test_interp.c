/* Interpolation (upsampling): nearest and (bi, tri)linear with and
 * without align_corners against the definition evaluated in the test on
 * random geometries (integer scales and explicit sizes, up and down), in
 * f64 and f32; values by hand; the dot-product test (it is linear) and
 * finite differences; bad descriptors and shapes refused. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"

/* PyTorch's source index and weights along one dimension, written out
 * from its documentation's formulas. */
static void src_taps(int linear, int align, int64_t in, int64_t out, int64_t o, int64_t *i0,
                     int64_t *i1, double *w1)
{
    if (!linear) {
        double x = floor((double)o * (double)in / (double)out);
        *i0 = *i1 = (int64_t)fmin(x, (double)(in - 1));
        *w1 = 0;
        return;
    }
    double x;
    if (align)
        x = out > 1 ? (double)o * (double)(in - 1) / (double)(out - 1) : 0.0;
    else
        x = fmax(((double)o + 0.5) * (double)in / (double)out - 0.5, 0.0);
    *i0 = (int64_t)floor(x);
    if (*i0 > in - 1)
        *i0 = in - 1;
    *i1 = *i0 + 1 < in ? *i0 + 1 : in - 1;
    *w1 = x - (double)*i0;
}

/* y from x (both as doubles, row-major N x C x S...) by the definition. */
static void reference(int nd, int linear, int align, const int64_t *xs, const int64_t *ys,
                      const double *x, double *y)
{
    int64_t in[3] = {1, 1, 1}, out[3] = {1, 1, 1};
    for (int a = 0; a < nd; a++) {
        in[3 - nd + a] = xs[2 + a];
        out[3 - nd + a] = ys[2 + a];
    }
    int64_t planes = xs[0] * xs[1], pin = in[0] * in[1] * in[2], pout = out[0] * out[1] * out[2];
    for (int64_t p = 0; p < planes; p++)
        for (int64_t o = 0; o < pout; o++) {
            int64_t oc[3] = {o / (out[1] * out[2]), o / out[2] % out[1], o % out[2]};
            int64_t t[3][2];
            double w[3][2];
            for (int a = 0; a < 3; a++) {
                double w1;
                src_taps(linear, align, in[a], out[a], oc[a], &t[a][0], &t[a][1], &w1);
                w[a][0] = linear ? 1 - w1 : 1;
                w[a][1] = linear ? w1 : 0;
            }
            double acc = 0;
            for (int a = 0; a < 2; a++)
                for (int b = 0; b < 2; b++)
                    for (int c = 0; c < 2; c++)
                        acc += w[0][a] * w[1][b] * w[2][c] *
                               x[p * pin + (t[0][a] * in[1] + t[1][b]) * in[2] + t[2][c]];
            y[p * pout + o] = acc;
        }
}

static int64_t numel(int n, const int64_t *s)
{
    int64_t v = 1;
    for (int d = 0; d < n; d++)
        v *= s[d];
    return v;
}

/* One geometry: y against the definition; the adjoint and gradient tests
 * in f64. */
static void check_case(const ladle_interp_desc *d, const int64_t *xs, ladle_dtype dt, int k)
{
    ladle_op *op = NULL;
    LT_OK(ladle_interp_create(d, xs, dt, lt_device(), &op));
    int nd = 0;
    int64_t ys[5];
    LT_OK(ladle_op_y_shape(op, &nd, ys));
    for (int a = 0; a < d->nd; a++) {
        int64_t want = d->out_size[a] ? d->out_size[a] : xs[2 + a] * d->scale[a];
        LT_ASSERT(ys[2 + a] == want, "case %d: extent %lld, not %lld", k, (long long)ys[2 + a],
                  (long long)want);
    }
    int64_t nx = numel(2 + d->nd, xs), ny = numel(2 + d->nd, ys);
    double *hx = malloc(sizeof(double) * (size_t)nx), *hy = malloc(sizeof(double) * (size_t)ny);
    double *want = malloc(sizeof(double) * (size_t)ny);
    ladle_tensor *x = lt_tensor(dt, 2 + d->nd, xs), *y = lt_tensor(dt, 2 + d->nd, ys);
    LT_OK(ladle_tensor_fill_random(x, 100 + (uint64_t)k, 1));
    for (int64_t i = 0; i < nx; i++)
        hx[i] = lt_get(x, i);
    LT_OK(ladle_layer_forward(op, NULL, x, y));
    reference(d->nd, d->mode == LADLE_INTERP_LINEAR, d->align_corners, xs, ys, hx, want);
    double worst = 0;
    for (int64_t i = 0; i < ny; i++)
        worst = fmax(worst, fabs(lt_get(y, i) - want[i]));
    double tol = dt == LADLE_F64 ? 1e-14 : 1e-6;
    LT_ASSERT(worst <= tol, "case %d (mode %d, align %d, nd %d): %.3e from the definition", k,
              (int)d->mode, d->align_corners, d->nd, worst);
    if (dt == LADLE_F64) {
        lt_adjoint_ok(op, 200 + (uint64_t)k, "interp");
        ladle_gradient_result r;
        LT_OK(ladle_gradient_test(op, 300 + (uint64_t)k, 40, &r));
        LT_ASSERT(r.input_error < 1e-6, "case %d: gradient %.1e", k, r.input_error);
    }
    (void)hy;
    free(hx), free(hy), free(want);
    ladle_tensor_destroy(&x), ladle_tensor_destroy(&y);
    ladle_op_destroy(&op);
}

START_TEST(random_geometries)
{
    srand(7);
    for (int k = 0; k < 160; k++) {
        ladle_interp_desc d;
        int nd = 1 + k % 3;
        ladle_interp_desc_init(&d, (k / 3) % 2 ? LADLE_INTERP_LINEAR : LADLE_INTERP_NEAREST, nd,
                               1);
        d.align_corners = d.mode == LADLE_INTERP_LINEAR && (k / 6) % 2;
        int64_t xs[5] = {1 + rand() % 2, 1 + rand() % 3};
        for (int a = 0; a < nd; a++) {
            xs[2 + a] = 1 + rand() % (nd == 3 ? 4 : 7);
            if ((k / 12) % 2) /* explicit sizes, up or down */
                d.out_size[a] = 1 + rand() % (nd == 3 ? 7 : 13);
            else
                d.scale[a] = 1 + rand() % 3;
        }
        check_case(&d, xs, k % 4 == 3 ? LADLE_F32 : LADLE_F64, k);
    }
}
END_TEST

/* y for x = 0 1 2 (one sample, one channel) worked out by hand. */
static void by_hand_1d(ladle_interp_mode mode, int align, int64_t scale, int64_t size,
                       const double *want, int n)
{
    ladle_interp_desc d;
    ladle_interp_desc_init(&d, mode, 1, scale);
    d.align_corners = align;
    d.out_size[0] = size;
    int64_t xs[3] = {1, 1, 3}, ys[3] = {1, 1, n};
    ladle_op *op = NULL;
    LT_OK(ladle_interp_create(&d, xs, LADLE_F64, lt_device(), &op));
    ladle_tensor *x = lt_tensor(LADLE_F64, 3, xs), *y = lt_tensor(LADLE_F64, 3, ys);
    for (int i = 0; i < 3; i++)
        lt_set(x, i, i);
    LT_OK(ladle_layer_forward(op, NULL, x, y));
    double worst = 0;
    for (int i = 0; i < n; i++)
        worst = fmax(worst, fabs(lt_get(y, i) - want[i]));
    LT_ASSERT(worst <= 1e-15, "mode %d align %d scale %lld size %lld: off by %g", (int)mode,
              align, (long long)scale, (long long)size, worst);
    ladle_tensor_destroy(&x), ladle_tensor_destroy(&y);
    ladle_op_destroy(&op);
}

START_TEST(by_hand)
{
    const double near2[6] = {0, 0, 1, 1, 2, 2}, near5[5] = {0, 0, 1, 1, 2};
    const double lin_ac[6] = {0, 0.4, 0.8, 1.2, 1.6, 2}, lin[6] = {0, 0.25, 0.75, 1.25, 1.75, 2};
    const double down2[2] = {0.25, 1.75}; /* out 2 from 3: x = 0.25, 1.75 */
    const double ac2[2] = {0, 2};
    by_hand_1d(LADLE_INTERP_NEAREST, 0, 2, 0, near2, 6);
    by_hand_1d(LADLE_INTERP_NEAREST, 0, 1, 5, near5, 5);
    by_hand_1d(LADLE_INTERP_LINEAR, 1, 2, 0, lin_ac, 6);
    by_hand_1d(LADLE_INTERP_LINEAR, 0, 2, 0, lin, 6);
    by_hand_1d(LADLE_INTERP_LINEAR, 0, 1, 2, down2, 2);
    by_hand_1d(LADLE_INTERP_LINEAR, 1, 1, 2, ac2, 2);
    /* bilinear, 2x2 -> 3x3 with align_corners: the corners, the edge
     * midpoints and the centre's mean */
    ladle_interp_desc d;
    ladle_interp_desc_init(&d, LADLE_INTERP_LINEAR, 2, 1);
    d.align_corners = 1;
    d.out_size[0] = d.out_size[1] = 3;
    int64_t xs[4] = {1, 1, 2, 2}, ys[4] = {1, 1, 3, 3};
    ladle_op *op = NULL;
    LT_OK(ladle_interp_create(&d, xs, LADLE_F64, lt_device(), &op));
    ladle_tensor *x = lt_tensor(LADLE_F64, 4, xs), *y = lt_tensor(LADLE_F64, 4, ys);
    const double xv[4] = {1, 3, 5, 11}, yv[9] = {1, 2, 3, 3, 5, 7, 5, 8, 11};
    for (int i = 0; i < 4; i++)
        lt_set(x, i, xv[i]);
    LT_OK(ladle_layer_forward(op, NULL, x, y));
    double worst = 0;
    for (int i = 0; i < 9; i++)
        worst = fmax(worst, fabs(lt_get(y, i) - yv[i]));
    LT_ASSERT(worst <= 1e-15, "bilinear by hand: off by %g", worst);
    /* the backward of dy = 1: each input gets the sum of its weights */
    ladle_tensor *dy = lt_tensor(LADLE_F64, 4, ys), *dx = lt_tensor(LADLE_F64, 4, xs);
    LT_OK(ladle_tensor_fill(dy, 1.0));
    LT_OK(ladle_op_adjoint(op, dy, dx));
    worst = 0;
    for (int i = 0; i < 4; i++) /* corner 1 + two edges 1/2 + centre 1/4 */
        worst = fmax(worst, fabs(lt_get(dx, i) - 2.25));
    LT_ASSERT(worst <= 1e-15, "bilinear adjoint by hand: off by %g", worst);
    ladle_tensor_destroy(&x), ladle_tensor_destroy(&y);
    ladle_tensor_destroy(&dx), ladle_tensor_destroy(&dy);
    ladle_op_destroy(&op);
}
END_TEST

START_TEST(bad_input)
{
    ladle_interp_desc d;
    int64_t xs[4] = {2, 3, 4, 5}, empty[4] = {2, 3, 0, 5}, big[4] = {1, 1, ((int64_t)1 << 31) + 1, 2};
    ladle_op *op = NULL;
    ladle_device dev = lt_device();
    ladle_interp_desc_init(&d, LADLE_INTERP_LINEAR, 2, 2);
    LT_FAILS(ladle_interp_create(NULL, xs, LADLE_F64, dev, &op), LADLE_ERR_NULL);
    LT_FAILS(ladle_interp_create(&d, NULL, LADLE_F64, dev, &op), LADLE_ERR_NULL);
    LT_FAILS(ladle_interp_create(&d, xs, LADLE_F64, dev, NULL), LADLE_ERR_NULL);
    LT_FAILS(ladle_interp_create(&d, xs, LADLE_I64, dev, &op), LADLE_ERR_DTYPE);
    d.size = 8;
    LT_FAILS(ladle_interp_create(&d, xs, LADLE_F64, dev, &op), LADLE_ERR_ARG);
    ladle_interp_desc_init(&d, (ladle_interp_mode)7, 2, 2);
    LT_FAILS(ladle_interp_create(&d, xs, LADLE_F64, dev, &op), LADLE_ERR_ARG);
    ladle_interp_desc_init(&d, LADLE_INTERP_NEAREST, 4, 2);
    LT_FAILS(ladle_interp_create(&d, xs, LADLE_F64, dev, &op), LADLE_ERR_ARG);
    ladle_interp_desc_init(&d, LADLE_INTERP_NEAREST, 2, 2);
    d.align_corners = 1; /* nearest has no corners to align */
    LT_FAILS(ladle_interp_create(&d, xs, LADLE_F64, dev, &op), LADLE_ERR_ARG);
    ladle_interp_desc_init(&d, LADLE_INTERP_LINEAR, 2, 2);
    d.align_corners = 2;
    LT_FAILS(ladle_interp_create(&d, xs, LADLE_F64, dev, &op), LADLE_ERR_ARG);
    ladle_interp_desc_init(&d, LADLE_INTERP_LINEAR, 2, 0);
    LT_FAILS(ladle_interp_create(&d, xs, LADLE_F64, dev, &op), LADLE_ERR_ARG);
    ladle_interp_desc_init(&d, LADLE_INTERP_LINEAR, 2, -3);
    LT_FAILS(ladle_interp_create(&d, xs, LADLE_F64, dev, &op), LADLE_ERR_ARG);
    ladle_interp_desc_init(&d, LADLE_INTERP_LINEAR, 2, INT64_MAX);
    LT_FAILS(ladle_interp_create(&d, xs, LADLE_F64, dev, &op), LADLE_ERR_ARG);
    ladle_interp_desc_init(&d, LADLE_INTERP_LINEAR, 2, (int64_t)1 << 20);
    /* 2^12 x 2^20 passes 2^31 in one dimension */
    xs[2] = (int64_t)1 << 12;
    LT_FAILS(ladle_interp_create(&d, xs, LADLE_F64, dev, &op), LADLE_ERR_SHAPE);
    xs[2] = 4;
    ladle_interp_desc_init(&d, LADLE_INTERP_LINEAR, 2, 1);
    d.out_size[1] = -1;
    LT_FAILS(ladle_interp_create(&d, xs, LADLE_F64, dev, &op), LADLE_ERR_ARG);
    d.out_size[1] = INT64_MAX;
    LT_FAILS(ladle_interp_create(&d, xs, LADLE_F64, dev, &op), LADLE_ERR_ARG);
    d.out_size[1] = 0;
    LT_FAILS(ladle_interp_create(&d, empty, LADLE_F64, dev, &op), LADLE_ERR_SHAPE);
    LT_FAILS(ladle_interp_create(&d, big, LADLE_F64, dev, &op), LADLE_ERR_SHAPE);
    /* outputs whose volume passes 2^57 */
    int64_t wide[5] = {1 << 10, 1, 1 << 10, 1 << 10, 1 << 10};
    ladle_interp_desc_init(&d, LADLE_INTERP_NEAREST, 3, 1 << 10);
    LT_FAILS(ladle_interp_create(&d, wide, LADLE_F64, dev, &op), LADLE_ERR_SHAPE);
    LT_ASSERT(op == NULL, "the handle stays untouched");
}
END_TEST

LT_SUITE("interp", "interp", 0, random_geometries, by_hand, bad_input)
