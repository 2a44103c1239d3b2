/* Repartition: DistDL's matrix (balanced and unbalanced inputs), identity,
 * scatter and gather, exact placement of every element, and bad input. */
#include "harness.h"

typedef struct case_t {
    const char *name;
    int nd;
    int xshape[3], xfirst;
    int yshape[3], yfirst;
    int64_t global[3];
} case_t;

/* DistDL tests/primitives/test_repartition.py (global 77x55), scaled to at
 * most 12 ranks, plus 3-D and odd cases of our own */
/* clang-format off */
static const case_t cases[] = {
    {"overlap", 2, {4, 1}, 4, {3, 4}, 0, {77, 55}},
    {"disjoint", 2, {4, 1}, 0, {2, 4}, 4, {77, 55}},
    {"disjoint-inactive", 2, {2, 1}, 0, {3, 3}, 3, {77, 55}},
    {"sequential-identity", 2, {1, 1}, 0, {1, 1}, 0, {77, 55}},
    {"scatter-overlap", 2, {1, 1}, 4, {3, 4}, 0, {77, 55}},
    {"scatter-disjoint", 2, {1, 1}, 0, {3, 3}, 1, {77, 55}},
    {"scatter-disjoint-inactive", 2, {1, 1}, 0, {3, 3}, 2, {77, 55}},
    {"gather-overlap", 2, {3, 4}, 0, {1, 1}, 4, {77, 55}},
    {"gather-disjoint", 2, {3, 3}, 1, {1, 1}, 0, {77, 55}},
    {"gather-disjoint-inactive", 2, {3, 3}, 2, {1, 1}, 0, {77, 55}},
    {"identity-2D", 2, {3, 4}, 0, {3, 4}, 0, {77, 55}},
    {"identity-1D", 2, {1, 4}, 0, {1, 4}, 0, {77, 55}},
    {"transpose-2x1-1x2", 2, {2, 1}, 0, {1, 2}, 0, {9, 8}},
    {"3D-2x1x2-to-1x3x1", 3, {2, 1, 2}, 0, {1, 3, 1}, 1, {5, 7, 6}},
    {"3D-reshuffle-2x2x1-to-1x2x2", 3, {2, 2, 1}, 0, {1, 2, 2}, 0, {4, 6, 10}},
    {"more-ranks-than-rows", 2, {1, 1}, 0, {4, 1}, 0, {3, 5}},
    {"empty-global", 2, {2, 1}, 0, {1, 2}, 0, {0, 4}},
};
/* clang-format on */
#define N_CASES ((int)(sizeof cases / sizeof cases[0]))

static int needs(const case_t *c)
{
    int a = c->xfirst + lt_ranks_of(c->nd, c->xshape),
        b = c->yfirst + lt_ranks_of(c->nd, c->yshape);
    return a > b ? a : b;
}

/* DistDL's "unbalanced" input: n / P everywhere, the remainder all on block 0 */
static ladle_layout *x_layout(const case_t *c, ladle_partition *p, int balanced)
{
    ladle_layout *l = NULL;
    if (balanced) {
        LT_OK(ladle_layout_create_balanced(p, c->nd, c->global, &l));
        return l;
    }
    int64_t sizes[3][8];
    const int64_t *rows[3];
    for (int d = 0; d < c->nd; d++) {
        int P = c->xshape[d];
        for (int i = 0; i < P; i++)
            sizes[d][i] = c->global[d] / P + (i == 0 ? c->global[d] % P : 0);
        rows[d] = sizes[d];
    }
    LT_OK(ladle_layout_create_split(p, c->nd, c->global, rows, &l));
    return l;
}

static ladle_op *make(const case_t *c, int balanced, ladle_dtype dt)
{
    ladle_partition *px = lt_partition(c->nd, c->xshape, c->xfirst);
    ladle_partition *py = lt_partition(c->nd, c->yshape, c->yfirst);
    ladle_layout *lx = x_layout(c, px, balanced), *ly = NULL;
    LT_OK(ladle_layout_create_balanced(py, c->nd, c->global, &ly));
    ladle_op *op = NULL;
    LT_OK(ladle_repartition_create(lx, ly, dt, lt_device(), 0, &op));
    ladle_layout_destroy(&lx);
    ladle_layout_destroy(&ly);
    ladle_partition_destroy(&px);
    ladle_partition_destroy(&py);
    return op;
}

static int64_t volume(const case_t *c)
{
    int64_t v = 1;
    for (int d = 0; d < c->nd; d++)
        v *= c->global[d];
    return v;
}

START_TEST(adjoint_matrix)
{
    for (int k = 0; k < N_CASES; k++) {
        if (needs(&cases[k]) > lt_size || volume(&cases[k]) == 0)
            continue;
        for (int balanced = 0; balanced < 2; balanced++)
            for (int t = 0; t < 2; t++) {
                ladle_op *op = make(&cases[k], balanced, t ? LADLE_F32 : LADLE_F64);
                lt_adjoint_ok(op, 400 + (uint64_t)k, cases[k].name);
                ladle_op_destroy(&op);
            }
    }
}
END_TEST

/* Fill a local tensor with the global linear index of each element, given
 * its box; or check that it holds exactly that. */
static int global_index_values(const ladle_layout *l, ladle_tensor *t, int fill)
{
    int nd = ladle_layout_ndim(l);
    const int64_t *g = ladle_layout_global_shape(l);
    int64_t off[3], sh[3], idx[3] = {0, 0, 0};
    ladle_layout_box(l, LADLE_SELF, off, sh);
    int64_t n = ladle_tensor_numel(t);
    double *v = lt_values(t); /* a tensor at a time: on a GPU an element costs a copy */
    int ok = 1;
    for (int64_t e = 0; e < n && ok; e++) {
        int64_t gi = 0;
        for (int d = 0; d < nd; d++)
            gi = gi * g[d] + off[d] + idx[d];
        if (fill)
            v[e] = (double)gi;
        else
            ok = v[e] == (double)gi;
        for (int d = nd - 1; d >= 0 && ++idx[d] == sh[d]; d--)
            idx[d] = 0;
    }
    if (fill)
        lt_store(t, v);
    free(v);
    return ok;
}

START_TEST(every_element_lands_where_it_belongs)
{
    for (int k = 0; k < N_CASES; k++) {
        if (needs(&cases[k]) > lt_size)
            continue;
        for (int balanced = 0; balanced < 2; balanced++)
            for (int t = 0; t < 2; t++) {
                ladle_op *op = make(&cases[k], balanced, t ? LADLE_F32 : LADLE_F64);
                const ladle_layout *lx = ladle_op_x_layout(op), *ly = ladle_op_y_layout(op);
                ladle_tensor *x = lt_op_tensor(op, 0), *y = lt_op_tensor(op, 1);
                ladle_tensor *dy = lt_op_tensor(op, 1), *dx = lt_op_tensor(op, 0);
                global_index_values(lx, x, 1);
                global_index_values(ly, dy, 1);
                ladle_tensor_fill(y, -1);
                ladle_tensor_fill(dx, -1);
                LT_OK(ladle_op_forward(op, x, y));
                LT_OK(ladle_op_adjoint(op, dy, dx));
                LT_ASSERT(global_index_values(ly, y, 0), "%s (%s, %s): y misplaced",
                          cases[k].name, balanced ? "balanced" : "unbalanced",
                          t ? "f32" : "f64");
                LT_ASSERT(global_index_values(lx, dx, 0), "%s (%s, %s): dx misplaced",
                          cases[k].name, balanced ? "balanced" : "unbalanced",
                          t ? "f32" : "f64");
                LT_DESTROY(&x, &y, &dx, &dy);
                ladle_op_destroy(&op);
            }
    }
}
END_TEST

/* Balanced input on the same partition moves nothing (DistDL's identity
 * test); an unbalanced input is rebalanced. */
START_TEST(identity_moves_nothing)
{
    for (int k = 0; k < N_CASES; k++) {
        const case_t *c = &cases[k];
        if (needs(c) > lt_size || c->xfirst != c->yfirst ||
            lt_ranks_of(c->nd, c->xshape) != lt_ranks_of(c->nd, c->yshape))
            continue;
        int same = 1;
        for (int d = 0; d < c->nd; d++)
            same &= c->xshape[d] == c->yshape[d];
        if (!same)
            continue;
        ladle_op *op = make(c, 1, LADLE_F64);
        LT_ASSERT(ladle_op_is_local(op), "%s: balanced identity sends messages", c->name);
        ladle_op_destroy(&op);
    }
}
END_TEST

START_TEST(bad_input)
{
    if (lt_size < 2)
        return;
    int s2[2] = {2, 1}, s12[2] = {1, 2}, s4[4] = {1, 2, 1, 1};
    ladle_partition *a = lt_partition(2, s2, 0), *b = lt_partition(2, s12, 0);
    ladle_partition *c4 = lt_partition(4, s4, 0);
    ladle_layout *la = NULL, *lb = NULL, *lc = NULL, *l4 = NULL, *blk = NULL;
    ladle_op *op = NULL;
    LT_OK(ladle_layout_create_balanced(a, 2, (int64_t[]){6, 4}, &la));
    LT_OK(ladle_layout_create_balanced(b, 2, (int64_t[]){4, 6}, &lb));
    LT_OK(ladle_layout_create_balanced(b, 2, (int64_t[]){6, 4}, &lc));
    LT_OK(ladle_layout_create_balanced(c4, 4, (int64_t[]){6, 4, 1, 1}, &l4));
    LT_OK(ladle_layout_create_block(b, 2, (int64_t[]){6, 4}, &blk));
    /* global shapes that differ, dimensions that differ, a non-decomposition */
    LT_FAILS(ladle_repartition_create(la, lb, LADLE_F64, lt_device(), 0, &op), LADLE_ERR_SHAPE);
    LT_FAILS(ladle_repartition_create(la, l4, LADLE_F64, lt_device(), 0, &op), LADLE_ERR_SHAPE);
    LT_FAILS(ladle_repartition_create(la, blk, LADLE_F64, lt_device(), 0, &op), LADLE_ERR_ARG);
    LT_FAILS(ladle_repartition_create(la, NULL, LADLE_F64, lt_device(), 0, &op), LADLE_ERR_NULL);
    LT_FAILS(ladle_repartition_create(la, lc, LADLE_F16, lt_device(), 0, &op),
             LADLE_ERR_DTYPE);
    /* a tensor decomposed over a partition of another ndim (DistDL's
     * mismatched-partition cases) cannot even be laid out */
    ladle_layout *bad = NULL;
    LT_FAILS(ladle_layout_create_balanced(c4, 3, (int64_t[]){16, 5, 5}, &bad),
             LADLE_ERR_SHAPE);
    LT_ASSERT(op == NULL, "no op on failure");
    /* the right call works, and shapes are checked at every call */
    LT_OK(ladle_repartition_create(la, lc, LADLE_F64, lt_device(), 0, &op));
    ladle_tensor *x = lt_op_tensor(op, 0), *y = lt_op_tensor(op, 1);
    ladle_tensor *wide = lt_tensor(LADLE_F64, 2, (int64_t[]){3, 5});
    ladle_status st = ladle_op_forward(op, lt_rank < 2 ? wide : x, y);
    LT_ASSERT(st == (lt_rank < 2 ? LADLE_ERR_SHAPE : LADLE_OK), "%s",
              ladle_status_name(st));
    LT_OK(ladle_op_forward(op, x, y));
    LT_DESTROY(&x, &y, &wide);
    ladle_op_destroy(&op);
    ladle_layout_destroy(&la);
    ladle_layout_destroy(&lb);
    ladle_layout_destroy(&lc);
    ladle_layout_destroy(&l4);
    ladle_layout_destroy(&blk);
    ladle_partition_destroy(&a);
    ladle_partition_destroy(&b);
    ladle_partition_destroy(&c4);
}
END_TEST

LT_SUITE("repartition", "repartition", LT_CHECK_TIMEOUT, adjoint_matrix,
         every_element_lands_where_it_belongs, identity_moves_nothing, bad_input)
