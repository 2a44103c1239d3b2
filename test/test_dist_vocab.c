/* The vocabulary-parallel cross entropy and token embedding against their
 * sequential twins on the gathered tensors (loss values, dx, y, dW, the
 * initial weights) over D x P grids with classes and rows that do not
 * divide, every reduction, label smoothing, class weights and
 * ignore_index, f64 (1e-12) and f32 against f64; the embedding's
 * dot-product test (lookup and scatter-add), and its f64 results equal
 * to the bit; bad input refused on every rank with the same status. The
 * embedding runs on the suite's device (the CPU, the guarded device, the
 * emulated GPU). */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "harness.h"

static uint64_t mix(uint64_t z)
{
    z += 0x9e3779b97f4a7c15ull;
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

/* A value in [-1, 1) keyed by (seed, i): the same on every rank. */
static double uniform(uint64_t seed, int64_t i)
{
    return (double)(mix(seed * 1000003ull + (uint64_t)i) >> 11) * 0x1p-52 - 1.0;
}

static ladle_tensor *cpu(ladle_dtype dt, int ndim, const int64_t *shape)
{
    ladle_tensor *t = NULL;
    LT_OK(ladle_tensor_create(dt, LADLE_CPU, ndim, shape, &t));
    return t;
}

static void fill(ladle_tensor *t, uint64_t seed, double scale)
{
    for (int64_t i = 0; i < ladle_tensor_numel(t); i++)
        if (ladle_tensor_dtype(t) == LADLE_F64)
            ((double *)ladle_tensor_data(t))[i] = scale * uniform(seed, i);
        else
            ((float *)ladle_tensor_data(t))[i] = (float)(scale * uniform(seed, i));
}

static double val(const ladle_tensor *t, int64_t i)
{
    return ladle_tensor_dtype(t) == LADLE_F64 ? ((const double *)ladle_tensor_data(t))[i]
                                              : ((const float *)ladle_tensor_data(t))[i];
}

static int on_cpu(void) { return lt_device() == LADLE_CPU; }

/* ---- the loss ---- */

enum { PLAIN, SMOOTH, IGNORE, ALL, VARIANTS };

#define IGNORED (-100)

/* Labels keyed by the seed, every fifth one ignored when ignore is set. */
static int64_t label_of(uint64_t seed, int64_t m, int64_t classes, int ignore)
{
    if (ignore && m % 5 == 2)
        return IGNORED;
    return (int64_t)(mix(seed + 77 * (uint64_t)m) % (uint64_t)classes);
}

static void desc_of(ladle_loss_desc *d, int variant, ladle_reduction red, double *weights,
                    int64_t classes)
{
    ladle_loss_desc_init(d, LADLE_LOSS_CROSS_ENTROPY, red);
    if (variant == SMOOTH || variant == ALL)
        d->label_smoothing = 0.15;
    if (variant == IGNORE || variant == ALL)
        d->ignore_index = IGNORED;
    if (variant == ALL) {
        for (int64_t k = 0; k < classes; k++)
            weights[k] = 0.5 + (double)(k % 4) * 0.3;
        d->weights = weights;
        d->num_weights = classes;
    }
}

/* The sequential loss on the gathered logits (f64): value(s) and dx. */
static void seq_loss(const ladle_loss_desc *d, int64_t M, int64_t C, const ladle_tensor *X,
                     const ladle_tensor *T, const ladle_tensor *dL, ladle_tensor *L,
                     ladle_tensor *dX)
{
    ladle_op *seq = NULL;
    ladle_ctx *ctx = NULL;
    LT_OK(ladle_loss_create(d, 2, (int64_t[]){M, C}, LADLE_F64, LADLE_CPU, &seq));
    LT_OK(ladle_ctx_create(seq, &ctx));
    LT_OK(ladle_loss_forward(seq, ctx, X, T, L));
    LT_OK(ladle_loss_backward(seq, ctx, dL, dX));
    ladle_ctx_destroy(&ctx);
    ladle_op_destroy(&seq);
}

static void loss_case(int D, int P, int64_t M, int64_t C, int variant, ladle_reduction red,
                      ladle_dtype dt, const char *what)
{
    if (D * P > lt_size)
        return;
    double *weights = malloc(sizeof(double) * (size_t)C);
    ladle_loss_desc d;
    desc_of(&d, variant, red, weights, C);
    int none = red == LADLE_REDUCE_NONE, ignore = variant == IGNORE || variant == ALL;
    uint64_t seed = (uint64_t)(M * 131 + C * 7 + variant * 3 + red);
    /* the global tensors, alike on every rank */
    ladle_tensor *X = cpu(LADLE_F64, 2, (int64_t[]){M, C}),
                 *dX = cpu(LADLE_F64, 2, (int64_t[]){M, C});
    ladle_tensor *T = cpu(LADLE_I64, 1, &M);
    int64_t nl = none ? M : 1;
    ladle_tensor *L = cpu(LADLE_F64, 1, &nl), *dL = cpu(LADLE_F64, 1, &nl);
    fill(X, seed, 4.0);
    fill(dL, seed + 1, 1.0);
    for (int64_t m = 0; m < M; m++)
        ((int64_t *)ladle_tensor_data(T))[m] = label_of(seed, m, C, ignore);
    seq_loss(&d, M, C, X, T, dL, L, dX);

    ladle_partition *px = lt_partition(2, (int[]){D, P}, 0);
    ladle_op *op = NULL;
    ladle_ctx *ctx = NULL;
    LT_OK(ladle_dist_vocab_loss_create(&d, px, (int64_t[]){M, C}, dt, lt_device(), &op));
    LT_ASSERT(ladle_op_kind_of(op) == LADLE_OP_DIST_VOCAB_LOSS, "%s: kind", what);
    int64_t off[2] = {0, 0}, box[2] = {0, 0};
    LT_OK(ladle_layout_box(ladle_op_x_layout(op), LADLE_SELF, off, box));
    int64_t nb = none ? box[0] : 1;
    ladle_tensor *x = cpu(dt, 2, box), *dx = cpu(dt, 2, box), *t = cpu(LADLE_I64, 1, box);
    ladle_tensor *l = cpu(dt, 1, &nb), *dl = cpu(dt, 1, &nb);
    lt_box_extract(X, off, x);
    for (int64_t m = 0; m < box[0]; m++)
        ((int64_t *)ladle_tensor_data(t))[m] =
            ((int64_t *)ladle_tensor_data(T))[off[0] + m];
    lt_box_extract(dL, (int64_t[]){none ? off[0] : 0}, dl);
    LT_OK(ladle_ctx_create(op, &ctx));
    /* on the test device: the same tensors in its memory, the results
     * copied back (the layer stages through host buffers of its own) */
    ladle_tensor *on[5] = {x, t, l, dl, dx};
    for (int k = 0; k < 5 && !on_cpu(); k++) {
        LT_OK(ladle_tensor_create(ladle_tensor_dtype(on[k]), lt_device(),
                                  ladle_tensor_ndim(on[k]), ladle_tensor_shape(on[k]),
                                  &on[k]));
        if (k != 2 && k != 4) /* the inputs */
            LT_OK(ladle_tensor_copy(on[k], k == 0 ? x : k == 1 ? t : dl));
    }
    LT_OK(ladle_loss_forward(op, ctx, on[0], on[1], on[2]));
    LT_OK(ladle_loss_backward(op, ctx, on[3], on[4]));
    for (int k = 0; k < 5 && !on_cpu(); k++) {
        if (k == 2 || k == 4)
            LT_OK(ladle_tensor_copy(k == 2 ? l : dx, on[k]));
        ladle_tensor_destroy(&on[k]);
    }
    double tol = dt == LADLE_F64 ? 1e-12 : 2e-5, err = 0;
    if (ladle_partition_active(px)) {
        err = lt_box_error(L, (int64_t[]){none ? off[0] : 0}, l);
        err = fmax(err, lt_box_error(dX, off, dx));
    }
    LT_ASSERT(err <= tol, "%s: error %.3e (tolerance %.1e)", what, err, tol);
    ladle_ctx_destroy(&ctx);
    ladle_op_destroy(&op);
    ladle_partition_destroy(&px);
    ladle_tensor_destroy(&X), ladle_tensor_destroy(&dX), ladle_tensor_destroy(&T);
    ladle_tensor_destroy(&L), ladle_tensor_destroy(&dL);
    ladle_tensor_destroy(&x), ladle_tensor_destroy(&dx), ladle_tensor_destroy(&t);
    ladle_tensor_destroy(&l), ladle_tensor_destroy(&dl);
    free(weights);
}

static const int grids[][2] = {{1, 1}, {1, 2}, {2, 1}, {1, 3}, {2, 2},
                               {1, 4}, {3, 2}, {2, 3}, {1, 6}, {6, 1}};

START_TEST(loss_equivalence)
{
    ladle_reduction reds[3] = {LADLE_REDUCE_MEAN, LADLE_REDUCE_SUM, LADLE_REDUCE_NONE};
    for (size_t g = 0; g < sizeof grids / sizeof grids[0]; g++)
        for (int variant = 0; variant < VARIANTS; variant++)
            for (int r = 0; r < 3; r++)
                for (int f32 = 0; f32 < 2; f32++) {
                    /* every reduction of the plain and the full loss, the
                     * mean of the others; f32 for the means */
                    int full = variant == PLAIN || variant == ALL;
                    if ((r > 0 && (f32 || !full)) || (f32 && !full))
                        continue;
                    char what[96];
                    snprintf(what, sizeof what, "loss %dx%d, variant %d, reduction %d, %s",
                             grids[g][0], grids[g][1], variant, r, f32 ? "f32" : "f64");
                    loss_case(grids[g][0], grids[g][1], 13, 11, variant, reds[r],
                              f32 ? LADLE_F32 : LADLE_F64, what);
                }
    /* one class per vocabulary rank; a single row per row block */
    loss_case(1, lt_size, 5, lt_size, ALL, LADLE_REDUCE_MEAN, LADLE_F64, "C = P");
    loss_case(lt_size, 1, lt_size, 9, PLAIN, LADLE_REDUCE_MEAN, LADLE_F64, "M = D");
    /* slices of two and three classes */
    loss_case(1, lt_size, 7, 2 * lt_size + 1, SMOOTH, LADLE_REDUCE_MEAN, LADLE_F64,
              "C = 2P + 1");
    /* slices longer than the CPU's vector loops (32 lanes), with tails */
    for (int f32 = 0; f32 < 2; f32++) {
        ladle_dtype dt = f32 ? LADLE_F32 : LADLE_F64;
        loss_case(1, lt_size, 6, 150 * lt_size + 37, ALL, LADLE_REDUCE_MEAN, dt,
                  f32 ? "long slices, f32" : "long slices, f64");
        loss_case(1, lt_size, 6, 150 * lt_size + 37, PLAIN, LADLE_REDUCE_NONE, dt,
                  f32 ? "long plain slices, f32" : "long plain slices, f64");
    }
}
END_TEST

/* Logits far from 0 on one rank only: the max taken across the ranks. */
START_TEST(loss_large_logits)
{
    if (!on_cpu())
        return;
    int P = lt_size;
    int64_t M = 3, C = 2 * P + 2;
    ladle_loss_desc d;
    ladle_loss_desc_init(&d, LADLE_LOSS_CROSS_ENTROPY, LADLE_REDUCE_SUM);
    ladle_partition *px = lt_partition(2, (int[]){1, P}, 0);
    ladle_op *op = NULL;
    LT_OK(
        ladle_dist_vocab_loss_create(&d, px, (int64_t[]){M, C}, LADLE_F64, LADLE_CPU, &op));
    int64_t off[2], box[2];
    LT_OK(ladle_layout_box(ladle_op_x_layout(op), LADLE_SELF, off, box));
    ladle_tensor *x = cpu(LADLE_F64, 2, box), *t = cpu(LADLE_I64, 1, box);
    ladle_tensor *l = cpu(LADLE_F64, 1, (int64_t[]){1});
    /* row m: class m holds 1000, class m + 1 holds 1000 - log 3 (on the
     * next rank for some rows), the rest -inf (whole slices of some ranks):
     * loss = log(1 + 1/3) for label m, and d loss / dx is -1/4 at class m,
     * 1/4 at class m + 1 and 0 elsewhere */
    for (int64_t m = 0; m < M; m++) {
        ((int64_t *)ladle_tensor_data(t))[m] = m;
        for (int64_t c = 0; c < box[1]; c++) {
            int64_t k = off[1] + c;
            ((double *)ladle_tensor_data(x))[m * box[1] + c] = k == m ? 1000.0
                                                               : k == m + 1
                                                                   ? 1000.0 - log(3.0)
                                                                   : -INFINITY;
        }
    }
    ladle_ctx *ctx = NULL;
    ladle_tensor *dx = cpu(LADLE_F64, 2, box), *dl = cpu(LADLE_F64, 1, (int64_t[]){1});
    ((double *)ladle_tensor_data(dl))[0] = 1.0;
    LT_OK(ladle_ctx_create(op, &ctx));
    LT_OK(ladle_loss_forward(op, ctx, x, t, l));
    LT_OK(ladle_loss_backward(op, ctx, dl, dx));
    double want = 3.0 * log(4.0 / 3.0), got = val(l, 0), err = 0;
    for (int64_t m = 0; m < M; m++)
        for (int64_t c = 0; c < box[1]; c++) {
            int64_t k = off[1] + c;
            double g = k == m ? -0.25 : k == m + 1 ? 0.25 : 0.0;
            err = fmax(err, fabs(val(dx, m * box[1] + c) - g));
        }
    LT_ASSERT(fabs(got - want) <= 1e-12 * want && err <= 1e-12,
              "large logits: %.17g, want %.17g; dx error %.3e", got, want, err);
    ladle_ctx_destroy(&ctx);
    ladle_tensor_destroy(&dx), ladle_tensor_destroy(&dl);
    ladle_op_destroy(&op);
    ladle_partition_destroy(&px);
    ladle_tensor_destroy(&x), ladle_tensor_destroy(&t), ladle_tensor_destroy(&l);
}
END_TEST

START_TEST(loss_bad_input)
{
    if (!on_cpu())
        return;
    int P = lt_size;
    int64_t M = 6, C = 2 * P + 1;
    ladle_loss_desc d, mse, w;
    double weights[64];
    for (int k = 0; k < 64; k++)
        weights[k] = 1.0;
    ladle_loss_desc_init(&d, LADLE_LOSS_CROSS_ENTROPY, LADLE_REDUCE_MEAN);
    ladle_loss_desc_init(&mse, LADLE_LOSS_MSE, LADLE_REDUCE_MEAN);
    ladle_loss_desc_init(&w, LADLE_LOSS_CROSS_ENTROPY, LADLE_REDUCE_MEAN);
    w.weights = weights;
    w.num_weights = C + 1;
    ladle_partition *px = lt_partition(2, (int[]){1, P}, 0);
    ladle_partition *p1 = lt_partition(1, (int[]){P}, 0);
    ladle_op *op = NULL;
    LT_FAILS(ladle_dist_vocab_loss_create(NULL, px, (int64_t[]){M, C}, LADLE_F64, LADLE_CPU,
                                          &op),
             LADLE_ERR_NULL);
    LT_FAILS(ladle_dist_vocab_loss_create(&d, NULL, (int64_t[]){M, C}, LADLE_F64, LADLE_CPU,
                                          &op),
             LADLE_ERR_NULL);
    LT_FAILS(
        ladle_dist_vocab_loss_create(&d, px, (int64_t[]){M, C}, LADLE_F64, LADLE_CPU, NULL),
        LADLE_ERR_NULL);
    LT_FAILS(ladle_dist_vocab_loss_create(&mse, px, (int64_t[]){M, C}, LADLE_F64, LADLE_CPU,
                                          &op),
             LADLE_ERR_UNSUPPORTED);
    LT_FAILS(
        ladle_dist_vocab_loss_create(&d, p1, (int64_t[]){M, C}, LADLE_F64, LADLE_CPU, &op),
        LADLE_ERR_PARTITION);
    LT_FAILS(
        ladle_dist_vocab_loss_create(&d, px, (int64_t[]){M, C}, LADLE_I64, LADLE_CPU, &op),
        LADLE_ERR_DTYPE);
    d.flags = 0x80; /* the flags are the descriptor's: LADLE_CHECKED only */
    LT_FAILS(
        ladle_dist_vocab_loss_create(&d, px, (int64_t[]){M, C}, LADLE_F64, LADLE_CPU, &op),
        LADLE_ERR_ARG);
    d.flags = 0;
    LT_FAILS(ladle_dist_vocab_loss_create(&d, px, NULL, LADLE_F64, LADLE_CPU, &op),
             LADLE_ERR_NULL);
    LT_FAILS(
        ladle_dist_vocab_loss_create(&w, px, (int64_t[]){M, C}, LADLE_F64, LADLE_CPU, &op),
        LADLE_ERR_SHAPE);
    LT_FAILS(
        ladle_dist_vocab_loss_create(&d, px, (int64_t[]){0, C}, LADLE_F64, LADLE_CPU, &op),
        LADLE_ERR_SHAPE);
    /* more vocabulary ranks than classes: refused, no empty slices */
    if (P > 1)
        LT_FAILS(ladle_dist_vocab_loss_create(&d, px, (int64_t[]){M, P - 1}, LADLE_F64,
                                              LADLE_CPU, &op),
                 LADLE_ERR_SHAPE);
    /* ranks passing different arguments */
    if (P > 1)
        LT_FAILS(ladle_dist_vocab_loss_create(&d, px, (int64_t[]){M + (lt_rank == 1), C},
                                              LADLE_F64, LADLE_CPU, &op),
                 LADLE_ERR_ARG);
    LT_ASSERT(op == NULL, "the handle stays untouched");

    LT_OK(
        ladle_dist_vocab_loss_create(&d, px, (int64_t[]){M, C}, LADLE_F64, LADLE_CPU, &op));
    int64_t off[2], box[2];
    LT_OK(ladle_layout_box(ladle_op_x_layout(op), LADLE_SELF, off, box));
    ladle_tensor *x = cpu(LADLE_F64, 2, box), *t = cpu(LADLE_I64, 1, box);
    ladle_tensor *l = cpu(LADLE_F64, 1, (int64_t[]){1}), *tf = cpu(LADLE_F64, 1, box);
    ladle_tensor *lf = cpu(LADLE_F32, 1, (int64_t[]){1}), *xf = cpu(LADLE_F32, 2, box);
    fill(x, 5, 2.0);
    int64_t *lab = ladle_tensor_data(t);
    for (int64_t m = 0; m < M; m++)
        lab[m] = m % C;
    LT_OK(ladle_loss_forward(op, NULL, x, t, l));
    /* a label out of range on the last rank only: the same status everywhere */
    lab[2] = lt_rank == lt_size - 1 ? C : 2;
    LT_FAILS(ladle_loss_forward(op, NULL, x, t, l), LADLE_ERR_ARG);
    lab[2] = lt_rank == 0 ? -1 : 2;
    LT_FAILS(ladle_loss_forward(op, NULL, x, t, l), LADLE_ERR_ARG);
    lab[2] = 2;
    /* vocabulary ranks disagreeing on a label */
    if (P > 1) {
        lab[4] = lt_rank == 1 ? 0 : C - 1; /* a label no rank, one rank or two ranks own */
        LT_FAILS(ladle_loss_forward(op, NULL, x, t, l), LADLE_ERR_ARG);
        lab[4] = 4;
    }
    /* wrong dtypes and shapes on one rank */
    LT_FAILS(ladle_loss_forward(op, NULL, x, lt_rank == 0 ? tf : t, l), LADLE_ERR_DTYPE);
    LT_FAILS(ladle_loss_forward(op, NULL, x, t, lt_rank == lt_size - 1 ? lf : l),
             LADLE_ERR_DTYPE);
    LT_FAILS(ladle_loss_forward(op, NULL, lt_rank == 0 ? l : x, t, l), LADLE_ERR_SHAPE);
    LT_FAILS(ladle_loss_forward(op, NULL, x, t, NULL), LADLE_ERR_NULL);
    /* a non-finite logit: the batch's loss is not finite, on every rank */
    double *xd = ladle_tensor_data(x);
    double keep = xd[0];
    xd[0] = lt_rank == 0 ? NAN : keep;
    LT_FAILS(ladle_loss_forward(op, NULL, x, t, l), LADLE_ERR_NUMERIC);
    xd[0] = keep;
    /* the backward: a ctx that saw no forward, a wrong dinput */
    ladle_ctx *ctx = NULL;
    LT_OK(ladle_ctx_create(op, &ctx));
    LT_FAILS(ladle_loss_backward(op, ctx, l, x), LADLE_ERR_STATE);
    LT_OK(ladle_loss_forward(op, ctx, x, t, l));
    LT_FAILS(ladle_loss_backward(op, ctx, l, xf), LADLE_ERR_DTYPE);
    LT_FAILS(ladle_loss_backward(op, ctx, l, l), LADLE_ERR_SHAPE);
    LT_OK(ladle_loss_backward(op, ctx, l, x));
    /* a loss, not a layer */
    ladle_tensor *y2 = cpu(LADLE_F64, 2, box);
    LT_FAILS(ladle_layer_forward(op, NULL, x, y2), LADLE_ERR_ARG);
    ladle_tensor_destroy(&y2);
    ladle_ctx_destroy(&ctx);
    ladle_op_destroy(&op);
    ladle_partition_destroy(&px), ladle_partition_destroy(&p1);
    ladle_tensor_destroy(&x), ladle_tensor_destroy(&t), ladle_tensor_destroy(&l);
    ladle_tensor_destroy(&tf), ladle_tensor_destroy(&lf), ladle_tensor_destroy(&xf);
}
END_TEST

/* ---- the embedding ---- */

/* <a, b> of two tensors on any device. */
static double dot(const ladle_tensor *a, const ladle_tensor *b)
{
    double s = 0, *va = lt_values(a), *vb = lt_values(b);
    for (int64_t i = 0; i < ladle_tensor_numel(a); i++)
        s += va[i] * vb[i];
    free(va);
    free(vb);
    return s;
}

static double global_sum(double v)
{
    double s = 0;
    MPI_Allreduce(&v, &s, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
    return s;
}

/* y on rank `yrank` of the world; ids N x T. */
static void embed_case(int P, int yrank, const int64_t ids_shape[2], int64_t V, int64_t E,
                       ladle_dtype dt, const char *what)
{
    if (P > lt_size || yrank >= lt_size)
        return;
    const int ndim = 2;
    uint64_t seed = 40 + (uint64_t)(V * 3 + E);
    int64_t ys[4], n = 1;
    for (int d = 0; d < ndim; d++) {
        ys[d] = ids_shape[d];
        n *= ids_shape[d];
    }
    ys[ndim] = E;
    /* the sequential twin in f64, on the whole weight */
    ladle_op *seq = NULL, *op = NULL;
    ladle_ctx *cs = NULL, *cd = NULL;
    ladle_embedding_desc d;
    ladle_embedding_desc_init(&d, V, E);
    LT_OK(ladle_embedding_create(&d, ndim, ids_shape, LADLE_F64, LADLE_CPU, seed, &seq));
    ladle_tensor *ids = cpu(LADLE_I64, ndim, ids_shape);
    for (int64_t i = 0; i < n; i++) /* repeats, and the first and last rows */
        ((int64_t *)ladle_tensor_data(ids))[i] =
            i == 0   ? 0
            : i == 1 ? V - 1
                     : (int64_t)(mix(seed + (uint64_t)i) % (uint64_t)V);
    ladle_tensor *Y = cpu(LADLE_F64, ndim + 1, ys), *dY = cpu(LADLE_F64, ndim + 1, ys);
    fill(dY, seed + 9, 1.0);
    LT_OK(ladle_ctx_create(seq, &cs));
    LT_OK(ladle_layer_forward(seq, cs, ids, Y));
    LT_OK(ladle_layer_backward_weight(seq, cs, dY));

    ladle_partition *pw = lt_partition(1, (int[]){P}, 0);
    ladle_partition *py = lt_partition_ranks(1, (int[]){1}, (int[]){yrank});
    ladle_dist_partitions p = {.w = pw, .y = py};
    /* on the suite's device (ids, y and dy there too) */
    LT_OK(ladle_dist_vocab_embedding_create(&d, &p, ids_shape, dt, lt_device(), seed, &op));
    LT_ASSERT(ladle_op_kind_of(op) == LADLE_OP_DIST_VOCAB_EMBEDDING, "%s: kind", what);
    int64_t xb[4], yb[4];
    int xn, yn;
    LT_OK(ladle_op_x_shape(op, &xn, xb));
    LT_OK(ladle_op_y_shape(op, &yn, yb));
    ladle_tensor *x = lt_tensor(LADLE_I64, xn, xb), *y = lt_tensor(dt, yn, yb),
                 *dy = lt_tensor(dt, yn, yb);
    /* LT_OK agrees over the ranks: every rank asserts, written or not */
    LT_OK(ladle_tensor_numel(x) > 0 ? ladle_tensor_write(x, ladle_tensor_data(ids)) : LADLE_OK);
    int64_t zero[4] = {0, 0, 0, 0};
    lt_box_extract(dY, zero, dy);
    LT_OK(ladle_ctx_create(op, &cd));
    LT_OK(ladle_layer_forward(op, cd, x, y));
    LT_OK(ladle_layer_backward_weight(op, cd, dy));
    LT_FAILS(ladle_layer_backward(op, cd, dy, y), LADLE_ERR_ARG);
    LT_OK(ladle_layer_backward(op, cd, dy, NULL));
    /* the shard: initial weight and gradient against the twin's rows */
    int wn;
    int64_t wg[2], wo[2];
    int owner;
    LT_OK(ladle_op_param_shard(op, 0, &wn, wg, wo, &owner));
    /* f64: the lookup copies and the scatter-add sums in the twin's order,
     * on every device: the same bits */
    double tol = dt == LADLE_F64 ? 0.0 : 1e-6;
    const ladle_tensor *w = ladle_op_param(op, 0), *dw = ladle_op_grad(op, 0);
    double err = lt_box_error(Y, zero, y);
    err = fmax(err, lt_box_error(ladle_op_param(seq, 0), wo, w));
    err = fmax(err, lt_box_error(ladle_op_grad(seq, 0), wo, dw));
    LT_ASSERT(err <= tol && wn == 2 && wg[0] == V && wg[1] == E,
              "%s: error %.3e (tolerance %.1e), global %lldx%lld", what, err, tol,
              (long long)wg[0], (long long)wg[1]);
    /* the rows tile the vocabulary: one owner each */
    double rows = global_sum(owner ? (double)ladle_tensor_shape(w)[0] : 0.0);
    LT_ASSERT(rows == (double)V, "%s: %g rows owned of %lld", what, rows, (long long)V);
    /* the dot-product test: y = L w, dw = L* dy (the first gradient) */
    double a = global_sum(dot(y, dy)), b = global_sum(dot(w, dw));
    double mis = fabs(a - b) / fmax(fabs(a), fabs(b));
    LT_ASSERT(mis <= ladle_adjoint_tolerance(dt) && a != 0,
              "%s: adjoint mismatch %.3e, <Lw, dy> = %.17g, <w, L* dy> = %.17g", what, mis,
              a, b);
    /* gradients accumulate */
    LT_OK(ladle_layer_forward(op, cd, x, y));
    LT_OK(ladle_layer_backward_weight(op, cd, dy));
    LT_OK(ladle_layer_backward_weight(seq, cs, dY));
    err = lt_box_error(ladle_op_grad(seq, 0), wo, dw);
    LT_ASSERT(err <= tol, "%s: accumulated gradient error %.3e", what, err);
    ladle_ctx_destroy(&cs), ladle_ctx_destroy(&cd);
    ladle_op_destroy(&seq), ladle_op_destroy(&op);
    ladle_partition_destroy(&pw), ladle_partition_destroy(&py);
    ladle_tensor_destroy(&ids), ladle_tensor_destroy(&Y), ladle_tensor_destroy(&dY);
    ladle_tensor_destroy(&x), ladle_tensor_destroy(&y), ladle_tensor_destroy(&dy);
}

START_TEST(embedding_equivalence)
{
    for (int P = 1; P <= lt_size; P++)
        for (int where = 0; where < 2; where++)
            for (int f32 = 0; f32 < 2; f32++) {
                char what[96];
                /* f32 on the first shape only; y on the first rank of p_w, or on the last
                 * rank of the world (outside p_w when P < size) */
                int yrank = where ? lt_size - 1 : 0;
                ladle_dtype dt = f32 ? LADLE_F32 : LADLE_F64;
                snprintf(what, sizeof what, "embedding P %d, y on %d, %s", P, yrank,
                         f32 ? "f32" : "f64");
                embed_case(P, yrank, (int64_t[]){3, 5}, 13, 4, dt, what);
                if (f32)
                    continue;
                /* one sequence of 9; 4 of 3 with one row per rank (V = P) */
                embed_case(P, yrank, (int64_t[]){1, 9}, 2 * P + 1, 3, dt, what);
                embed_case(P, yrank, (int64_t[]){4, 3}, P, 2, dt, what);
            }
}
END_TEST

START_TEST(embedding_bad_input)
{
    if (!on_cpu())
        return;
    int P = lt_size;
    int64_t ids_shape[2] = {2, 3}, V = 2 * P + 1, E = 4;
    ladle_partition *pw = lt_partition(1, (int[]){P}, 0);
    ladle_partition *py = lt_partition(1, (int[]){1}, 0);
    ladle_partition *p2 = lt_partition(2, (int[]){1, P}, 0);
    ladle_op *op = NULL;
    ladle_dtype f64 = LADLE_F64;
    ladle_device c = LADLE_CPU;
    ladle_embedding_desc d, bad;
    ladle_embedding_desc_init(&d, V, E);
#define PARTS(pw_, py_) (&(ladle_dist_partitions){.w = (pw_), .y = (py_)})
    const ladle_dist_partitions *p = PARTS(pw, py);
    LT_FAILS(ladle_dist_vocab_embedding_create(NULL, p, ids_shape, f64, c, 1, &op),
             LADLE_ERR_NULL);
    LT_FAILS(ladle_dist_vocab_embedding_create(&d, NULL, ids_shape, f64, c, 1, &op),
             LADLE_ERR_NULL);
    LT_FAILS(
        ladle_dist_vocab_embedding_create(&d, PARTS(NULL, py), ids_shape, f64, c, 1, &op),
        LADLE_ERR_NULL);
    LT_FAILS(
        ladle_dist_vocab_embedding_create(&d, PARTS(pw, NULL), ids_shape, f64, c, 1, &op),
        LADLE_ERR_NULL);
    LT_FAILS(ladle_dist_vocab_embedding_create(&d, p, NULL, f64, c, 1, &op),
             LADLE_ERR_NULL);
    LT_FAILS(ladle_dist_vocab_embedding_create(&d, p, ids_shape, f64, c, 1, NULL),
             LADLE_ERR_NULL);
    LT_FAILS(
        ladle_dist_vocab_embedding_create(&d, PARTS(p2, py), ids_shape, f64, c, 1, &op),
        LADLE_ERR_PARTITION);
    LT_FAILS(
        ladle_dist_vocab_embedding_create(&d, PARTS(pw, p2), ids_shape, f64, c, 1, &op),
        LADLE_ERR_PARTITION);
    /* p->x: the ids are not split; any partition there is refused, saying so */
    LT_FAILS_SAYING(ladle_dist_vocab_embedding_create(
                        &d, &(ladle_dist_partitions){.x = pw, .w = pw, .y = py}, ids_shape,
                        f64, c, 1, &op),
                    LADLE_ERR_PARTITION, "p->x must be NULL");
    LT_FAILS(ladle_dist_vocab_embedding_create(&d, p, ids_shape, LADLE_I64, c, 1, &op),
             LADLE_ERR_DTYPE);
    LT_FAILS(
        ladle_dist_vocab_embedding_create(&d, p, ids_shape, f64, (ladle_device)77, 1, &op),
        LADLE_ERR_DEVICE);
    ladle_embedding_desc_init(&bad, V, 0);
    LT_FAILS_SAYING(ladle_dist_vocab_embedding_create(&bad, p, ids_shape, f64, c, 1, &op),
                    LADLE_ERR_ARG, "embedding_dim 0 must be at least 1");
    /* ids with a non-positive extent (the ids are always N x T) */
    LT_FAILS_SAYING(
        ladle_dist_vocab_embedding_create(&d, p, (int64_t[]){2, 0}, f64, c, 1, &op),
        LADLE_ERR_SHAPE, "ids extent 0 in dimension 1");
    /* the descriptor: its size (zeroed, one byte short), a flag bit beyond
     * LADLE_CHECKED, the same on every rank */
    ladle_embedding_desc zeroed = {0};
    LT_FAILS_SAYING(
        ladle_dist_vocab_embedding_create(&zeroed, p, ids_shape, f64, c, 1, &op),
        LADLE_ERR_ARG, "descriptor size 0");
    ladle_embedding_desc_init(&bad, V, E);
    bad.size = sizeof bad - 1;
    LT_FAILS_SAYING(ladle_dist_vocab_embedding_create(&bad, p, ids_shape, f64, c, 1, &op),
                    LADLE_ERR_ARG, "descriptor size");
    ladle_embedding_desc_init(&bad, V, E);
    bad.flags = 0x80;
    LT_FAILS_SAYING(ladle_dist_vocab_embedding_create(&bad, p, ids_shape, f64, c, 1, &op),
                    LADLE_ERR_ARG, "unknown flags 0x80");
    bad.flags = LADLE_CHECKED | 0x100;
    LT_FAILS_SAYING(ladle_dist_vocab_embedding_create(&bad, p, ids_shape, f64, c, 1, &op),
                    LADLE_ERR_ARG, "unknown flags 0x104");
    if (P > 1) {
        /* more vocabulary ranks than rows; p_y of two ranks; different seeds; p->x
         * on one rank only (every rank fails: the others with LADLE_ERR_REMOTE) */
        ladle_embedding_desc_init(&bad, P - 1, E);
        LT_FAILS(ladle_dist_vocab_embedding_create(&bad, p, ids_shape, f64, c, 1, &op),
                 LADLE_ERR_SHAPE);
        ladle_partition *py2 = lt_partition(1, (int[]){2}, 0);
        LT_FAILS(ladle_dist_vocab_embedding_create(&d, PARTS(pw, py2), ids_shape, f64, c, 1,
                                                   &op),
                 LADLE_ERR_PARTITION);
        ladle_partition_destroy(&py2);
        LT_FAILS_SAYING(ladle_dist_vocab_embedding_create(&d, p, ids_shape, f64, c,
                                                          (uint64_t)lt_rank, &op),
                        LADLE_ERR_ARG, "ranks passed different arguments");
        ladle_dist_partitions one = {.x = lt_rank == 1 ? pw : NULL, .w = pw, .y = py};
        LT_FAILS(ladle_dist_vocab_embedding_create(&d, &one, ids_shape, f64, c, 1, &op),
                 lt_rank == 1 ? LADLE_ERR_PARTITION : LADLE_ERR_REMOTE);
    }
    LT_ASSERT(op == NULL, "the handle stays untouched");
    /* an id out of range on one rank: every rank fails alike, p_y too */
    ladle_partition *pwl = lt_partition(1, (int[]){P > 1 ? P - 1 : 1}, 0);
    ladle_partition *pyl = lt_partition_ranks(1, (int[]){1}, (int[]){lt_size - 1});
    const ladle_dist_partitions *pl = PARTS(pwl, pyl);
#undef PARTS
    LT_OK(ladle_dist_vocab_embedding_create(&d, pl, ids_shape, f64, c, 1, &op));
    int64_t xb[3], yb[3];
    int xn, yn;
    LT_OK(ladle_op_x_shape(op, &xn, xb));
    LT_OK(ladle_op_y_shape(op, &yn, yb));
    ladle_tensor *x = cpu(LADLE_I64, xn, xb), *y = cpu(f64, yn, yb),
                 *yf = cpu(LADLE_F32, yn, yb);
    for (int64_t i = 0; i < ladle_tensor_numel(x); i++)
        ((int64_t *)ladle_tensor_data(x))[i] = i % V;
    LT_OK(ladle_layer_forward(op, NULL, x, y));
    if (ladle_tensor_numel(x) > 0 && lt_rank == 0)
        ((int64_t *)ladle_tensor_data(x))[4] = V;
    LT_FAILS(ladle_layer_forward(op, NULL, x, y), LADLE_ERR_ARG);
    if (ladle_tensor_numel(x) > 0 && lt_rank == 0)
        ((int64_t *)ladle_tensor_data(x))[4] = -3;
    LT_FAILS(ladle_layer_forward(op, NULL, x, y), LADLE_ERR_ARG);
    if (ladle_tensor_numel(x) > 0)
        ((int64_t *)ladle_tensor_data(x))[4] = 1;
    LT_OK(ladle_layer_forward(op, NULL, x, y));
    /* a wrong dtype on one rank, agreed with LADLE_CHECKED */
    ladle_op *chk = NULL;
    ladle_embedding_desc_init(&bad, V, E);
    bad.flags = LADLE_CHECKED;
    LT_OK(ladle_dist_vocab_embedding_create(&bad, pl, ids_shape, f64, c, 1, &chk));
    LT_FAILS(ladle_layer_forward(chk, NULL, x, lt_rank == lt_size - 1 ? yf : y),
             lt_rank == lt_size - 1 ? LADLE_ERR_DTYPE : LADLE_ERR_REMOTE);
    ladle_op_destroy(&chk);
    ladle_op_destroy(&op);
    ladle_tensor_destroy(&x), ladle_tensor_destroy(&y), ladle_tensor_destroy(&yf);
    ladle_partition_destroy(&pw), ladle_partition_destroy(&py),
        ladle_partition_destroy(&p2);
    ladle_partition_destroy(&pwl), ladle_partition_destroy(&pyl);
}
END_TEST

LT_SUITE("dist_vocab", "dist_vocab", 0, loss_equivalence, loss_large_logits, loss_bad_input,
         embedding_equivalence, embedding_bad_input)
