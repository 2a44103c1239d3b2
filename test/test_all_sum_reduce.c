/* AllSumReduce: DistDL's matrix with its exact values, our own groupings,
 * the ring and doubling paths, in-place calls, and bad input. */
#include <stdlib.h>
#include <string.h>

#include "harness.h"

typedef struct case_t {
    const char *name;
    int pd, pshape[3];
    int naxes, axes[3];
    int ndim;
    int64_t shape[2];
} case_t;

/* DistDL tests/test_all_sum_reduce.py, and smaller grids of our own */
/* clang-format off */
static const case_t cases[] = {
    {"3D-0D", 3, {2, 2, 3}, 0, {0}, 2, {3, 4}},
    {"3D-1D-0", 3, {2, 2, 3}, 1, {0}, 2, {3, 4}},
    {"3D-1D-1", 3, {2, 2, 3}, 1, {1}, 2, {3, 4}},
    {"3D-1D-2", 3, {2, 2, 3}, 1, {2}, 2, {3, 4}},
    {"3D-2D-01", 3, {2, 2, 3}, 2, {0, 1}, 2, {3, 4}},
    {"3D-2D-02", 3, {2, 2, 3}, 2, {0, 2}, 2, {3, 4}},
    {"3D-2D-12", 3, {2, 2, 3}, 2, {1, 2}, 2, {3, 4}},
    {"3D-3D", 3, {2, 2, 3}, 3, {0, 1, 2}, 2, {3, 4}},
    {"mock-weight", 1, {12}, 1, {0}, 2, {30, 344}},
    {"2x2-rows", 2, {2, 2}, 1, {1}, 1, {17}},
    {"3-ring", 1, {3}, 1, {0}, 1, {100003}},
    {"4-ring", 1, {4}, 1, {0}, 1, {70001}},
    {"2-ring", 1, {2}, 1, {0}, 1, {300007}},
    {"5-tree", 1, {5}, 1, {0}, 1, {1000}},
    {"1", 1, {1}, 1, {0}, 2, {4, 4}},
    {"2x2-axes-reversed", 2, {2, 2}, 2, {1, 0}, 1, {9}},
};
/* clang-format on */
#define N_CASES ((int)(sizeof cases / sizeof cases[0]))

static ladle_op *make(const case_t *c, ladle_dtype dt, ladle_partition **pp)
{
    ladle_partition *p = lt_partition(c->pd, c->pshape, 0);
    ladle_op *op = NULL;
    LT_OK(ladle_all_sum_reduce_create(LT_ASR(c->naxes, c->axes, c->ndim, c->shape, 0), p,
                                      dt, lt_device(), &op));
    if (pp)
        *pp = p;
    else
        ladle_partition_destroy(&p);
    return op;
}

/* lt_adjoint_cases' maker: every case that fits */
static ladle_op *make_case(int k, ladle_dtype dt, const char **name)
{
    *name = cases[k].name;
    return lt_ranks_of(cases[k].pd, cases[k].pshape) > lt_size ? NULL
                                                               : make(&cases[k], dt, NULL);
}

START_TEST(adjoint_matrix) { lt_adjoint_cases(N_CASES, make_case, 300); }
END_TEST

/* DistDL's exact check: x = 10, dy = 0.125 everywhere (exact in binary)
 * gives y = 10 R and dx = 0.125 R, R the product of the reduced extents. */
START_TEST(distdl_exact_values)
{
    for (int k = 0; k < N_CASES; k++) {
        const case_t *c = &cases[k];
        if (lt_ranks_of(c->pd, c->pshape) > lt_size)
            continue;
        int R = 1;
        for (int a = 0; a < c->naxes; a++)
            R *= c->pshape[c->axes[a]];
        ladle_op *op = make(c, LADLE_F32, NULL);
        ladle_tensor *x = lt_op_tensor(op, 0), *y = lt_op_tensor(op, 1);
        ladle_tensor *dy = lt_op_tensor(op, 1), *dx = lt_op_tensor(op, 0);
        ladle_tensor_fill(x, 10);
        ladle_tensor_fill(dy, 0.125);
        LT_OK(ladle_op_forward(op, x, y));
        LT_OK(ladle_op_adjoint(op, dy, dx));
        int ok = 1;
        double *yv = lt_values(y), *dxv = lt_values(dx);
        for (int64_t e = 0; e < ladle_tensor_numel(y); e++)
            ok &= yv[e] == 10.0 * R && dxv[e] == 0.125 * R;
        free(yv), free(dxv);
        LT_ASSERT(ok, "%s: expected %g and %g", c->name, 10.0 * R, 0.125 * R);
        LT_DESTROY(&x, &y, &dx, &dy);
        ladle_op_destroy(&op);
    }
}
END_TEST

/* Distinct integer values: y must be exactly the sum over the group, which
 * the test works out from the coordinates; all members get the same bits
 * even for random data. */
START_TEST(group_sums_and_agreement)
{
    for (int k = 0; k < N_CASES; k++) {
        const case_t *c = &cases[k];
        int P = lt_ranks_of(c->pd, c->pshape);
        if (P > lt_size)
            continue;
        ladle_partition *p = NULL;
        ladle_op *op = make(c, LADLE_F64, &p);
        ladle_tensor *x = lt_op_tensor(op, 0), *y = lt_op_tensor(op, 1);
        int64_t n = ladle_tensor_numel(x);
        double *xv = lt_values(x);
        for (int64_t e = 0; e < n; e++)
            xv[e] = (lt_rank + 1) * 1000.0 + (double)(e % 1000);
        lt_store(x, xv);
        free(xv);
        LT_OK(ladle_op_forward(op, x, y));
        int ok = 1;
        if (lt_rank < P) {
            int reduced[3] = {0, 0, 0}, me[3], them[3];
            for (int a = 0; a < c->naxes; a++)
                reduced[c->axes[a]] = 1;
            ladle_partition_coords_of(p, lt_rank, me);
            double ranks_sum = 0;
            int members = 0;
            for (int q = 0; q < P; q++) {
                ladle_partition_coords_of(p, q, them);
                int same = 1;
                for (int d = 0; d < c->pd; d++)
                    same &= reduced[d] || them[d] == me[d];
                if (same)
                    ranks_sum += q + 1, members++;
            }
            double *yv = lt_values(y);
            for (int64_t e = 0; e < n; e++)
                ok &= yv[e] == ranks_sum * 1000.0 + members * (double)(e % 1000);
            free(yv);
        }
        LT_ASSERT(ok, "%s: wrong group sum", c->name);
        /* random data: every member of a group holds the same bits; the
         * group is the sub-grid along the reduced axes */
        LT_OK(ladle_tensor_fill_random(x, 17, (uint64_t)lt_rank));
        LT_OK(ladle_op_forward(op, x, y));
        int remain[3] = {0, 0, 0};
        for (int a = 0; a < c->naxes; a++)
            remain[c->axes[a]] = 1;
        ladle_partition *group = NULL;
        LT_OK(ladle_partition_create_sub(p, remain, &group));
        double mine = n > 0 ? lt_get(y, n / 2) : 0, low = mine, high = mine;
        MPI_Comm comm = ladle_comm_mpi(ladle_partition_comm(group));
        if (comm != MPI_COMM_NULL) {
            MPI_Allreduce(&mine, &low, 1, MPI_DOUBLE, MPI_MIN, comm);
            MPI_Allreduce(&mine, &high, 1, MPI_DOUBLE, MPI_MAX, comm);
        }
        LT_ASSERT(low == high, "%s: members disagree (%.17g vs %.17g)", c->name, low, high);
        ladle_partition_destroy(&group);
        LT_DESTROY(&x, &y);
        ladle_op_destroy(&op);
        ladle_partition_destroy(&p);
    }
}
END_TEST

/* x and y may be the same tensor, on every path (doubling, tree, ring). */
START_TEST(in_place)
{
    for (int k = 0; k < N_CASES; k++) {
        const case_t *c = &cases[k];
        if (lt_ranks_of(c->pd, c->pshape) > lt_size)
            continue;
        ladle_op *op = make(c, LADLE_F64, NULL);
        ladle_tensor *x = lt_op_tensor(op, 0), *y = lt_op_tensor(op, 1);
        LT_OK(ladle_tensor_fill_random(x, 23, (uint64_t)lt_rank));
        LT_OK(ladle_op_forward(op, x, y));
        LT_OK(ladle_op_forward(op, x, x));
        int same = 1;
        double *xv = lt_values(x), *yv = lt_values(y);
        for (int64_t e = 0; e < ladle_tensor_numel(x); e++)
            same &= xv[e] == yv[e];
        free(xv), free(yv);
        LT_ASSERT(same, "%s: in place differs from out of place", c->name);
        LT_DESTROY(&x, &y);
        ladle_op_destroy(&op);
    }
}
END_TEST

START_TEST(bad_input)
{
    int s[2] = {1, lt_size};
    ladle_partition *p = lt_partition(2, s, 0);
    ladle_op *op = NULL;
    int64_t shape[1] = {3};
    int axes[2] = {0, 2}, twice[2] = {1, 1};
    LT_FAILS(ladle_all_sum_reduce_create(LT_ASR(2, axes, 1, shape, 0), p, LADLE_F64,
                                         lt_device(), &op),
             LADLE_ERR_ARG);
    LT_FAILS(ladle_all_sum_reduce_create(LT_ASR(2, twice, 1, shape, 0), p, LADLE_F64,
                                         lt_device(), &op),
             LADLE_ERR_ARG);
    LT_FAILS(ladle_all_sum_reduce_create(LT_ASR(3, axes, 1, shape, 0), p, LADLE_F64,
                                         lt_device(), &op),
             LADLE_ERR_ARG);
    LT_FAILS(ladle_all_sum_reduce_create(LT_ASR(1, NULL, 1, shape, 0), p, LADLE_F64,
                                         lt_device(), &op),
             LADLE_ERR_NULL);
    LT_FAILS(ladle_all_sum_reduce_create(LT_ASR(1, axes, 1, shape, 0), p, (ladle_dtype)3,
                                         lt_device(), &op),
             LADLE_ERR_DTYPE);
    LT_FAILS(ladle_all_sum_reduce_create(LT_ASR(1, axes, 1, shape, 0), NULL, LADLE_F64,
                                         lt_device(), &op),
             LADLE_ERR_NULL);
    LT_ASSERT(op == NULL, "no op on failure");
    ladle_all_sum_reduce_desc d;
    ladle_all_sum_reduce_desc_init(&d, 1, axes, 1, shape);
    LT_ASSERT(d.size == sizeof d && d.naxes == 1 && d.axes == axes && d.ndim == 1 &&
                  d.shape == shape && d.flags == 0,
              "_init sets size, axes, shape and no flags");
    d.size = sizeof d - 1;
    LT_FAILS(ladle_all_sum_reduce_create(&d, p, LADLE_F64, lt_device(), &op),
             LADLE_ERR_ARG);
    LT_FAILS(ladle_all_sum_reduce_create(NULL, p, LADLE_F64, lt_device(), &op),
             LADLE_ERR_NULL);
    d.size = sizeof d;
    d.flags = LADLE_CHECKED;
    LT_OK(ladle_all_sum_reduce_create(&d, p, LADLE_F64, lt_device(), &op));
    /* a checked op fails every rank when one rank passes a bad tensor */
    ladle_tensor *x = lt_op_tensor(op, 0), *bad = lt_tensor(LADLE_F64, 1, (int64_t[]){4});
    ladle_status st = ladle_op_forward(op, lt_rank == 0 ? bad : x, x);
    LT_ASSERT(st == (lt_rank == 0 ? LADLE_ERR_SHAPE : LADLE_ERR_REMOTE), "%s",
              ladle_status_name(st));
    LT_OK(ladle_op_forward(op, x, x));
    LT_DESTROY(&x, &bad);
    ladle_op_destroy(&op);
    ladle_partition_destroy(&p);
}
END_TEST

LT_SUITE("all_sum_reduce", "all_sum_reduce", LT_CHECK_TIMEOUT, adjoint_matrix,
         distdl_exact_values, group_sums_and_agreement, in_place, bad_input)
