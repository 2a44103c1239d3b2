/* AllGather and ReduceScatter along one axis of a partition: forward
 * against references gathered with MPI in the test, the dot-product test,
 * the two as each other's adjoint, uneven and empty shards, groups that are
 * one axis of a 2-d grid, ranks left out, and bad input. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"

typedef struct case_t {
    const char *name;
    int pd, pshape[2], axis;
    int ndim;
    int64_t shape[3];
    int dim;
    const int64_t *counts; /* NULL: balanced */
} case_t;

static const int64_t uneven3[] = {5, 0, 2}, empty_first4[] = {0, 3, 3, 1};
static const int64_t uneven2[] = {1, 6}, one_holds_all5[] = {0, 0, 9, 0, 0};
static const int64_t lopsided6[] = {4, 0, 1, 0, 2, 3}, uneven_cols2[] = {3, 0};
static const int64_t ragged8[] = {1, 2, 0, 3, 1, 0, 2, 4};
static const int64_t ragged12[] = {2, 0, 1, 3, 0, 0, 5, 1, 1, 0, 2, 1};

/* clang-format off */
static const case_t cases[] = {
    {"1-rank", 1, {1, 1}, 0, 2, {3, 4}, 0, NULL},
    {"2-balanced", 1, {2, 1}, 0, 2, {7, 5}, 0, NULL},
    {"2-uneven", 1, {2, 1}, 0, 1, {7}, 0, uneven2},
    {"3-uneven-empty", 1, {3, 1}, 0, 2, {7, 3}, 0, uneven3},
    {"3-inner-dim", 1, {3, 1}, 0, 3, {2, 7, 3}, 1, uneven3},
    {"4-empty-first", 1, {4, 1}, 0, 2, {7, 2}, 0, empty_first4},
    {"4-last-dim", 1, {4, 1}, 0, 2, {3, 7}, 1, empty_first4},
    {"5-one-holds-all", 1, {5, 1}, 0, 2, {9, 2}, 0, one_holds_all5},
    {"5-fewer-than-ranks", 1, {5, 1}, 0, 1, {3}, 0, NULL},
    {"6-lopsided", 1, {6, 1}, 0, 3, {3, 10, 2}, 1, lopsided6},
    {"8-ragged", 1, {8, 1}, 0, 2, {13, 3}, 0, ragged8},
    {"12-ragged", 1, {12, 1}, 0, 2, {16, 5}, 0, ragged12},
    {"12-balanced-inner", 1, {12, 1}, 0, 3, {2, 29, 3}, 1, NULL},
    {"2x3-axis0", 2, {2, 3}, 0, 2, {7, 4}, 0, uneven2},
    {"2x3-axis1", 2, {2, 3}, 1, 2, {4, 7}, 1, uneven3},
    {"3x2-axis1-inner", 2, {3, 2}, 1, 3, {2, 3, 2}, 1, uneven_cols2},
    {"2x2-axis1", 2, {2, 2}, 1, 1, {5}, 0, NULL},
    {"4x3-axis0", 2, {4, 3}, 0, 2, {7, 3}, 0, empty_first4},
    {"2x6-axis1", 2, {2, 6}, 1, 2, {5, 10}, 1, lopsided6},
    {"2-chunked", 1, {2, 1}, 0, 1, {400003}, 0, NULL},
    {"3-chunked-inner", 1, {3, 1}, 0, 2, {4, 150001}, 1, NULL},
    {"3-all-empty", 1, {3, 1}, 0, 2, {0, 4}, 0, NULL},
    {"2-zero-width", 1, {2, 1}, 0, 2, {4, 0}, 0, NULL},
};
/* clang-format on */
#define N_CASES ((int)(sizeof cases / sizeof cases[0]))

static int grid_size(const case_t *c)
{
    return c->pshape[0] * (c->pd > 1 ? c->pshape[1] : 1);
}

static ladle_all_gather_desc desc_of(const case_t *c)
{
    ladle_all_gather_desc d;
    ladle_all_gather_desc_init(&d, c->axis, c->ndim, c->shape, c->dim);
    d.counts = c->counts;
    return d;
}

static ladle_op *make(const case_t *c, int reduce, ladle_dtype dt)
{
    ladle_partition *p = lt_partition(c->pd, c->pshape, 0);
    ladle_all_gather_desc d = desc_of(c);
    ladle_op *op = NULL;
    if (reduce)
        LT_OK(ladle_reduce_scatter_create(&d, p, dt, lt_device(), &op));
    else
        LT_OK(ladle_all_gather_create(&d, p, dt, lt_device(), &op));
    ladle_partition_destroy(&p);
    return op;
}

/* lt_adjoint_cases' makers: every case that fits, all-gather then
 * reduce-scatter */
static ladle_op *make_case(int k, ladle_dtype dt, const char **name)
{
    const case_t *c = &cases[k % N_CASES];
    int64_t numel = 1;
    for (int d = 0; d < c->ndim; d++)
        numel *= c->shape[d];
    *name = c->name;
    /* empty tensors have nothing to test by inner products (forward checks them) */
    return grid_size(c) > lt_size || numel == 0 ? NULL : make(c, k >= N_CASES, dt);
}

START_TEST(adjoint_dot_product) { lt_adjoint_cases(2 * N_CASES, make_case, 900); }
END_TEST

/* The test's own view of a case on this rank: the group (a communicator
 * split from the world by the other coordinate, ranked by the coordinate
 * along the axis), its size, and every shard's first index and length. */
typedef struct view {
    MPI_Comm group;
    int g, me;
    int64_t start[16], len[16], numel, outer, inner;
} view;

static void view_of(const case_t *c, view *v)
{
    int coord[2] = {0, 0}, active = lt_rank < grid_size(c);
    if (c->pd == 2)
        coord[0] = lt_rank / c->pshape[1], coord[1] = lt_rank % c->pshape[1];
    else
        coord[0] = lt_rank;
    v->g = c->pshape[c->axis];
    v->me = coord[c->axis];
    MPI_Comm_split(MPI_COMM_WORLD, active ? coord[1 - c->axis] : MPI_UNDEFINED, v->me,
                   &v->group);
    v->numel = 1, v->outer = 1, v->inner = 1;
    for (int d = 0; d < c->ndim; d++) {
        v->numel *= c->shape[d];
        if (d < c->dim)
            v->outer *= c->shape[d];
        if (d > c->dim)
            v->inner *= c->shape[d];
    }
    int64_t n = c->shape[c->dim], at = 0;
    for (int k = 0; k < v->g; k++) {
        v->len[k] = c->counts ? c->counts[k] : n / v->g + (k < n % v->g);
        v->start[k] = at;
        at += v->len[k];
    }
}

/* Element (o, i, r) of the whole tensor: outer index o, index i along dim,
 * inner index r; its place in shard k's packed values. */
static int64_t whole_at(const case_t *c, const view *v, int64_t o, int64_t i, int64_t r)
{
    return (o * c->shape[c->dim] + i) * v->inner + r;
}

static int64_t shard_at(const view *v, int k, int64_t o, int64_t i, int64_t r)
{
    return (o * v->len[k] + (i - v->start[k])) * v->inner + r;
}

/* The group's shards in order, gathered by MPI_Allgatherv, against y. */
static int gather_matches(const case_t *c, const view *v, const double *x, const double *y)
{
    int counts[16], displs[16], ok = 1;
    int64_t total = 0;
    for (int k = 0; k < v->g; k++) {
        counts[k] = (int)(v->outer * v->len[k] * v->inner);
        displs[k] = (int)total;
        total += counts[k];
    }
    double *all = calloc((size_t)total + 1, sizeof(double));
    MPI_Allgatherv(x, counts[v->me], MPI_DOUBLE, all, counts, displs, MPI_DOUBLE, v->group);
    for (int k = 0; k < v->g; k++)
        for (int64_t o = 0; o < v->outer; o++)
            for (int64_t i = v->start[k]; i < v->start[k] + v->len[k]; i++)
                for (int64_t r = 0; r < v->inner; r++)
                    ok &= y[whole_at(c, v, o, i, r)] ==
                          all[displs[k] + shard_at(v, k, o, i, r)];
    free(all);
    return ok;
}

/* The group's whole tensors by MPI_Allgather, summed onto this member's
 * shard member by member (0 first, as documented): the relative error to
 * y, and in *bits whether y has exactly those bits. */
static double scatter_error(const case_t *c, const view *v, const double *x,
                            const double *y, int *bits)
{
    double *all = calloc((size_t)(v->numel * v->g) + 1, sizeof(double)), err = 0, scale = 0;
    MPI_Allgather(x, (int)v->numel, MPI_DOUBLE, all, (int)v->numel, MPI_DOUBLE, v->group);
    *bits = 1;
    for (int64_t o = 0; o < v->outer; o++)
        for (int64_t i = v->start[v->me]; i < v->start[v->me] + v->len[v->me]; i++)
            for (int64_t r = 0; r < v->inner; r++) {
                double s = all[whole_at(c, v, o, i, r)];
                for (int k = 1; k < v->g; k++)
                    s += all[k * v->numel + whole_at(c, v, o, i, r)];
                double got = y[shard_at(v, v->me, o, i, r)];
                err = fmax(err, fabs(got - s));
                scale = fmax(scale, fabs(s));
                *bits &= got == s;
            }
    free(all);
    return scale > 0 ? err / scale : err;
}

static void check_forward(const case_t *c, ladle_dtype dt)
{
    view v;
    view_of(c, &v);
    ladle_op *ag = make(c, 0, dt), *rs = make(c, 1, dt);
    ladle_tensor *x = lt_op_tensor(ag, 0), *y = lt_op_tensor(ag, 1);
    ladle_tensor *w = lt_op_tensor(rs, 0), *z = lt_op_tensor(rs, 1),
                 *z2 = lt_op_tensor(rs, 1);
    ladle_tensor *back = lt_op_tensor(rs, 0);
    LT_OK(ladle_tensor_fill_random(x, 31, (uint64_t)lt_rank));
    LT_OK(ladle_tensor_fill_random(w, 37, (uint64_t)lt_rank));
    LT_OK(ladle_op_forward(ag, x, y));
    LT_OK(ladle_op_forward(rs, w, z));
    LT_OK(ladle_op_forward(rs, w, z2));
    LT_OK(ladle_op_adjoint(rs, x, back)); /* reduce-scatter's adjoint: the all-gather */
    int ok = 1, bits = 1, again = 1, adj = 1;
    double err = 0;
    if (v.group != MPI_COMM_NULL) {
        double *xv = lt_values(x), *yv = lt_values(y), *wv = lt_values(w),
               *zv = lt_values(z);
        double *z2v = lt_values(z2), *bv = lt_values(back);
        ok = gather_matches(c, &v, xv, yv);
        err = scatter_error(c, &v, wv, zv, &bits);
        for (int64_t e = 0; e < ladle_tensor_numel(z); e++)
            again &= zv[e] == z2v[e];
        for (int64_t e = 0; e < ladle_tensor_numel(y); e++)
            adj &= yv[e] == bv[e];
        free(xv), free(yv), free(wv), free(zv), free(z2v), free(bv);
        MPI_Comm_free(&v.group);
    }
    double tol = ladle_adjoint_tolerance(dt);
    LT_ASSERT(ok, "%s %s: all-gather differs from MPI_Allgatherv", c->name,
              ladle_dtype_name(dt));
    LT_ASSERT(err <= tol, "%s %s: reduce-scatter error %.3g", c->name, ladle_dtype_name(dt),
              err);
    LT_ASSERT(dt == LADLE_F32 || bits, "%s: reduce-scatter not summed in member order",
              c->name);
    LT_ASSERT(again, "%s: a second reduce-scatter gave other bits", c->name);
    LT_ASSERT(adj, "%s: reduce-scatter's adjoint is not the all-gather", c->name);
    LT_DESTROY(&x, &y, &w, &z, &z2, &back);
    ladle_op_destroy(&ag);
    ladle_op_destroy(&rs);
}

START_TEST(forward_against_mpi)
{
    for (int k = 0; k < N_CASES; k++)
        if (grid_size(&cases[k]) <= lt_size)
            check_forward(&cases[k], LADLE_F64);
}
END_TEST

/* Shapes and kinds of the ops, and their names. */
START_TEST(shapes_and_kinds)
{
    const case_t *c = &cases[lt_size >= 3 ? 4 : lt_size == 2 ? 1 : 0];
    ladle_op *ag = make(c, 0, LADLE_F64), *rs = make(c, 1, LADLE_F64);
    view v;
    view_of(c, &v);
    int ok = ladle_op_kind_of(ag) == LADLE_OP_ALL_GATHER &&
             ladle_op_kind_of(rs) == LADLE_OP_REDUCE_SCATTER &&
             strcmp(ladle_op_kind_name(LADLE_OP_ALL_GATHER), "all-gather") == 0 &&
             strcmp(ladle_op_kind_name(LADLE_OP_REDUCE_SCATTER), "reduce-scatter") == 0;
    ladle_tensor *x = lt_op_tensor(ag, 0), *y = lt_op_tensor(ag, 1);
    int64_t want_x = v.group != MPI_COMM_NULL ? v.outer * v.len[v.me] * v.inner : 0;
    int64_t want_y = v.group != MPI_COMM_NULL ? v.numel : 0;
    ok &= ladle_tensor_numel(x) == want_x && ladle_tensor_numel(y) == want_y;
    if (v.group != MPI_COMM_NULL)
        MPI_Comm_free(&v.group);
    LT_ASSERT(ok, "kinds and local shapes");
    LT_DESTROY(&x, &y);
    ladle_op_destroy(&ag);
    ladle_op_destroy(&rs);
}
END_TEST

/* Forward and adjoint allocate nothing: every buffer is planned at
 * creation (a packed case, so the workspace is used). */
START_TEST(no_allocation_in_calls)
{
    const case_t *c = &cases[lt_size >= 3 ? 4 : lt_size == 2 ? 1 : 0];
    lt_counter cnt = {0, 0, 0};
    ladle_allocator a = {sizeof a, lt_count_alloc, lt_count_free, &cnt};
    int hook = lt_device() == LADLE_CPU;
    if (hook)
        LT_OK(ladle_allocator_set(&a));
    ladle_op *ag = make(c, 0, LADLE_F64), *rs = make(c, 1, LADLE_F64);
    ladle_tensor *x = lt_op_tensor(ag, 0), *y = lt_op_tensor(ag, 1);
    LT_OK(ladle_tensor_fill_random(x, 41, (uint64_t)lt_rank));
    LT_OK(ladle_tensor_fill_random(y, 43, (uint64_t)lt_rank));
    long before = cnt.allocs;
    for (int k = 0; k < 3; k++) {
        LT_OK(ladle_op_forward(ag, x, y));
        LT_OK(ladle_op_adjoint(ag, y, x));
        LT_OK(ladle_op_forward(rs, y, x));
        LT_OK(ladle_op_adjoint(rs, x, y));
    }
    LT_ASSERT(!hook || before > 0, "the counter saw no allocation at creation");
    LT_ASSERT(cnt.allocs == before, "%ld allocations in the calls", cnt.allocs - before);
    LT_DESTROY(&x, &y);
    ladle_op_destroy(&ag);
    ladle_op_destroy(&rs);
    if (hook)
        LT_OK(ladle_allocator_set(NULL));
}
END_TEST

static void refuse(const ladle_all_gather_desc *d, const ladle_partition *p, ladle_dtype dt,
                   ladle_status code, const char *what)
{
    ladle_op *op = NULL;
    LT_FAILS_SAYING(ladle_all_gather_create(d, p, dt, lt_device(), &op), code, what);
    LT_FAILS_SAYING(ladle_reduce_scatter_create(d, p, dt, lt_device(), &op), code, what);
    LT_ASSERT(op == NULL, "no op on failure (%s)", what);
}

START_TEST(bad_input)
{
    int s[2] = {1, lt_size};
    ladle_partition *p = lt_partition(2, s, 0);
    int64_t shape[2] = {3, 2 * lt_size}, counts[12], bad[12];
    for (int k = 0; k < lt_size; k++)
        counts[k] = 2, bad[k] = 2;
    ladle_all_gather_desc d;
    ladle_all_gather_desc_init(&d, 1, 2, shape, 1);
    LT_ASSERT(d.size == sizeof d && d.axis == 1 && d.ndim == 2 && d.shape == shape &&
                  d.dim == 1 && d.counts == NULL && d.flags == 0,
              "_init sets size, axis, shape, dim and no counts or flags");
    d.axis = 2;
    refuse(&d, p, LADLE_F64, LADLE_ERR_ARG, "axis 2 is outside");
    d.axis = -1;
    refuse(&d, p, LADLE_F64, LADLE_ERR_ARG, "axis -1 is outside");
    d.axis = 1, d.dim = 2;
    refuse(&d, p, LADLE_F64, LADLE_ERR_ARG, "dim 2 is outside");
    d.dim = -1;
    refuse(&d, p, LADLE_F64, LADLE_ERR_ARG, "dim -1 is outside");
    d.dim = 1, d.ndim = 0;
    refuse(&d, p, LADLE_F64, LADLE_ERR_ARG, "at least one dimension");
    d.ndim = 2, d.counts = bad;
    bad[lt_size - 1] = 1;
    refuse(&d, p, LADLE_F64, LADLE_ERR_ARG, "the counts sum to");
    bad[lt_size - 1] = 3;
    refuse(&d, p, LADLE_F64, LADLE_ERR_ARG, "too large");
    bad[lt_size - 1] = 2, bad[0] = -1;
    refuse(&d, p, LADLE_F64, LADLE_ERR_ARG, "is negative");
    d.counts = counts;
    refuse(&d, p, (ladle_dtype)3, LADLE_ERR_DTYPE, "not f32 or f64");
    d.flags = 0x100;
    refuse(&d, p, LADLE_F64, LADLE_ERR_ARG, "unknown flags");
    d.flags = 0;
    d.size = sizeof d - 1;
    refuse(&d, p, LADLE_F64, LADLE_ERR_ARG, "");
    d.size = sizeof d;
    refuse(NULL, p, LADLE_F64, LADLE_ERR_NULL, "");
    refuse(&d, NULL, LADLE_F64, LADLE_ERR_NULL, "");
    /* the good descriptor, checked: one rank's bad tensor fails every rank */
    d.flags = LADLE_CHECKED;
    ladle_op *op = NULL;
    LT_OK(ladle_all_gather_create(&d, p, LADLE_F64, lt_device(), &op));
    ladle_tensor *x = lt_op_tensor(op, 0), *y = lt_op_tensor(op, 1);
    ladle_tensor *wrong = lt_tensor(LADLE_F64, 2, (int64_t[]){3, 5});
    ladle_status st = ladle_op_forward(op, lt_rank == 0 ? wrong : x, y);
    LT_ASSERT(st == (lt_rank == 0 ? LADLE_ERR_SHAPE : LADLE_ERR_REMOTE), "%s",
              ladle_status_name(st));
    LT_OK(ladle_op_forward(op, x, y));
    LT_DESTROY(&x, &y, &wrong);
    ladle_op_destroy(&op);
    ladle_partition_destroy(&p);
}
END_TEST

LT_SUITE("reduce_scatter", "reduce_scatter", LT_CHECK_TIMEOUT, adjoint_dot_product,
         forward_against_mpi, shapes_and_kinds, no_allocation_in_calls, bad_input)
