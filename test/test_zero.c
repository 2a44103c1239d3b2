/* Sharded data parallelism (ladle_network_desc's zero_stage): a chain of
 * distributed linear layers (data parallel over D replicas, and with
 * T = 2 tensor-parallel ranks inside each replica where the rank count is
 * even) trained several steps with SGD-momentum and AdamW, with and
 * without clipping by the global gradient norm, at stages 0, 1 and 2 and
 * with several bucket sizes: the losses and parameters of stages 1 and 2
 * equal stage 0's bit for bit, and stage 0 equals the sequential chain
 * trained on the whole batch on one rank to 1e-12 (f64); the norms equal
 * the sequential chain's and a hand-computed one. */
#include <math.h>
#include <stdio.h>

#include "harness.h"

#define STEPS 4
#define N 11 /* the batch: uneven over 2..8 replicas */
#define IN 7
#define H 5 /* uneven over 2 tensor-parallel ranks */
#define OUT 3

typedef struct chain {
    ladle_network *net;
    ladle_partition *px, *pw1, *ph, *pw2;
} chain;

/* The chain lin(IN->H), tanh, lin(H->OUT), MSE over P ranks as D replicas
 * of T tensor-parallel ranks: x over D x 1, the first weights T x D x 1
 * (column-parallel), the hidden activations D x T, the second weights
 * 1 x D x T (row-parallel). */
static chain make_chain(int T, int stage, size_t bucket)
{
    int P;
    MPI_Comm_size(MPI_COMM_WORLD, &P);
    int D = P / T;
    chain c = {0};
    c.px = lt_partition(2, (int[]){D, 1}, 0);
    c.pw1 = lt_partition(3, (int[]){T, D, 1}, 0);
    c.ph = lt_partition(2, (int[]){D, T}, 0);
    c.pw2 = lt_partition(3, (int[]){1, D, T}, 0);
    ladle_op *ops[3], *loss = NULL;
    LT_OK(ladle_dist_linear_create(LT_LINEAR(IN, H, 1, 0),
                                   &(ladle_dist_partitions){c.px, c.pw1, c.ph},
                                   (int64_t[]){N, IN}, LADLE_F64, lt_device(), 11, &ops[0]));
    int nd;
    int64_t ys[LADLE_MAX_NDIM];
    ladle_op_y_shape(ops[0], &nd, ys);
    LT_OK(ladle_activation_create(LADLE_TANH, 0, nd, ys, LADLE_F64, lt_device(), &ops[1]));
    LT_OK(ladle_dist_linear_create(LT_LINEAR(H, OUT, 1, 0),
                                   &(ladle_dist_partitions){c.ph, c.pw2, c.px},
                                   (int64_t[]){N, H}, LADLE_F64, lt_device(), 12, &ops[2]));
    LT_OK(ladle_dist_loss_create(LT_LOSS(LADLE_LOSS_MSE, LADLE_REDUCE_MEAN, 0, 0), c.px,
                                 (int64_t[]){N, OUT}, LADLE_F64, lt_device(), &loss));
    ladle_network_desc d;
    ladle_network_desc_init(&d);
    d.zero_stage = stage;
    d.bucket_bytes = bucket;
    LT_OK(ladle_network_create_desc(&d, 3, ops, loss, &c.net));
    return c;
}

/* The same chain of sequential layers on the whole batch. */
static chain make_sequential(void)
{
    chain c = {0};
    ladle_op *ops[3], *loss = NULL;
    LT_OK(ladle_linear_create(LT_LINEAR(IN, H, 1, 0), 2, (int64_t[]){N, IN}, LADLE_F64,
                              lt_device(), 11, &ops[0]));
    LT_OK(ladle_activation_create(LADLE_TANH, 0, 2, (int64_t[]){N, H}, LADLE_F64, lt_device(),
                                  &ops[1]));
    LT_OK(ladle_linear_create(LT_LINEAR(H, OUT, 1, 0), 2, (int64_t[]){N, H}, LADLE_F64,
                              lt_device(), 12, &ops[2]));
    LT_OK(ladle_loss_create(LT_LOSS(LADLE_LOSS_MSE, LADLE_REDUCE_MEAN, 0, 0), 2,
                            (int64_t[]){N, OUT}, LADLE_F64, lt_device(), &loss));
    LT_OK(ladle_network_create(3, ops, loss, 0, &c.net));
    return c;
}

static void free_chain(chain *c)
{
    ladle_network_destroy(&c->net);
    ladle_partition_destroy(&c->px);
    ladle_partition_destroy(&c->pw1);
    ladle_partition_destroy(&c->ph);
    ladle_partition_destroy(&c->pw2);
}

/* This rank's block of a global tensor g, for layout l of op shape. */
static ladle_tensor *block_of(const ladle_tensor *g, const ladle_layout *l, int nd,
                              const int64_t *shape)
{
    int64_t off[LADLE_MAX_NDIM] = {0};
    if (l != NULL)
        LT_OK(ladle_layout_box(l, LADLE_SELF, off, NULL));
    ladle_tensor *t = lt_tensor(LADLE_F64, nd, shape);
    lt_box_extract(g, off, t);
    return t;
}

/* The 2-norm of every gradient of a sequential network, by hand. */
static double hand_norm(const ladle_network *net)
{
    double s = 0;
    for (int i = 0; i < ladle_network_size(net); i++)
        for (int k = 0; k < ladle_op_num_params(ladle_network_layer(net, i)); k++) {
            const ladle_tensor *g = ladle_op_grad(ladle_network_layer(net, i), k);
            for (int64_t e = 0; e < ladle_tensor_numel(g); e++)
                s += lt_get(g, e) * lt_get(g, e);
        }
    return sqrt(s);
}

/* Train c for STEPS steps on (X, Y) (global), recording the losses and the
 * norms (clip > 0: clipping to clip). *states gets the optimizer's state
 * elements on this rank. */
static void train(chain *c, const ladle_tensor *X, const ladle_tensor *Y, int adamw,
                  double clip, double *losses, double *norms, int64_t *states)
{
    ladle_op *first = ladle_network_layer(c->net, 0), *loss = ladle_network_loss_op(c->net);
    int nd;
    int64_t xs[LADLE_MAX_NDIM], ts[LADLE_MAX_NDIM];
    ladle_op_x_shape(first, &nd, xs);
    ladle_tensor *x = block_of(X, ladle_op_x_layout(first), nd, xs);
    ladle_op_x_shape(loss, &nd, ts);
    ladle_tensor *t = block_of(Y, ladle_op_x_layout(loss), nd, ts);
    ladle_optimizer_desc od;
    if (adamw) {
        ladle_optimizer_desc_init(&od, LADLE_OPT_ADAMW, 0.02);
        od.weight_decay = 0.05;
    } else {
        ladle_optimizer_desc_init(&od, LADLE_OPT_SGD, 0.1);
        od.momentum = 0.9;
        od.weight_decay = 0.01;
    }
    ladle_optimizer *opt = NULL;
    LT_OK(ladle_optimizer_create(&od, &opt));
    LT_OK(ladle_optimizer_add_network(opt, c->net));
    for (int s = 0; s < STEPS; s++) {
        LT_OK(ladle_network_zero_grad(c->net));
        LT_OK(ladle_network_forward(c->net, x, NULL));
        LT_OK(ladle_network_loss(c->net, t, &losses[s]));
        LT_OK(ladle_network_backward(c->net, 1));
        double hand = ladle_op_x_layout(first) ? 0 : hand_norm(c->net);
        LT_OK(ladle_network_clip_grad_norm(c->net, clip > 0 ? clip : INFINITY, &norms[s]));
        if (!ladle_op_x_layout(first))
            LT_ASSERT(fabs(hand - norms[s]) <= 1e-14 * hand, "norm %.17g, by hand %.17g",
                      norms[s], hand);
        LT_OK(ladle_optimizer_step(opt));
    }
    LT_OK(ladle_network_gather_params(c->net));
    /* the loss is known on the ranks of its partition, rank 0 among them */
    MPI_Bcast(losses, STEPS, MPI_DOUBLE, 0, MPI_COMM_WORLD);
    *states = 0;
    for (int i = 0; i < ladle_optimizer_num_params(opt); i++)
        for (int k = 0; k < 2; k++)
            if (ladle_optimizer_state(opt, i, k))
                *states += ladle_tensor_numel(ladle_optimizer_state(opt, i, k));
    ladle_optimizer_destroy(&opt);
    ladle_tensor_destroy(&x);
    ladle_tensor_destroy(&t);
}

/* The largest |a - b| over the parameters of two networks of one layout. */
static double param_diff(const ladle_network *a, const ladle_network *b)
{
    double e = 0;
    for (int i = 0; i < ladle_network_size(a); i++)
        for (int k = 0; k < ladle_op_num_params(ladle_network_layer(a, i)); k++) {
            const ladle_tensor *p = ladle_op_param(ladle_network_layer(a, i), k);
            const ladle_tensor *q = ladle_op_param(ladle_network_layer(b, i), k);
            for (int64_t j = 0; j < ladle_tensor_numel(p); j++)
                e = fmax(e, fabs(lt_get(p, j) - lt_get(q, j)));
        }
    return e;
}

/* The largest relative error of a distributed network's parameter shards
 * against the sequential network's whole parameters. */
static double seq_diff(const ladle_network *dist, const ladle_network *seq)
{
    double e = 0;
    for (int i = 0; i < ladle_network_size(dist); i++)
        for (int k = 0; k < ladle_op_num_params(ladle_network_layer(dist, i)); k++) {
            int nd, owner;
            int64_t gs[LADLE_MAX_NDIM], off[LADLE_MAX_NDIM];
            LT_OK(ladle_op_param_shard(ladle_network_layer(dist, i), k, &nd, gs, off, &owner));
            const ladle_tensor *p = ladle_op_param(ladle_network_layer(dist, i), k);
            if (ladle_tensor_numel(p) > 0)
                e = fmax(e, lt_box_error(ladle_op_param(ladle_network_layer(seq, i), k), off, p));
        }
    return e;
}

START_TEST(stages_train_alike)
{
    int P;
    MPI_Comm_size(MPI_COMM_WORLD, &P);
    ladle_tensor *X = lt_tensor(LADLE_F64, 2, (int64_t[]){N, IN});
    ladle_tensor *Y = lt_tensor(LADLE_F64, 2, (int64_t[]){N, OUT});
    LT_OK(ladle_tensor_fill_random(X, 5, 0));
    LT_OK(ladle_tensor_fill_random(Y, 6, 0));
    /* one bucket per group, or several: the slices' bounds move, the sums'
     * order does not (the norm's partial sums do, so stages are compared
     * on one bucket size) */
    const size_t buckets[3] = {0, 64, 200};
    int clipped = 0;
    for (int T = 1; T <= 2; T++) {
        if (P % T != 0)
            continue;
        for (int adamw = 0; adamw <= 1; adamw++)
            for (int clip = 0; clip <= 1; clip++) {
                double lmax = clip ? 0.05 : 0;
                double l[3][STEPS], nrm[3][STEPS], ls[STEPS], ns[STEPS];
                int64_t states[3], sst;
                chain seq = make_sequential();
                train(&seq, X, Y, adamw, lmax, ls, ns, &sst);
                chain c[3];
                for (int s = 0; s < 3; s++) {
                    c[s] = make_chain(T, s, buckets[(T + 2 * adamw + clip) % 3]);
                    LT_ASSERT(ladle_network_zero_stage(c[s].net) == s, "stage %d", s);
                    train(&c[s], X, Y, adamw, lmax, l[s], nrm[s], &states[s]);
                }
                double lerr = 0, nerr = 0;
                int same = 1;
                for (int k = 0; k < STEPS; k++) {
                    lerr = fmax(lerr, fabs(l[0][k] - ls[k]) / (1 + fabs(ls[k])));
                    nerr = fmax(nerr, fabs(nrm[0][k] - ns[k]) / (1 + ns[k]));
                    clipped |= clip && ns[k] > lmax;
                    for (int s = 1; s < 3; s++)
                        same &= l[s][k] == l[0][k] && nrm[s][k] == nrm[0][k];
                }
                double perr = seq_diff(c[0].net, seq.net);
                double d1 = param_diff(c[1].net, c[0].net), d2 = param_diff(c[2].net, c[0].net);
                LT_ASSERT(lerr < 1e-13 && nerr < 1e-13 && perr < 1e-12,
                          "T %d adamw %d clip %d: stage 0 against the sequential chain: "
                          "losses %.2e, norms %.2e, parameters %.2e",
                          T, adamw, clip, lerr, nerr, perr);
                LT_ASSERT(same && d1 == 0 && d2 == 0,
                          "T %d adamw %d clip %d: stages 1 and 2 differ from 0 (losses and "
                          "norms equal: %d; parameters by %.3e and %.3e)",
                          T, adamw, clip, same, d1, d2);
                /* the states (1 or 2 per element) shrink to a slice of each
                 * bucket, plus its padding */
                int D = P / T, nb = ladle_network_buckets(c[1].net);
                LT_ASSERT(states[1] == states[2] &&
                              states[1] * D <= states[0] + 2 * (int64_t)D * nb &&
                              (D == 1 || states[1] < states[0]),
                          "state elements: stage 0 %lld, 1 %lld, 2 %lld over %d replicas",
                          (long long)states[0], (long long)states[1], (long long)states[2],
                          D);
                for (int s = 0; s < 3; s++)
                    free_chain(&c[s]);
                free_chain(&seq);
            }
    }
    LT_ASSERT(clipped, "clipping never cut a gradient: the clipped cases test nothing");
    ladle_tensor_destroy(&X);
    ladle_tensor_destroy(&Y);
}
END_TEST

/* The checkpoint's tensors are global: parameters saved from a replicated
 * network load into a stage 1 network (its slices taken from them), and
 * both then train alike, bit for bit. */
START_TEST(checkpoint_across_stages)
{
    int P;
    MPI_Comm_size(MPI_COMM_WORLD, &P);
    char path[64];
    snprintf(path, sizeof path, "/tmp/ladle_zero_ckpt_%d.bin", P);
    ladle_tensor *X = lt_tensor(LADLE_F64, 2, (int64_t[]){N, IN});
    ladle_tensor *Y = lt_tensor(LADLE_F64, 2, (int64_t[]){N, OUT});
    LT_OK(ladle_tensor_fill_random(X, 15, 0));
    LT_OK(ladle_tensor_fill_random(Y, 16, 0));
    double l0[STEPS], l1[STEPS], n0[STEPS], n1[STEPS];
    int64_t st0, st1;
    chain c0 = make_chain(1, 0, 64), c1 = make_chain(1, 1, 64);
    train(&c0, X, Y, 0, 0, l0, n0, &st0);
    LT_OK(ladle_checkpoint_save(path, ladle_comm_of(MPI_COMM_WORLD), c0.net, NULL, 0, NULL));
    int nmeta = 0;
    int64_t meta[1];
    LT_OK(ladle_checkpoint_load(path, ladle_comm_of(MPI_COMM_WORLD), c1.net, NULL, 1, meta,
                                &nmeta));
    LT_ASSERT(param_diff(c0.net, c1.net) == 0, "the loaded parameters differ");
    train(&c0, X, Y, 1, 0.05, l0, n0, &st0);
    train(&c1, X, Y, 1, 0.05, l1, n1, &st1);
    double d = param_diff(c0.net, c1.net);
    LT_ASSERT(d == 0 && l0[STEPS - 1] == l1[STEPS - 1],
              "after loading, stage 1 trains %.3e away from stage 0", d);
    free_chain(&c0);
    free_chain(&c1);
    int rank;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Barrier(MPI_COMM_WORLD);
    if (rank == 0)
        remove(path);
    ladle_tensor_destroy(&X);
    ladle_tensor_destroy(&Y);
}
END_TEST

/* Bad options fail on every rank with a message. */
START_TEST(bad_options)
{
    chain c = make_chain(1, 0, 0);
    LT_FAILS(ladle_network_clip_grad_norm(c.net, 0, NULL), LADLE_ERR_ARG);
    LT_FAILS(ladle_network_clip_grad_norm(c.net, NAN, NULL), LADLE_ERR_ARG);
    LT_FAILS(ladle_network_clip_grad_norm(NULL, 1, NULL), LADLE_ERR_NULL);
    free_chain(&c);
    ladle_op *lin = NULL, *loss = NULL;
    ladle_network *net = NULL;
    LT_OK(ladle_linear_create(LT_LINEAR(IN, OUT, 1, 0), 2, (int64_t[]){N, IN}, LADLE_F64,
                              lt_device(), 1, &lin));
    LT_OK(ladle_loss_create(LT_LOSS(LADLE_LOSS_MSE, LADLE_REDUCE_MEAN, 0, 0), 2,
                            (int64_t[]){N, OUT}, LADLE_F64, lt_device(), &loss));
    ladle_network_desc d;
    ladle_network_desc_init(&d);
    d.zero_stage = 3;
    LT_FAILS_SAYING(ladle_network_create_desc(&d, 1, &lin, loss, &net), LADLE_ERR_ARG,
                    "zero_stage 3");
    d.zero_stage = -1;
    LT_FAILS(ladle_network_create_desc(&d, 1, &lin, loss, &net), LADLE_ERR_ARG);
    d.size = 0;
    d.zero_stage = 1;
    LT_FAILS(ladle_network_create_desc(&d, 1, &lin, loss, &net), LADLE_ERR_ARG);
    LT_FAILS(ladle_network_create_desc(NULL, 1, &lin, loss, &net), LADLE_ERR_NULL);
    LT_ASSERT(net == NULL, "a failed create set the network");
    ladle_op_destroy(&lin);
    ladle_op_destroy(&loss);
}
END_TEST

LT_SUITE("zero", "zero", 0, stages_train_alike, checkpoint_across_stages, bad_options)
