/* Bad input that cuts across the primitives: NULL handles, ranks that
 * disagree, partitions from unrelated communicators, checked ops; and the
 * API calls that must not report success for work they did not do: calls
 * out of order, arguments that disagree with each other, losses that are
 * not finite. */
#include <limits.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"
#include "src/op/op_impl.h" /* containers_refuse_two_devices re-points a backend */
#include "src/comm/schedule.h"

START_TEST(null_handles)
{
    int64_t shape[1] = {2};
    ladle_tensor *t = lt_tensor(LADLE_F64, 1, shape);
    LT_FAILS(ladle_op_forward(NULL, t, t), LADLE_ERR_NULL);
    LT_FAILS(ladle_op_adjoint(NULL, t, t), LADLE_ERR_NULL);
    LT_OK(ladle_op_destroy(NULL));
    ladle_op *op = NULL;
    LT_OK(ladle_op_destroy(&op));
    LT_OK(ladle_partition_destroy(NULL));
    LT_OK(ladle_layout_destroy(NULL));
    LT_ASSERT(ladle_op_x_layout(NULL) == NULL && ladle_op_active(NULL) == 0 &&
                  ladle_partition_active(NULL) == 0 && ladle_layout_ndim(NULL) == 0,
              "NULL-safe accessors");
    int nd;
    int64_t sh[4];
    LT_FAILS(ladle_op_x_shape(NULL, &nd, sh), LADLE_ERR_NULL);
    ladle_adjoint_result r;
    LT_FAILS(ladle_adjoint_test(NULL, 1, &r), LADLE_ERR_NULL);
    LT_FAILS(ladle_halo_exchange_begin(NULL, t), LADLE_ERR_NULL);
    ladle_tensor_destroy(&t);
}
END_TEST

/* Ranks that pass different arguments to a collective create fail
 * together with LADLE_ERR_ARG instead of hanging or planning nonsense. */
START_TEST(ranks_disagree)
{
    if (lt_size < 2)
        return;
    int s[1] = {lt_size};
    ladle_partition *p = lt_partition(1, s, 0);
    ladle_op *op = NULL;
    int64_t mine[1] = {lt_rank == 0 ? 5 : 6};
    int axes[1] = {0};
    ladle_status st = ladle_all_sum_reduce_create(LT_ASR(1, axes, 1, mine, 0), p, LADLE_F64,
                                                  lt_device(), &op);
    LT_ASSERT(st == LADLE_ERR_ARG && op == NULL, "%s", ladle_status_name(st));
    ladle_error_clear();
    /* a failure on one rank only (here: an unknown dtype on rank 0) is
     * reported on the others as LADLE_ERR_REMOTE */
    int64_t n[1] = {4};
    st = ladle_all_sum_reduce_create(LT_ASR(1, axes, 1, n, 0), p,
                                     lt_rank == 0 ? (ladle_dtype)9 : LADLE_F64, lt_device(),
                                     &op);
    LT_ASSERT(st == (lt_rank == 0 ? LADLE_ERR_DTYPE : LADLE_ERR_REMOTE), "%s",
              ladle_status_name(st));
    ladle_error_clear();
    ladle_partition_destroy(&p);
}
END_TEST

START_TEST(unrelated_parents)
{
    if (lt_size < 2)
        return;
    /* the same processes in another order: not the same parent */
    MPI_Comm reversed;
    MPI_Comm_split(MPI_COMM_WORLD, 0, lt_size - lt_rank, &reversed);
    int one[1] = {1};
    ladle_partition *a = lt_partition(1, one, 0), *b = NULL, *u = NULL;
    LT_OK(ladle_partition_create(ladle_comm_of(reversed), 1, one, NULL, &b));
    ladle_op *op = NULL;
    int64_t n[1] = {3};
    LT_FAILS(ladle_broadcast_create(LT_BCAST(1, n, 0), a, b, LADLE_F64, lt_device(), &op),
             LADLE_ERR_PARTITION);
    LT_FAILS(ladle_partition_create_union(a, b, &u), LADLE_ERR_PARTITION);
    ladle_partition_destroy(&a);
    ladle_partition_destroy(&b);
    MPI_Comm_free(&reversed);
}
END_TEST

START_TEST(not_a_halo_exchange)
{
    int s[1] = {1};
    ladle_partition *p = lt_partition(1, s, 0);
    ladle_op *op = NULL;
    int64_t n[1] = {3};
    LT_OK(ladle_broadcast_create(LT_BCAST(1, n, 0), p, p, LADLE_F64, lt_device(), &op));
    ladle_tensor *t = lt_op_tensor(op, 0);
    ladle_halo_geometry g;
    LT_FAILS(ladle_halo_exchange_begin(op, t), LADLE_ERR_ARG);
    LT_FAILS(ladle_halo_exchange_geometry(op, &g), LADLE_ERR_ARG);
    LT_ASSERT(ladle_halo_exchange_bulk_layout(op) == NULL, "no bulk layout");
    ladle_tensor_destroy(&t);
    ladle_op_destroy(&op);
    ladle_partition_destroy(&p);
}
END_TEST

START_TEST(op_outlives_its_inputs)
{
    /* partitions and layouts may be destroyed before the op that uses them */
    int s[1] = {lt_size};
    ladle_partition *p = lt_partition(1, s, 0);
    ladle_layout *x = NULL;
    int64_t global[1] = {10};
    LT_OK(ladle_layout_create_balanced(p, 1, global, &x));
    ladle_op *op = NULL;
    LT_OK(ladle_repartition_create(x, x, LADLE_F64, lt_device(), 0, &op));
    ladle_layout_destroy(&x);
    ladle_partition_destroy(&p);
    lt_adjoint_ok(op, 3, "repartition after its inputs are gone");
    LT_ASSERT(ladle_layout_ndim(ladle_op_x_layout(op)) == 1, "layout alive");
    ladle_op_destroy(&op);
}
END_TEST

/* A LeNet over every rank (the batch split lt_size ways), its input block
 * and labels. */
typedef struct small_net {
    ladle_network *net;
    ladle_tensor *x, *t;
} small_net;

static small_net lenet(void)
{
    small_net s = {NULL, NULL, NULL};
    ladle_lenet_desc d;
    ladle_lenet_desc_init(&d);
    d.batch = 2 * lt_size;
    d.image = 12;
    d.dtype = LADLE_F64;
    d.device = lt_device();
    d.data_ways = lt_size;
    LT_OK(ladle_lenet_create(&d, ladle_comm_of(MPI_COMM_WORLD), &s.net));
    int64_t off[4] = {0}, box[4] = {0}, loff[2] = {0}, lbox[2] = {0};
    ladle_layout_box(ladle_op_x_layout(ladle_network_layer(s.net, 0)), LADLE_SELF, off,
                     box);
    ladle_layout_box(ladle_op_x_layout(ladle_network_loss_op(s.net)), LADLE_SELF, loff,
                     lbox);
    s.x = lt_tensor(LADLE_F64, 4, box);
    s.t = lt_tensor(LADLE_I64, 1, lbox);
    LT_OK(ladle_tensor_fill_random(s.x, 5, 0));
    for (int64_t i = 0; i < lbox[0]; i++)
        lt_set(s.t, i, (loff[0] + i) % 10);
    return s;
}

static void small_net_free(small_net *s)
{
    ladle_network_destroy(&s->net);
    ladle_tensor_destroy(&s->x);
    ladle_tensor_destroy(&s->t);
}

/* Forward, loss and backward in any other order are refused on every rank,
 * before they touch anything. */
START_TEST(network_call_order)
{
    small_net s = lenet();
    double loss = -3;
    LT_FAILS_SAYING(ladle_network_loss(s.net, s.t, &loss), LADLE_ERR_STATE, "forward");
    LT_ASSERT(loss == -3, "a refused loss wrote %g", loss);
    LT_FAILS_SAYING(ladle_network_backward(s.net, 1), LADLE_ERR_STATE, "loss");
    LT_OK(ladle_network_forward(s.net, s.x, NULL));
    LT_FAILS_SAYING(ladle_network_backward(s.net, 1), LADLE_ERR_STATE, "loss");
    LT_OK(ladle_network_loss(s.net, s.t, &loss));
    LT_ASSERT(isfinite(loss) && loss > 0, "loss %g", loss);
    LT_OK(ladle_network_backward(s.net, 1));
    LT_FAILS_SAYING(ladle_network_backward(s.net, 1), LADLE_ERR_STATE, "consumes");
    /* a failed forward (a wrong dtype) leaves no forward behind */
    ladle_tensor *x32 =
        lt_tensor(LADLE_F32, ladle_tensor_ndim(s.x), ladle_tensor_shape(s.x));
    ladle_status st = ladle_network_forward(s.net, x32, NULL);
    LT_ASSERT(st == LADLE_ERR_DTYPE, "forward with f32 input: %s", ladle_status_name(st));
    ladle_error_clear();
    LT_FAILS_SAYING(ladle_network_loss(s.net, s.t, &loss), LADLE_ERR_STATE, "forward");
    ladle_tensor_destroy(&x32);
    small_net_free(&s);
}
END_TEST

/* Arguments that disagree with each other: a network whose loss has
 * another dtype than its layers, an optimizer gradient of another shape
 * (the same element count), layer and loss tensors on another device or of
 * another shape. */
START_TEST(inconsistent_arguments)
{
    int64_t xs[2] = {4, 3};
    ladle_op *lin = NULL, *loss = NULL;
    ladle_network *net = NULL;
    LT_OK(ladle_linear_create(LT_LINEAR(xs[1], 3, 1, 0), 2, xs, LADLE_F32, lt_device(), 1,
                              &lin));
    LT_OK(ladle_loss_create(LT_LOSS(LADLE_LOSS_MSE, LADLE_REDUCE_MEAN, 0, 0), 2, xs,
                            LADLE_F64, lt_device(), &loss));
    ladle_status st = ladle_network_create(1, &lin, loss, 0, &net);
    const char *msg = ladle_error_message();
    LT_ASSERT(st == LADLE_ERR_DTYPE && net == NULL && strstr(msg, "f64") &&
                  strstr(msg, "f32"),
              "layers f32, loss f64: %s (%s)", ladle_status_name(st), msg);
    ladle_error_clear();
    ladle_op_destroy(&loss);

    ladle_optimizer_desc od;
    ladle_optimizer *opt = NULL;
    ladle_optimizer_desc_init(&od, LADLE_OPT_ADAM, 0.1);
    LT_OK(ladle_optimizer_create(&od, &opt));
    int64_t s23[2] = {2, 3}, s32[2] = {3, 2}, s6[1] = {6};
    ladle_tensor *p = lt_tensor(LADLE_F32, 2, s23), *g = lt_tensor(LADLE_F32, 2, s32);
    ladle_tensor *g6 = lt_tensor(LADLE_F32, 1, s6);
    LT_FAILS_SAYING(ladle_optimizer_add_param(opt, p, g), LADLE_ERR_SHAPE, "3x2");
    LT_FAILS_SAYING(ladle_optimizer_add_param(opt, p, g6), LADLE_ERR_SHAPE, "2x3");
    LT_ASSERT(ladle_optimizer_num_params(opt) == 0, "a refused parameter was added");
    od.lr = INFINITY;
    ladle_optimizer *bad = NULL;
    LT_FAILS_SAYING(ladle_optimizer_create(&od, &bad), LADLE_ERR_ARG, "finite");
    LT_FAILS_SAYING(ladle_optimizer_set_lr(opt, NAN), LADLE_ERR_ARG, "finite");

    /* host memory cannot pass for GPU memory (without CUDA built in, no
     * tensor can say it is on the GPU) */
    float cells[12] = {0};
    ladle_tensor *xd = NULL, *y = lt_tensor(LADLE_F32, 2, xs),
                 *x = lt_tensor(LADLE_F32, 2, xs);
    LT_FAILS_SAYING(ladle_tensor_wrap(LADLE_F32, LADLE_CUDA, 2, xs, NULL, cells, &xd),
                    LADLE_ERR_DEVICE, "cuda");
    /* a tensor of another device, passed to layers on the suite's device */
    ladle_device other = lt_device() == LADLE_GUARDED ? LADLE_CPU : LADLE_GUARDED;
    LT_OK(ladle_tensor_create(LADLE_F32, other, 2, xs, &xd));
    LT_FAILS_SAYING(ladle_layer_forward(lin, NULL, xd, y), LADLE_ERR_DEVICE,
                    ladle_device_name(other));
    LT_OK(ladle_loss_create(LT_LOSS(LADLE_LOSS_MSE, LADLE_REDUCE_MEAN, 0, 0), 2, xs,
                            LADLE_F32, lt_device(), &loss));
    ladle_tensor *out = lt_tensor(LADLE_F32, 0, NULL);
    LT_FAILS_SAYING(ladle_loss_forward(loss, NULL, xd, y, out), LADLE_ERR_DEVICE,
                    ladle_device_name(other));
    /* a loss gradient of the input's element count but not its shape */
    ladle_ctx *ctx = NULL;
    int64_t s34[2] = {3, 4};
    ladle_tensor *wrong = lt_tensor(LADLE_F32, 2, s34);
    LT_OK(ladle_ctx_create(loss, &ctx));
    LT_OK(ladle_loss_forward(loss, ctx, x, y, out));
    LT_FAILS_SAYING(ladle_loss_backward(loss, ctx, out, wrong), LADLE_ERR_SHAPE, "shape");
    ladle_ctx_destroy(&ctx);
    ladle_tensor_destroy(&wrong), ladle_tensor_destroy(&out);
    ladle_tensor_destroy(&xd), ladle_tensor_destroy(&x), ladle_tensor_destroy(&y);
    ladle_tensor_destroy(&p), ladle_tensor_destroy(&g), ladle_tensor_destroy(&g6);
    ladle_optimizer_destroy(&opt);
    ladle_op_destroy(&loss), ladle_op_destroy(&lin);
}
END_TEST

/* The message after its "[rank R] " prefix is the same on every rank. */
static int same_message_everywhere(void)
{
    const char *m = strchr(ladle_error_message(), ']');
    uint64_t h = 1469598103934665603ull;
    for (const char *c = m ? m : ""; *c; c++)
        h = (h ^ (unsigned char)*c) * 1099511628211ull;
    unsigned long long lo = h, hi = h;
    MPI_Allreduce(MPI_IN_PLACE, &lo, 1, MPI_UNSIGNED_LONG_LONG, MPI_MIN, MPI_COMM_WORLD);
    MPI_Allreduce(MPI_IN_PLACE, &hi, 1, MPI_UNSIGNED_LONG_LONG, MPI_MAX, MPI_COMM_WORLD);
    return lo == hi;
}

/* Losses that come out infinite or NaN are LADLE_ERR_NUMERIC, with the
 * value still reported: sequential, distributed (one rank's infinite
 * logit fails every rank alike) and through a network. */
START_TEST(non_finite_losses)
{
    int64_t s13[2] = {1, 3}, one[1] = {1};
    ladle_op *op = NULL;
    ladle_tensor *x = lt_tensor(LADLE_F64, 2, s13), *out = lt_tensor(LADLE_F64, 0, NULL);
    ladle_tensor *label = lt_tensor(LADLE_I64, 1, one);
    LT_OK(ladle_loss_create(LT_LOSS(LADLE_LOSS_CROSS_ENTROPY, LADLE_REDUCE_MEAN, 0, 0), 2,
                            s13, LADLE_F64, lt_device(), &op));
    for (int k = 0; k < 3; k++) {
        LT_OK(ladle_tensor_fill(x, 0.5));
        lt_set(x, k == 2 ? 0 : 1, k == 1 ? -INFINITY : INFINITY);
        lt_set(label, 0, 1);
        LT_FAILS_SAYING(ladle_loss_forward(op, NULL, x, label, out), LADLE_ERR_NUMERIC,
                        "cross-entropy loss is");
        LT_ASSERT(!isfinite(lt_get(out, 0)), "case %d: the value %g is not reported", k,
                  lt_get(out, 0));
    }
    ladle_op_destroy(&op);
    /* terms that overflow f32, per element */
    int64_t s4[1] = {4};
    ladle_tensor *a = lt_tensor(LADLE_F32, 1, s4), *b = lt_tensor(LADLE_F32, 1, s4);
    ladle_tensor *each = lt_tensor(LADLE_F32, 1, s4);
    LT_OK(ladle_loss_create(LT_LOSS(LADLE_LOSS_MSE, LADLE_REDUCE_NONE, 0, 0), 1, s4,
                            LADLE_F32, lt_device(), &op));
    lt_set(a, 2, 1e30);
    LT_FAILS_SAYING(ladle_loss_forward(op, NULL, a, b, each), LADLE_ERR_NUMERIC,
                    "element 2");
    ladle_op_destroy(&op);

    /* distributed: an infinite logit on the last rank only */
    int g[2] = {lt_size, 1};
    int64_t xs[2] = {2 * lt_size, 3};
    ladle_partition *p = lt_partition(2, g, 0);
    LT_OK(ladle_dist_loss_create(LT_LOSS(LADLE_LOSS_CROSS_ENTROPY, LADLE_REDUCE_MEAN, 0, 0),
                                 p, xs, LADLE_F64, lt_device(), &op));
    int64_t box[2];
    LT_OK(ladle_layout_box(ladle_op_x_layout(op), LADLE_SELF, NULL, box));
    ladle_tensor *bx = lt_tensor(LADLE_F64, 2, box), *bt = lt_tensor(LADLE_I64, 1, box);
    LT_OK(ladle_tensor_fill(bx, 0.5));
    if (lt_rank == lt_size - 1)
        lt_set(bx, 1, INFINITY);
    ladle_status st = ladle_loss_forward(op, NULL, bx, bt, out);
    LT_ASSERT(st == LADLE_ERR_NUMERIC && !isfinite(lt_get(out, 0)) &&
                  strstr(ladle_error_message(), "whole batch"),
              "one rank's infinite logit: %s (%s), loss %g", ladle_status_name(st),
              ladle_error_message(), lt_get(out, 0));
    LT_ASSERT(same_message_everywhere(), "the ranks report different messages: %s",
              ladle_error_message());
    ladle_error_clear();
    ladle_op_destroy(&op);
    ladle_partition_destroy(&p);

    /* a network: the loss is still reported, the backward refused */
    int64_t xs2[2] = {4, 3};
    ladle_op *lin = NULL, *mse = NULL;
    ladle_network *net = NULL;
    LT_OK(ladle_linear_create(LT_LINEAR(xs2[1], 3, 1, 0), 2, xs2, LADLE_F32, lt_device(), 1,
                              &lin));
    LT_OK(ladle_loss_create(LT_LOSS(LADLE_LOSS_MSE, LADLE_REDUCE_MEAN, 0, 0), 2, xs2,
                            LADLE_F32, lt_device(), &mse));
    LT_OK(ladle_network_create(1, &lin, mse, 0, &net));
    ladle_tensor *nx = lt_tensor(LADLE_F32, 2, xs2), *nt = lt_tensor(LADLE_F32, 2, xs2);
    LT_OK(ladle_tensor_fill(nx, 1e30));
    double loss = 0;
    LT_OK(ladle_network_forward(net, nx, NULL));
    LT_FAILS_SAYING(ladle_network_loss(net, nt, &loss), LADLE_ERR_NUMERIC, "MSE loss is");
    LT_ASSERT(isinf(loss), "the network reports the loss %g", loss);
    LT_FAILS_SAYING(ladle_network_backward(net, 1), LADLE_ERR_STATE, "loss");
    ladle_network_destroy(&net);
    ladle_tensor_destroy(&nx), ladle_tensor_destroy(&nt);
    ladle_tensor_destroy(&bx), ladle_tensor_destroy(&bt);
    ladle_tensor_destroy(&a), ladle_tensor_destroy(&b), ladle_tensor_destroy(&each);
    ladle_tensor_destroy(&x), ladle_tensor_destroy(&out), ladle_tensor_destroy(&label);
}
END_TEST

/* Every create on a device ladle was built without (CUDA here) fails with
 * LADLE_ERR_DEVICE on every rank, naming the device: sequential layers,
 * primitives, distributed layers and models alike. */
START_TEST(creates_on_a_missing_device)
{
    const ladle_device D = LADLE_CUDA;
    ladle_tensor *probe = NULL;
    if (ladle_tensor_create(LADLE_F32, D, 0, NULL, &probe) == LADLE_OK) {
        ladle_tensor_destroy(&probe); /* built with CUDA: nothing to refuse */
        return;
    }
    ladle_error_clear();
    ladle_op *op = NULL;
    int64_t x2[2] = {4, 3}, img[4] = {2, 1, 5, 5}, v4[1] = {4}, f2[2] = {4, 3};
    ladle_conv_desc cd;
    ladle_conv_desc_init(&cd, 2, 1, 2, 3);
    ladle_pool_desc pd;
    ladle_pool_desc_init(&pd, LADLE_POOL_MAX, 2, 2);
    ladle_batchnorm_desc bd;
    ladle_batchnorm_desc_init(&bd, 3);
    LT_FAILS_SAYING(
        ladle_linear_create(LT_LINEAR(x2[1], 5, 1, 0), 2, x2, LADLE_F32, D, 1, &op),
        LADLE_ERR_DEVICE, "cuda");
    LT_FAILS_SAYING(ladle_conv_create(&cd, img, LADLE_F32, D, 1, &op), LADLE_ERR_DEVICE,
                    "cuda");
    LT_FAILS_SAYING(ladle_pool_create(&pd, img, LADLE_F32, D, &op), LADLE_ERR_DEVICE,
                    "cuda");
    LT_FAILS_SAYING(ladle_global_avg_pool_create(4, img, LADLE_F32, D, &op),
                    LADLE_ERR_DEVICE, "cuda");
    LT_FAILS_SAYING(ladle_batchnorm_create(&bd, 2, x2, LADLE_F32, D, &op), LADLE_ERR_DEVICE,
                    "cuda");
    LT_FAILS_SAYING(ladle_activation_create(LADLE_RELU, 0, 2, x2, LADLE_F32, D, &op),
                    LADLE_ERR_DEVICE, "cuda");
    LT_FAILS_SAYING(ladle_softmax_create(2, x2, 1, 0, LADLE_F32, D, &op), LADLE_ERR_DEVICE,
                    "cuda");
    LT_FAILS_SAYING(ladle_dropout_create(2, x2, 0.5, LADLE_F32, D, 1, &op),
                    LADLE_ERR_DEVICE, "cuda");
    LT_FAILS_SAYING(ladle_reshape_create(4, img, 2, (int64_t[]){2, 25}, LADLE_F32, D, &op),
                    LADLE_ERR_DEVICE, "cuda");
    LT_FAILS_SAYING(ladle_flatten_create(4, img, LADLE_F32, D, &op), LADLE_ERR_DEVICE,
                    "cuda");
    LT_FAILS_SAYING(ladle_loss_create(LT_LOSS(LADLE_LOSS_MSE, LADLE_REDUCE_MEAN, 0, 0), 2,
                                      x2, LADLE_F32, D, &op),
                    LADLE_ERR_DEVICE, "cuda");
    ladle_interp_desc id;
    ladle_interp_desc_init(&id, LADLE_INTERP_LINEAR, 2, 2);
    LT_FAILS_SAYING(ladle_interp_create(&id, img, LADLE_F32, D, &op), LADLE_ERR_DEVICE,
                    "cuda");

    /* the primitives, over every rank */
    ladle_partition *p = lt_partition(1, (int[]){lt_size}, 0);
    ladle_layout *l = NULL;
    int64_t global[1] = {4 * (int64_t)lt_size};
    LT_OK(ladle_layout_create_balanced(p, 1, global, &l));
    ladle_window w;
    ladle_window_init(&w, 1);
    LT_FAILS_SAYING(ladle_broadcast_create(LT_BCAST(1, v4, 0), p, p, LADLE_F64, D, &op),
                    LADLE_ERR_DEVICE, "cuda");
    LT_FAILS_SAYING(ladle_sum_reduce_create(LT_BCAST(1, v4, 0), p, p, LADLE_F64, D, &op),
                    LADLE_ERR_DEVICE, "cuda");
    LT_FAILS_SAYING(
        ladle_all_sum_reduce_create(LT_ASR(1, (int[]){0}, 1, v4, 0), p, LADLE_F64, D, &op),
        LADLE_ERR_DEVICE, "cuda");
    LT_FAILS_SAYING(ladle_repartition_create(l, l, LADLE_F64, D, 0, &op), LADLE_ERR_DEVICE,
                    "cuda");
    LT_FAILS_SAYING(ladle_halo_exchange_create(l, &w, LADLE_F64, D, 0, &op),
                    LADLE_ERR_DEVICE, "cuda");

    /* distributed layers on rank 0: the ranks outside fail alike */
    ladle_partition *p2 = lt_partition(2, (int[]){1, 1}, 0);
    ladle_partition *p4 = lt_partition(4, (int[]){1, 1, 1, 1}, 0);
    LT_FAILS_SAYING(
        ladle_dist_linear_create(LT_LINEAR(3, 5, 1, 0),
                                 &(ladle_dist_partitions){.x = p2, .w = p2, .y = p2},
                                 (int64_t[]){4, 3}, LADLE_F64, D, 1, &op),
        LADLE_ERR_DEVICE, "cuda");
    LT_FAILS_SAYING(ladle_dist_conv_create(&cd, p4, img, LADLE_F64, D, 1, &op),
                    LADLE_ERR_DEVICE, "cuda");
    LT_FAILS_SAYING(ladle_dist_conv_grid_create(
                        &cd, &(ladle_dist_partitions){.x = p4, .w = p4, .y = p4}, img,
                        LADLE_F64, D, 1, &op),
                    LADLE_ERR_DEVICE, "cuda");
    LT_FAILS_SAYING(ladle_dist_pool_create(&pd, p4, img, LADLE_F64, D, &op),
                    LADLE_ERR_DEVICE, "cuda");
    LT_FAILS_SAYING(ladle_dist_batchnorm_create(&bd, p2, f2, LADLE_F64, D, &op),
                    LADLE_ERR_DEVICE, "cuda");
    LT_FAILS_SAYING(ladle_dist_loss_create(LT_LOSS(LADLE_LOSS_MSE, LADLE_REDUCE_MEAN, 0, 0),
                                           p2, f2, LADLE_F64, D, &op),
                    LADLE_ERR_DEVICE, "cuda");
    LT_FAILS_SAYING(ladle_dist_flatten_create(p4, img, p2, LADLE_F64, D, 0, &op),
                    LADLE_ERR_DEVICE, "cuda");
    LT_FAILS_SAYING(ladle_dist_global_avg_pool_create(p4, img, p2, LADLE_F64, D, 0, &op),
                    LADLE_ERR_DEVICE, "cuda");
    LT_FAILS_SAYING(ladle_dist_interp_create(&id, p4, img, LADLE_F64, D, &op),
                    LADLE_ERR_DEVICE, "cuda");
    LT_ASSERT(op == NULL, "an op was made on a missing device");

    /* a model takes its device from the descriptor (the CPU by default) */
    ladle_lenet_desc ld;
    ladle_lenet_desc_init(&ld);
    LT_ASSERT(ld.device == LADLE_CPU, "ladle_lenet_desc_init puts the model on %s",
              ladle_device_name(ld.device));
    ld.batch = 2;
    ld.device = D;
    ladle_op *layers[16], *loss = NULL;
    int n = 0;
    LT_FAILS_SAYING(ladle_lenet_layers(&ld, 16, layers, &n, &loss), LADLE_ERR_DEVICE,
                    "cuda");
    ladle_layout_destroy(&l);
    ladle_partition_destroy(&p);
    ladle_partition_destroy(&p2);
    ladle_partition_destroy(&p4);
}
END_TEST

/* A layer on the device other than the suite's: the CPU when the suite runs
 * elsewhere, else the guarded test device if ladle has it, else a CPU layer
 * whose backend instance claims the guarded device (the table is the CPU's,
 * so it still runs; only the containers' device checks see a difference). */
static ladle_backend fake_guarded;

static ladle_op *layer_elsewhere(const int64_t *xs, ladle_device *where)
{
    ladle_op *op = NULL;
    *where = lt_device() == LADLE_CPU ? LADLE_GUARDED : LADLE_CPU;
    if (ladle_linear_create(LT_LINEAR(xs[1], xs[1], 1, 0), 2, xs, LADLE_F64, *where, 2,
                            &op) == LADLE_OK)
        return op;
    ladle_error_clear();
    LT_OK(ladle_linear_create(LT_LINEAR(xs[1], xs[1], 1, 0), 2, xs, LADLE_F64, LADLE_CPU, 2,
                              &op));
    fake_guarded = *ladle__backend(LADLE_CPU);
    fake_guarded.device = LADLE_GUARDED;
    op->be = &fake_guarded;
    return op;
}

START_TEST(containers_refuse_two_devices)
{
    int64_t xs[2] = {4, 3};
    ladle_device where;
    ladle_op *a = NULL, *b = layer_elsewhere(xs, &where), *loss = NULL;
    LT_OK(ladle_linear_create(LT_LINEAR(xs[1], 3, 1, 0), 2, xs, LADLE_F64, lt_device(), 1,
                              &a));
    LT_OK(ladle_loss_create(LT_LOSS(LADLE_LOSS_MSE, LADLE_REDUCE_MEAN, 0, 0), 2, xs,
                            LADLE_F64, lt_device(), &loss));
    LT_ASSERT(ladle_op_device(a) == lt_device() && ladle_op_device(b) == where, "ops on %s and %s",
              ladle_device_name(ladle_op_device(a)), ladle_device_name(ladle_op_device(b)));
    ladle_op *seq = NULL;
    ladle_network *net = NULL;
    /* the message names both layers' devices */
    LT_FAILS_SAYING(ladle_sequential_create(2, (ladle_op *[]){a, b}, &seq),
                    LADLE_ERR_DEVICE, ladle_device_name(where));
    LT_FAILS_SAYING(ladle_sequential_create(2, (ladle_op *[]){b, a}, &seq),
                    LADLE_ERR_DEVICE, ladle_device_name(lt_device()));
    LT_FAILS_SAYING(ladle_network_create(2, (ladle_op *[]){a, b}, loss, 0, &net),
                    LADLE_ERR_DEVICE, ladle_device_name(where));
    /* a loss on the other device than the layers */
    LT_FAILS_SAYING(ladle_network_create(1, (ladle_op *[]){b}, loss, 0, &net),
                    LADLE_ERR_DEVICE, "loss");
    LT_ASSERT(seq == NULL && net == NULL, "a container was made");
    /* one device is fine, and the container is on it */
    LT_OK(ladle_sequential_create(1, (ladle_op *[]){a}, &seq));
    LT_ASSERT(ladle_op_device(seq) == lt_device(), "the sequential is on %s",
              ladle_device_name(ladle_op_device(seq)));
    ladle_op_destroy(&seq);
    ladle_op_destroy(&b);
    ladle_op_destroy(&loss);
}
END_TEST

/* One MPI message counts its elements in an int: the checked conversion
 * takes 0 and INT_MAX, refuses INT_MAX + 1 naming the size and a negative
 * count, and a schedule refuses a message above INT_MAX when it is planned
 * (finalised), long before anything would be sent. */
START_TEST(message_counts)
{
    int n = -7;
    LT_OK(ladle__mpi_count("test", "a message", 0, &n));
    LT_ASSERT(n == 0, "0 became %d", n);
    LT_OK(ladle__mpi_count("test", "a message", INT_MAX, &n));
    LT_ASSERT(n == INT_MAX, "INT_MAX became %d", n);
    n = 5;
    LT_FAILS_SAYING(ladle__mpi_count("test", "a message", (int64_t)INT_MAX + 1, &n),
                    LADLE_ERR_UNSUPPORTED, "2147483648");
    LT_FAILS_SAYING(ladle__mpi_count("test", "a message", -1, &n), LADLE_ERR_ARG,
                    "negative");
    LT_FAILS_SAYING(ladle__mpi_count("test", "a shard", INT64_MAX, &n),
                    LADLE_ERR_UNSUPPORTED, "a shard");
    LT_ASSERT(n == 5, "a refused count still wrote %d", n);
    for (int recv = 0; recv < 2; recv++) {
        ladle_sched *s = NULL;
        LT_OK(ladle_sched_create(LADLE_F32, &s));
        ladle_ref x = ladle_ref_make(LADLE_BUF_X, 0);
        if (recv)
            ladle_sched_recv(s, x, (int64_t)1 << 31, 0, 0);
        else
            ladle_sched_send(s, x, (int64_t)1 << 31, 0, 0);
        LT_FAILS_SAYING(ladle_sched_finalize(s, MPI_COMM_SELF, ladle__backend(LADLE_CPU)),
                        LADLE_ERR_UNSUPPORTED, "2147483648");
        ladle_sched_destroy(&s);
    }
}
END_TEST

/* A kernel that fails, for a_failed_call_posts_nothing. */
static ladle_status failing_box(const ladle_backend *be, ladle_dtype dtype, ladle_box_mode mode,
                                int ndim, const int64_t *ext, const void *src,
                                const int64_t *sstr, void *dst, const int64_t *dstr)
{
    return ladle__raise(LADLE_ERR_DEVICE, "copy_box", "the test's failing kernel");
}

/* A call that fails after its receives are posted cancels them before it
 * returns, so MPI writes nothing into memory the caller may free next: a
 * message sent afterwards with the same tag must reach a new receive (were
 * the old one still posted, it would take the message, and this test would
 * hang until its timeout). */
START_TEST(a_failed_call_posts_nothing)
{
    MPI_Comm comm;
    MPI_Comm_dup(MPI_COMM_WORLD, &comm);
    int peer = (lt_rank + 1) % lt_size, from = (lt_rank + lt_size - 1) % lt_size;
    ladle_backend_table table = *ladle__backend(LADLE_CPU)->fn;
    table.copy_box = failing_box;
    ladle_backend bad = *ladle__backend(LADLE_CPU);
    bad.fn = &table;
    ladle_sched *s = NULL;
    LT_OK(ladle_sched_create(LADLE_F64, &s));
    ladle_sched_recv(s, ladle_ref_make(LADLE_BUF_Y, 0), 4, from, 5);
    ladle_sched_copy(s, LADLE_BOX_COPY, ladle_ref_make(LADLE_BUF_X, 0),
                     ladle_ref_make(LADLE_BUF_Y, 4), 4);
    LT_OK(ladle_sched_finalize(s, comm, &bad));
    double *x = calloc(8, sizeof *x), *y = calloc(8, sizeof *y);
    LT_FAILS_SAYING(ladle_sched_run(s, x, y, NULL), LADLE_ERR_DEVICE, "failing kernel");
    LT_ASSERT(!ladle_sched_in_flight(s), "the failed call is still in flight");
    ladle_sched_destroy(&s);
    free(y);
    /* the same tag again: a new receive gets it */
    double out[4] = {1, 2, 3, 4}, in[4] = {0};
    MPI_Request req;
    MPI_Irecv(in, 4, MPI_DOUBLE, from, 5, comm, &req);
    MPI_Send(out, 4, MPI_DOUBLE, peer, 5, comm);
    MPI_Wait(&req, MPI_STATUS_IGNORE);
    LT_ASSERT(in[3] == 4.0, "the message went elsewhere");
    free(x);
    MPI_Comm_free(&comm);
}
END_TEST

LT_SUITE("errors", "errors", 0, null_handles, ranks_disagree, unrelated_parents,
         not_a_halo_exchange, op_outlives_its_inputs, network_call_order,
         inconsistent_arguments, non_finite_losses, creates_on_a_missing_device,
         containers_refuse_two_devices, message_counts, a_failed_call_posts_nothing)
