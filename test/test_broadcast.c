/* Broadcast: adjoint over DistDL's matrix and ours, exact forward and
 * adjoint values, hand-derived groups, and bad input. */
#include "pair_cases.h"

static ladle_op *make(const pair_case *c, ladle_dtype dt) { return pair_op(c, dt, 0); }

START_TEST(adjoint_matrix) { lt_adjoint_cases(N_PAIR_CASES, pair_make_case, 100); }
END_TEST

/* y_j is exactly the owner's block; dx_i is exactly the sum of its
 * receivers' dy, whatever the tree or chunking. */
static void check_exact(const pair_case *c, const char *dt, const pair_pass *p)
{
    LT_ASSERT(p->j < 0 || p->owner >= 0, "%s: reference owner of %d", c->name, p->j);
    int ok = p->j < 0 || pair_holds_block(p->yv, p->n, p->owner);
    LT_ASSERT(ok, "%s (%s): y on big rank %d is not owner %d's block", c->name, dt, p->j,
              p->owner);
    ok = ok && (p->i < 0 || pair_holds_sum(c, p->dxv, p->n, p->i));
    LT_ASSERT(ok, "%s (%s): dx on owner %d is not the sum of its receivers", c->name, dt,
              p->i);
}

START_TEST(exact_values) { pair_exact_values(0, check_exact); }
END_TEST

/* The group table DistDL's documentation works out by hand for 1x3x1 on
 * ranks {1,2,3} to 2x3x2 on 0..11: [1,0,6,7], [2,3,8,9], [3,4,5,10,11]. */
START_TEST(documented_groups)
{
    LT_NEED_RANKS(12);
    static const int owner_world[12] = {1, 1, 2, 2, 3, 3, 1, 1, 2, 2, 3, 3};
    const pair_case *c = NULL;
    for (int k = 0; k < N_PAIR_CASES; k++)
        if (pair_cases[k].name[0] == 'd' && pair_cases[k].sfirst == 1 &&
            pair_cases[k].bd == 3 && pair_cases[k].bshape[2] == 2 &&
            pair_cases[k].sshape[1] == 3)
            c = &pair_cases[k];
    LT_ASSERT(c != NULL, "case present");
    ladle_op *op = make(c, LADLE_F64);
    ladle_tensor *x = lt_op_tensor(op, 0), *y = lt_op_tensor(op, 1);
    ladle_tensor_fill(x, lt_rank);
    LT_OK(ladle_op_forward(op, x, y));
    LT_ASSERT(lt_get(y, 0) == owner_world[lt_rank] && lt_get(y, 11) == owner_world[lt_rank],
              "world rank %d received %g, expected the block of world rank %d", lt_rank,
              lt_get(y, 0), owner_world[lt_rank]);
    LT_DESTROY(&x, &y);
    ladle_op_destroy(&op);
}
END_TEST

/* A geometric transpose: source 2x3 reversed is 3x2, so source (a, b)
 * feeds destination (b, a) -- not DistDL's flattened-order pairing. */
START_TEST(geometric_transpose)
{
    LT_NEED_RANKS(12);
    int s[2] = {2, 3}, b[2] = {3, 2};
    ladle_partition *px = lt_partition(2, s, 0), *py = lt_partition(2, b, 6);
    ladle_op *op = NULL;
    int64_t one = 1;
    LT_OK(ladle_broadcast_create(LT_BCAST(1, &one, LADLE_TRANSPOSE_SRC), px, py, LADLE_F64,
                                 lt_device(), &op));
    ladle_tensor *x = lt_op_tensor(op, 0), *y = lt_op_tensor(op, 1);
    if (lt_rank < 6)
        lt_set(x, 0, 10 * (lt_rank / 3) + lt_rank % 3); /* 10a + b */
    LT_OK(ladle_op_forward(op, x, y));
    int ok = 1;
    if (lt_rank >= 6) {
        int r = lt_rank - 6, i = r / 2, j = r % 2; /* destination (i, j) */
        ok = lt_get(y, 0) == 10 * j + i;
    }
    LT_ASSERT(ok, "rank %d got %g", lt_rank, lt_rank >= 6 ? lt_get(y, 0) : 0.0);
    LT_DESTROY(&x, &y);
    ladle_op_destroy(&op);
    LT_DESTROY_PARTS(&px, &py);
}
END_TEST

START_TEST(identity_is_local)
{
    int one[1] = {1};
    ladle_partition *p = lt_partition(1, one, 0), *q = lt_partition(1, one, 0);
    ladle_op *op = NULL;
    int64_t n = 10;
    LT_OK(ladle_broadcast_create(LT_BCAST(1, &n, 0), p, q, LADLE_F64, lt_device(), &op));
    LT_ASSERT(ladle_op_is_local(op), "1 -> 1 on the same rank moves nothing");
    ladle_op_destroy(&op);
    LT_DESTROY_PARTS(&p, &q);
}
END_TEST

START_TEST(bad_input)
{
    LT_NEED_RANKS(3);
    int s13[2] = {1, 3}, s31[2] = {3, 1}, s113[3] = {1, 1, 3}, s3[1] = {3}, s12[2] = {1, 2};
    ladle_partition *a = lt_partition(2, s13, 0), *b = lt_partition(2, s31, 0);
    ladle_op *op = NULL;
    int64_t shape[2] = {7, 5}, negative[2] = {7, -5};
    /* 1x3 -> 3x1 is illegal without a transpose flag, legal with one */
    LT_FAILS(
        ladle_broadcast_create(LT_BCAST(2, shape, 0), a, b, LADLE_F64, lt_device(), &op),
        LADLE_ERR_PARTITION);
    LT_ASSERT(op == NULL, "no op on failure");
    LT_OK(ladle_broadcast_create(LT_BCAST(2, shape, LADLE_TRANSPOSE_SRC), a, b, LADLE_F64,
                                 lt_device(), &op));
    ladle_op_destroy(&op);
    LT_OK(ladle_broadcast_create(LT_BCAST(2, shape, LADLE_TRANSPOSE_DEST), a, b, LADLE_F64,
                                 lt_device(), &op));
    ladle_op_destroy(&op);
    /* more source dimensions than destination ones */
    ladle_partition *c = lt_partition(3, s113, 0), *d = lt_partition(1, s3, 0);
    LT_FAILS(
        ladle_broadcast_create(LT_BCAST(2, shape, 0), c, d, LADLE_F64, lt_device(), &op),
        LADLE_ERR_PARTITION);
    /* 1x1x3 -> 3x3x2 needs 18 ranks, so check the rule on 1x2 -> 3x1 (3 != 1... ) */
    ladle_partition *e = lt_partition(2, s12, 0);
    LT_FAILS(
        ladle_broadcast_create(LT_BCAST(2, shape, 0), e, b, LADLE_F64, lt_device(), &op),
        LADLE_ERR_PARTITION);
    LT_FAILS(
        ladle_broadcast_create(LT_BCAST(2, shape, 0), NULL, b, LADLE_F64, lt_device(), &op),
        LADLE_ERR_NULL);
    LT_FAILS(ladle_broadcast_create(LT_BCAST(2, shape, LADLE_TRANSPOSE_SRC), a, b,
                                    LADLE_F64, lt_device(), NULL),
             LADLE_ERR_NULL);
    LT_FAILS(ladle_broadcast_create(LT_BCAST(2, shape, LADLE_TRANSPOSE_SRC), a, b,
                                    (ladle_dtype)9, lt_device(), &op),
             LADLE_ERR_DTYPE);
    LT_FAILS(ladle_broadcast_create(LT_BCAST(2, negative, LADLE_TRANSPOSE_SRC), a, b,
                                    LADLE_F64, lt_device(), &op),
             LADLE_ERR_SHAPE);
    LT_FAILS(ladle_broadcast_create(LT_BCAST(2, shape, 0x100), a, b, LADLE_F64, lt_device(),
                                    &op),
             LADLE_ERR_ARG);
    /* the descriptor: what _init sets, and one that never went through it */
    ladle_broadcast_desc bd;
    ladle_broadcast_desc_init(&bd, 2, shape);
    LT_ASSERT(bd.size == sizeof bd && bd.ndim == 2 && bd.shape == shape && bd.flags == 0,
              "_init sets size, ndim, shape and no flags");
    LT_FAILS(ladle_broadcast_create(&bd, a, b, LADLE_F64, lt_device(), &op),
             LADLE_ERR_PARTITION);
    bd.flags = LADLE_TRANSPOSE_SRC;
    bd.size = 0;
    LT_FAILS(ladle_broadcast_create(&bd, a, b, LADLE_F64, lt_device(), &op), LADLE_ERR_ARG);
    LT_FAILS(ladle_sum_reduce_create(&bd, b, a, LADLE_F64, lt_device(), &op),
             LADLE_ERR_ARG);
    LT_FAILS(ladle_broadcast_create(NULL, a, b, LADLE_F64, lt_device(), &op),
             LADLE_ERR_NULL);
    bd.size = sizeof bd + 32; /* a newer program's larger struct */
    LT_OK(ladle_broadcast_create(&bd, a, b, LADLE_F64, lt_device(), &op));
    ladle_op_destroy(&op);
    /* tensors that do not fit the op */
    LT_OK(ladle_broadcast_create(LT_BCAST(2, shape, LADLE_TRANSPOSE_SRC), a, b, LADLE_F64,
                                 lt_device(), &op));
    ladle_tensor *x = lt_op_tensor(op, 0), *y = lt_op_tensor(op, 1);
    ladle_tensor *wrong = lt_tensor(LADLE_F64, 2, (int64_t[]){5, 7});
    ladle_tensor *f32 = lt_tensor(LADLE_F32, 2, shape);
    /* ranks 0..2 hold blocks; the others hold nothing and must pass
     * zero-volume tensors, which they do here */
    int member = lt_rank < 3;
    ladle_status st = ladle_op_forward(op, member ? wrong : x, y);
    LT_ASSERT(st == (member ? LADLE_ERR_SHAPE : LADLE_OK), "%s", ladle_status_name(st));
    st = ladle_op_forward(op, member ? f32 : x, y);
    LT_ASSERT(st == (member ? LADLE_ERR_DTYPE : LADLE_OK), "%s", ladle_status_name(st));
    st = ladle_op_forward(op, x, wrong);
    LT_ASSERT(st == LADLE_ERR_SHAPE, "a non-empty y on a rank outside: %s",
              ladle_status_name(st));
    LT_FAILS(ladle_op_forward(op, NULL, y), LADLE_ERR_NULL);
    LT_FAILS(ladle_op_adjoint(op, y, NULL), LADLE_ERR_NULL);
    /* the data still moves after all those refusals */
    LT_OK(ladle_op_forward(op, x, y));
    LT_DESTROY(&x, &y, &wrong, &f32);
    ladle_op_destroy(&op);
    LT_DESTROY_PARTS(&a, &b, &c, &d, &e);
}
END_TEST

LT_SUITE("broadcast", "broadcast", LT_CHECK_TIMEOUT, adjoint_matrix, exact_values,
         documented_groups, geometric_transpose, identity_is_local, bad_input)
