/* Hostile but fair sizes: kernels, paddings, dilations and strides near
 * 2^63, tensor and partition shapes whose products wrap, split sizes whose
 * sums wrap. Each is refused with the status that says what was wrong and
 * a message naming the value, on every rank, without touching the output
 * handle, and without undefined behaviour (the suite also runs under UBSan
 * with -fno-sanitize-recover). */
#include <stdio.h>
#include <string.h>

#include "harness.h"

#define HUGE64 INT64_MAX
#define BIG (INT64_C(1) << 62)

/* One window field of dimension 1 set to a hostile value. */
static void set_field(ladle_window *w, int field, int64_t v)
{
    int64_t *f[4] = {w->kernel, w->stride, w->padding, w->dilation};
    f[field][1] = v;
}

START_TEST(halo_windows)
{
    static const char *names[4] = {"kernel", "stride", "padding", "dilation"};
    int s[2] = {1, lt_size};
    ladle_partition *p = lt_partition(2, s, 0);
    ladle_layout *x = NULL;
    int64_t global[2] = {2, 4 * lt_size};
    LT_OK(ladle_layout_create_balanced(p, 2, global, &x));
    ladle_op *op = NULL;
    ladle_window w;
    int64_t values[3] = {HUGE64, BIG, (INT64_C(1) << 57) + 1};
    for (int field = 0; field < 4; field++)
        for (int k = 0; k < 3; k++) {
            ladle_window_init(&w, 2);
            set_field(&w, field, values[k]);
            if (field == 0 || field == 3) /* room for the window in the padding */
                w.padding[1] = (INT64_C(1) << 55);
            ladle_status st = ladle_halo_exchange_create(x, &w, LADLE_F64, lt_device(), 0, &op);
            const char *msg = ladle_error_message();
            LT_ASSERT(st == LADLE_ERR_ARG && op == NULL && strstr(msg, "dimension 1") &&
                          strstr(msg, "too large") &&
                          (strstr(msg, names[field]) || strstr(msg, "dilated kernel")),
                      "%s %lld: %s (%s)", names[field], (long long)values[k],
                      ladle_status_name(st), msg);
            ladle_error_clear();
        }
    /* every value fits alone, but the output does not: 2^40 x 2^40 cells */
    ladle_window_init(&w, 2);
    w.padding[0] = w.padding[1] = INT64_C(1) << 40;
    LT_FAILS_SAYING(ladle_halo_exchange_create(x, &w, LADLE_F64, lt_device(), 0, &op),
                    LADLE_ERR_ARG, "too large");
    /* nor do the padded shards: a kernel as wide as a 2^40-cell padding */
    ladle_window_init(&w, 2);
    w.kernel[0] = w.kernel[1] = INT64_C(1) << 31;
    w.padding[0] = w.padding[1] = INT64_C(1) << 30;
    LT_FAILS_SAYING(ladle_halo_exchange_create(x, &w, LADLE_F64, lt_device(), 0, &op),
                    LADLE_ERR_ARG, "padded shard");
    LT_ASSERT(op == NULL, "no op on failure");
    /* the legal windows next to them still plan */
    ladle_window_init(&w, 2);
    w.kernel[1] = 3;
    w.padding[1] = 1;
    LT_OK(ladle_halo_exchange_create(x, &w, LADLE_F64, lt_device(), 0, &op));
    ladle_op_destroy(&op);
    ladle_layout_destroy(&x);
    ladle_partition_destroy(&p);
}
END_TEST

START_TEST(conv_and_pool_windows)
{
    int64_t xs[4] = {2, 3, 5, 5};
    ladle_conv_desc d;
    ladle_op *op = NULL;
    ladle_conv_desc_init(&d, 2, 3, 4, 3);
    d.kernel[1] = HUGE64;
    LT_FAILS_SAYING(ladle_conv_create(&d, xs, LADLE_F32, lt_device(), 1, &op),
                    LADLE_ERR_ARG, "kernel");
    ladle_conv_desc_init(&d, 2, 3, 4, 3);
    d.padding[0] = HUGE64;
    LT_FAILS_SAYING(ladle_conv_create(&d, xs, LADLE_F32, lt_device(), 1, &op),
                    LADLE_ERR_ARG,
                    "spatial dimension 0: padding 9223372036854775807 is too large");
    ladle_conv_desc_init(&d, 2, 3, 4, 3);
    d.dilation[1] = BIG;
    LT_FAILS_SAYING(ladle_conv_create(&d, xs, LADLE_F32, lt_device(), 1, &op),
                    LADLE_ERR_ARG, "dila");
    ladle_conv_desc_init(&d, 2, 3, 4, 3);
    d.stride[1] = HUGE64;
    LT_FAILS_SAYING(ladle_conv_create(&d, xs, LADLE_F32, lt_device(), 1, &op),
                    LADLE_ERR_ARG, "stride");
    ladle_conv_desc_init(&d, 2, 3, 4, 3);
    d.dilation[0] = INT64_C(1) << 40; /* each fits; their product does not */
    d.kernel[0] = INT64_C(1) << 30;
    LT_FAILS_SAYING(ladle_conv_create(&d, xs, LADLE_F32, lt_device(), 1, &op),
                    LADLE_ERR_ARG, "dilated kernel");
    /* legal values whose output is too large: 2^31 x 2^31 per channel */
    ladle_conv_desc_init(&d, 2, 3, 4, 3);
    d.padding[0] = d.padding[1] = INT64_C(1) << 30;
    LT_FAILS_SAYING(ladle_conv_create(&d, xs, LADLE_F32, lt_device(), 1, &op),
                    LADLE_ERR_SHAPE, "too large");
    /* and a weight that is: 2^20 x 2^20 taps over 2^20 output channels */
    ladle_conv_desc_init(&d, 2, 3, INT64_C(1) << 20, INT64_C(1) << 20);
    d.padding[0] = d.padding[1] = INT64_C(1) << 19;
    LT_FAILS_SAYING(ladle_conv_create(&d, xs, LADLE_F32, lt_device(), 1, &op),
                    LADLE_ERR_ARG, "weight");

    ladle_pool_desc pd;
    ladle_pool_desc_init(&pd, LADLE_POOL_MAX, 2, 2);
    pd.kernel[0] = HUGE64;
    pd.padding[0] = HUGE64 / 2;
    LT_FAILS_SAYING(ladle_pool_create(&pd, xs, LADLE_F32, lt_device(), &op), LADLE_ERR_ARG,
                    "too large");
    ladle_pool_desc_init(&pd, LADLE_POOL_MAX, 2, 2);
    pd.dilation[1] = HUGE64;
    LT_FAILS_SAYING(ladle_pool_create(&pd, xs, LADLE_F32, lt_device(), &op), LADLE_ERR_ARG,
                    "dila");
    ladle_pool_desc_init(&pd, LADLE_POOL_AVG, 2, 2);
    pd.stride[0] = HUGE64;
    pd.ceil_mode = 1;
    LT_FAILS_SAYING(ladle_pool_create(&pd, xs, LADLE_F32, lt_device(), &op), LADLE_ERR_ARG,
                    "stride");
    LT_ASSERT(op == NULL, "no op on failure");
}
END_TEST

START_TEST(distributed_windows)
{
    int g1[4] = {1, 1, 1, 1};
    ladle_partition *p = lt_partition(4, g1, 0);
    int64_t xs[4] = {2, 3, 8, 8};
    ladle_op *op = NULL;
    ladle_conv_desc d;
    ladle_conv_desc_init(&d, 2, 3, 5, 3);
    d.padding[1] = HUGE64;
    LT_FAILS_SAYING(ladle_dist_conv_create(&d, p, xs, LADLE_F64, lt_device(), 1, &op),
                    LADLE_ERR_ARG, "padding");
    ladle_conv_desc_init(&d, 2, 3, 5, 3);
    d.kernel[0] = BIG;
    d.padding[0] = BIG / 2;
    LT_FAILS_SAYING(ladle_dist_conv_create(&d, p, xs, LADLE_F64, lt_device(), 1, &op),
                    LADLE_ERR_ARG, "too large");
    ladle_conv_desc_init(&d, 2, 3, 5, 3);
    d.dilation[0] = HUGE64;
    LT_FAILS_SAYING(
        ladle_dist_conv_grid_create(&d, &(ladle_dist_partitions){.x = p, .w = p, .y = p},
                                    xs, LADLE_F64, lt_device(), 1, &op),
        LADLE_ERR_ARG, "dila");
    ladle_pool_desc pd;
    ladle_pool_desc_init(&pd, LADLE_POOL_MAX, 2, 2);
    pd.stride[1] = HUGE64;
    LT_FAILS_SAYING(ladle_dist_pool_create(&pd, p, xs, LADLE_F64, lt_device(), &op),
                    LADLE_ERR_ARG, "stride");
    /* an x whose extents wrap when multiplied */
    int64_t wrap[4] = {2, 3, INT64_C(1) << 40, INT64_C(1) << 40};
    ladle_conv_desc_init(&d, 2, 3, 5, 3);
    LT_FAILS_SAYING(ladle_dist_conv_create(&d, p, wrap, LADLE_F64, lt_device(), 1, &op),
                    LADLE_ERR_SHAPE, "too large");
    LT_FAILS_SAYING(ladle_dist_flatten_create(p, wrap, p, LADLE_F64, lt_device(), 0, &op),
                    LADLE_ERR_SHAPE, "too large");
    LT_ASSERT(op == NULL, "no op on failure");
    ladle_partition_destroy(&p);
}
END_TEST

START_TEST(tensor_shapes)
{
    ladle_tensor *t = NULL;
    int64_t wrap[2] = {INT64_C(1) << 40, INT64_C(1) << 30};
    LT_FAILS_SAYING(ladle_tensor_create(LADLE_F32, LADLE_CPU, 2, wrap, &t), LADLE_ERR_SHAPE,
                    "too large");
    int64_t max2[2] = {HUGE64, 2};
    LT_FAILS_SAYING(ladle_tensor_create(LADLE_F64, LADLE_CPU, 2, max2, &t), LADLE_ERR_SHAPE,
                    "too large");
    /* zero volume, but strides that would wrap */
    int64_t zero[3] = {HUGE64, HUGE64, 0};
    LT_FAILS_SAYING(ladle_tensor_create(LADLE_F64, LADLE_CPU, 3, zero, &t), LADLE_ERR_SHAPE,
                    "strides");
    double cell = 0;
    int64_t two[2] = {2, 2}, far[2] = {HUGE64 / 2, 1};
    LT_FAILS_SAYING(ladle_tensor_wrap(LADLE_F64, LADLE_CPU, 2, two, far, &cell, &t),
                    LADLE_ERR_ARG, "stride");
    LT_ASSERT(t == NULL, "no tensor on failure");
    /* layers that multiply extents before they build anything */
    ladle_op *op = NULL;
    int64_t x3[3] = {2, INT64_C(1) << 40, INT64_C(1) << 40};
    LT_FAILS_SAYING(ladle_flatten_create(3, x3, LADLE_F32, lt_device(), &op),
                    LADLE_ERR_SHAPE, "too large");
    int64_t wide[2] = {INT64_C(1) << 40, 1}; /* a y of 2^40 x 2^30 does not fit */
    LT_FAILS_SAYING(ladle_linear_create(LT_LINEAR(wide[1], INT64_C(1) << 30, 1, 0), 2, wide,
                                        LADLE_F32, lt_device(), 1, &op),
                    LADLE_ERR_SHAPE, "too large");
    int64_t x2[2] = {4, INT64_C(1) << 31};
    LT_FAILS_SAYING(ladle_linear_create(LT_LINEAR(x2[1], INT64_C(1) << 31, 1, 0), 2, x2,
                                        LADLE_F32, lt_device(), 1, &op),
                    LADLE_ERR_SHAPE, "2^31");
    /* parts whose extents add up past 2^63 (zero volume: nothing allocated) */
    enum { PARTS = 70 };
    ladle_tensor *parts[PARTS], *whole = NULL;
    int64_t piece[2] = {0, INT64_C(1) << 57};
    int ok = 1;
    for (int k = 0; k < PARTS; k++)
        ok &= ladle_tensor_create(LADLE_F32, lt_device(), 2, piece, &parts[k]) == LADLE_OK;
    ok &= ladle_tensor_create(LADLE_F32, lt_device(), 2, piece, &whole) == LADLE_OK;
    LT_ASSERT(ok, "zero-volume parts: %s", ladle_error_message());
    LT_FAILS_SAYING(ladle_concat(PARTS, (const ladle_tensor *const *)parts, 1, whole),
                    LADLE_ERR_SHAPE, "pass the whole");
    for (int k = 0; k < PARTS; k++)
        ladle_tensor_destroy(&parts[k]);
    ladle_tensor_destroy(&whole);
    LT_ASSERT(op == NULL, "no op on failure");
}
END_TEST

START_TEST(partitions_and_layouts)
{
    ladle_partition *p = NULL;
    int wide[2] = {1 << 20, 1 << 20}, widest[2] = {2147483647, 2147483647};
    LT_FAILS_SAYING(
        ladle_partition_create(ladle_comm_of(MPI_COMM_WORLD), 2, wide, NULL, &p),
        LADLE_ERR_ARG, "too large");
    LT_FAILS_SAYING(
        ladle_partition_create(ladle_comm_of(MPI_COMM_WORLD), 2, widest, NULL, &p),
        LADLE_ERR_ARG, "too large");
    int many[1] = {1 << 29}; /* fits the limit, not the world */
    LT_FAILS_SAYING(
        ladle_partition_create(ladle_comm_of(MPI_COMM_WORLD), 1, many, NULL, &p),
        LADLE_ERR_PARTITION, "ranks");
    LT_ASSERT(p == NULL, "no partition on failure");
    int s[1] = {lt_size};
    p = lt_partition(1, s, 0);
    ladle_partition *sub = NULL;
    LT_FAILS_SAYING(ladle_partition_create_subset(p, 1, many, NULL, &sub),
                    LADLE_ERR_PARTITION, "ranks");
    /* split sizes whose running sum would wrap */
    int64_t sizes0[64], global[1] = {10};
    for (int i = 0; i < lt_size; i++)
        sizes0[i] = HUGE64;
    const int64_t *sizes[1] = {sizes0};
    ladle_layout *l = NULL;
    LT_FAILS_SAYING(ladle_layout_create_split(p, 1, global, sizes, &l), LADLE_ERR_SHAPE,
                    "extent 10");
    int64_t huge[1] = {HUGE64};
    LT_FAILS_SAYING(ladle_layout_create_balanced(p, 1, huge, &l), LADLE_ERR_SHAPE,
                    "too large");
    LT_ASSERT(l == NULL && sub == NULL, "nothing made on failure");
    ladle_partition_destroy(&p);
}
END_TEST

LT_SUITE("hostile", "hostile", 0, halo_windows, conv_and_pool_windows, distributed_windows,
         tensor_shapes, partitions_and_layouts)
