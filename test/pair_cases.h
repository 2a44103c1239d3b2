/*
 * The partition pairs shared by the broadcast and sum-reduce tests: DistDL's
 * own matrix (tests/test_broadcast.py, tests/primitives/test_sum_reduce.py),
 * scaled to at most 12 ranks where it needed 16 or 17, plus cases of our
 * own. A case names the owners' partition (`small`: the source of a
 * broadcast, the destination of a sum-reduce) and the other one (`big`).
 */
#ifndef LADLE_TEST_PAIR_CASES_H
#define LADLE_TEST_PAIR_CASES_H

#include "harness.h"

typedef struct pair_case {
    const char *name;
    int sd, sshape[4], sfirst; /* small partition: ndim, shape, first rank */
    int bd, bshape[4], bfirst; /* big partition */
    int t_small, t_big;        /* transpose flags of each side */
    int ndim;                  /* block */
    int64_t block[4];
} pair_case;

/* clang-format off */
static const pair_case pair_cases[] = {
    /* DistDL's matrix */
    {"overlap-3D", 3, {2, 2, 1}, 4, 3, {2, 2, 3}, 0, 0, 0, 3, {1, 7, 5}},
    {"disjoint-3D", 3, {2, 2, 1}, 0, 3, {2, 2, 2}, 4, 0, 0, 3, {1, 7, 5}},
    {"disjoint-inactive-3D", 3, {1, 2, 1}, 0, 3, {1, 2, 4}, 3, 0, 0, 3, {1, 7, 5}},
    {"sequential-identity", 1, {1}, 0, 1, {1}, 0, 0, 0, 3, {1, 7, 5}},
    {"overlap-single-source", 1, {1}, 2, 3, {1, 1, 3}, 0, 0, 0, 3, {1, 7, 5}},
    {"disjoint-single-source", 1, {1}, 3, 3, {1, 1, 3}, 0, 0, 0, 3, {1, 7, 5}},
    {"disjoint-inactive-single-source", 1, {1}, 4, 3, {1, 1, 3}, 0, 0, 0, 3, {1, 7, 5}},
    {"overlap-3D-transposed", 3, {2, 2, 1}, 4, 3, {3, 2, 2}, 0, 1, 0, 3, {1, 7, 5}},
    {"disjoint-3D-transposed", 3, {2, 1, 1}, 0, 3, {3, 1, 2}, 2, 1, 0, 3, {1, 7, 5}},
    {"disjoint-inactive-3D-transposed", 3, {2, 1, 1}, 0, 3, {3, 1, 2}, 3, 1, 0, 3, {1, 7, 5}},
    {"deadlock-2D", 2, {1, 2}, 1, 2, {2, 2}, 0, 0, 0, 2, {7, 5}},
    {"deadlock-3D", 3, {1, 2, 2}, 2, 3, {2, 2, 2}, 0, 0, 0, 2, {7, 5}},
    {"deadlock-4D", 4, {1, 2, 2, 1}, 4, 4, {2, 2, 2, 1}, 0, 0, 0, 2, {7, 5}},
    /* DistDL's documented legal pairs and more */
    {"one-to-2x3", 1, {1}, 0, 2, {2, 3}, 0, 0, 0, 2, {4, 3}},
    {"3x1-to-3x4", 2, {3, 1}, 0, 2, {3, 4}, 0, 0, 0, 1, {9}},
    {"1x3-to-3x4-transposed-src", 2, {1, 3}, 0, 2, {3, 4}, 0, 1, 0, 1, {9}},
    {"4x1-to-3x4-transposed-dest", 2, {4, 1}, 0, 2, {3, 4}, 0, 0, 1, 1, {9}},
    {"1x1x3-to-3x4x1-transposed-dest", 3, {1, 1, 3}, 0, 3, {3, 4, 1}, 0, 0, 1, 1, {6}},
    {"2x3-geometric-transpose", 2, {2, 3}, 0, 2, {3, 2}, 6, 1, 0, 2, {2, 2}},
    {"docs-1x3x1-to-2x3x2", 3, {1, 3, 1}, 1, 3, {2, 3, 2}, 0, 0, 0, 2, {3, 4}},
    {"scalar-block", 1, {2}, 0, 2, {2, 2}, 0, 0, 0, 0, {0}},
    {"zero-volume-block", 1, {2}, 0, 2, {3, 2}, 0, 0, 0, 2, {3, 0}},
    {"large-chain", 1, {1}, 0, 1, {4}, 0, 0, 0, 1, {150001}},
    {"large-pair", 1, {1}, 0, 1, {2}, 0, 0, 0, 1, {200003}},
    {"large-binomial-5", 1, {1}, 4, 1, {5}, 0, 0, 0, 1, {5000}},
};
/* clang-format on */
#define N_PAIR_CASES ((int)(sizeof pair_cases / sizeof pair_cases[0]))

/* Ranks the case needs in MPI_COMM_WORLD. */
static int case_needs(const pair_case *c)
{
    int a = c->sfirst + lt_ranks_of(c->sd, c->sshape),
        b = c->bfirst + lt_ranks_of(c->bd, c->bshape);
    return a > b ? a : b;
}

/* The owner (small rank) of big rank j, found by brute force: the small
 * rank whose effective coordinates agree with j's in every dimension where
 * the small extent is not 1 (shapes reversed by the transpose flags, the
 * small one left-padded with ones). */
static int reference_owner(const pair_case *c, int j)
{
    int cb[4], eb[4], pad = c->bd - c->sd;
    for (int d = c->bd - 1, r = j; d >= 0; d--) {
        cb[d] = r % c->bshape[d];
        r /= c->bshape[d];
    }
    for (int d = 0; d < c->bd; d++)
        eb[d] = c->t_big ? cb[c->bd - 1 - d] : cb[d];
    int found = -1;
    for (int i = 0; i < lt_ranks_of(c->sd, c->sshape); i++) {
        int cs[4], es[4] = {0, 0, 0, 0}, ext[4] = {1, 1, 1, 1};
        for (int d = c->sd - 1, r = i; d >= 0; d--) {
            cs[d] = r % c->sshape[d];
            r /= c->sshape[d];
        }
        for (int d = 0; d < c->sd; d++) {
            int k = c->t_small ? c->sd - 1 - d : d;
            es[pad + d] = cs[k];
            ext[pad + d] = c->sshape[k];
        }
        int match = 1;
        for (int d = 0; d < c->bd; d++)
            if (ext[d] != 1 && es[d] != eb[d])
                match = 0;
        if (match) {
            if (found >= 0)
                return -2; /* ambiguous: the test table is wrong */
            found = i;
        }
    }
    return found;
}

static void case_partitions(const pair_case *c, ladle_partition **small,
                            ladle_partition **big)
{
    *small = lt_partition(c->sd, c->sshape, c->sfirst);
    *big = lt_partition(c->bd, c->bshape, c->bfirst);
}

static int64_t block_volume(const pair_case *c)
{
    int64_t v = 1;
    for (int d = 0; d < c->ndim; d++)
        v *= c->block[d];
    return v;
}

/* The small rank held by this world rank, or -1; likewise the big rank. */
static int small_rank_of_me(const pair_case *c)
{
    int r = lt_rank - c->sfirst;
    return r >= 0 && r < lt_ranks_of(c->sd, c->sshape) ? r : -1;
}

static int big_rank_of_me(const pair_case *c)
{
    int r = lt_rank - c->bfirst;
    return r >= 0 && r < lt_ranks_of(c->bd, c->bshape) ? r : -1;
}

/* Exact test values: owner i holds 1000*i + k + 1, receiver j holds
 * (j + 1) * (k % 97 + 1) at element k. */
static double owner_value(int i, int64_t k) { return 1000.0 * i + (double)k + 1; }
static double receiver_value(int j, int64_t k) { return (j + 1.0) * (double)(k % 97 + 1); }

/* Case c's op: a broadcast from its small partition to its big one, or
 * (reduce) a sum-reduce from big to small; each transpose flag goes with
 * its partition, to the x side or the y side. */
static ladle_op *pair_op(const pair_case *c, ladle_dtype dt, int reduce)
{
    ladle_partition *s, *b;
    ladle_op *op = NULL;
    case_partitions(c, &s, &b);
    unsigned ts = c->t_small ? (reduce ? LADLE_TRANSPOSE_DEST : LADLE_TRANSPOSE_SRC) : 0;
    unsigned tb = c->t_big ? (reduce ? LADLE_TRANSPOSE_SRC : LADLE_TRANSPOSE_DEST) : 0;
    const ladle_broadcast_desc *d = LT_BCAST(c->ndim, c->block, ts | tb);
    if (reduce)
        LT_OK(ladle_sum_reduce_create(d, b, s, dt, lt_device(), &op));
    else
        LT_OK(ladle_broadcast_create(d, s, b, dt, lt_device(), &op));
    LT_DESTROY_PARTS(&s, &b);
    return op;
}

/* The op under test, each suite's own pair_op. */
static ladle_op *make(const pair_case *c, ladle_dtype dt);

/* lt_adjoint_cases' maker: the cases that fit and move something. */
static ladle_op *pair_make_case(int k, ladle_dtype dt, const char **name)
{
    const pair_case *c = &pair_cases[k];
    *name = c->name;
    return case_needs(c) > lt_size || block_volume(c) == 0 ? NULL : make(c, dt);
}

/* One exact-values pass of a case: the owners' side holds owner_value, the
 * receivers' side receiver_value (x on the op's source side, dy on its
 * destination side), then forward and adjoint; y and dx are read back. */
typedef struct pair_pass {
    ladle_op *op;
    ladle_tensor *x, *y, *dy, *dx;
    double *yv, *dxv; /* y and dx on the host */
    int i, j;         /* this rank in the small and the big partition, or -1 */
    int owner;        /* the reference owner of big rank j (-1 off the big one) */
    int64_t n;        /* the block's volume */
} pair_pass;

/* Stores the values of side rank r (-1: none) into t. */
static void pair_fill(ladle_tensor *t, int r, double (*value)(int, int64_t), int64_t n,
                      int64_t nv)
{
    double *v = calloc((size_t)nv + 1, sizeof *v);
    for (int64_t e = 0; r >= 0 && e < n; e++)
        v[e] = value(r, e);
    if (r >= 0)
        lt_store(t, v);
    free(v);
}

/* reduce: the op is a sum-reduce (x on the big partition). */
static void pair_pass_run(const pair_case *c, ladle_dtype dt, int reduce, pair_pass *p)
{
    p->op = make(c, dt);
    p->x = lt_op_tensor(p->op, 0), p->y = lt_op_tensor(p->op, 1);
    p->dy = lt_op_tensor(p->op, 1), p->dx = lt_op_tensor(p->op, 0);
    p->i = small_rank_of_me(c), p->j = big_rank_of_me(c);
    p->n = block_volume(c);
    int64_t nv = p->n;
    nv = ladle_tensor_numel(p->x) > nv ? ladle_tensor_numel(p->x) : nv;
    nv = ladle_tensor_numel(p->dy) > nv ? ladle_tensor_numel(p->dy) : nv;
    pair_fill(reduce ? p->dy : p->x, p->i, owner_value, p->n, nv);
    pair_fill(reduce ? p->x : p->dy, p->j, receiver_value, p->n, nv);
    LT_OK(ladle_op_forward(p->op, p->x, p->y));
    LT_OK(ladle_op_adjoint(p->op, p->dy, p->dx));
    p->yv = lt_values(p->y), p->dxv = lt_values(p->dx);
    p->owner = p->j >= 0 ? reference_owner(c, p->j) : -1;
}

static void pair_pass_free(pair_pass *p)
{
    free(p->yv), free(p->dxv);
    LT_DESTROY(&p->x, &p->y, &p->dx, &p->dy);
    ladle_op_destroy(&p->op);
}

/* Whether v holds owner's block (n values) exactly. */
static int pair_holds_block(const double *v, int64_t n, int owner)
{
    int ok = 1;
    for (int64_t e = 0; e < n; e++)
        ok &= v[e] == owner_value(owner, e);
    return ok;
}

/* Whether v holds exactly the sum of owner i's receivers' blocks. */
static int pair_holds_sum(const pair_case *c, const double *v, int64_t n, int i)
{
    for (int64_t e = 0; e < n; e++) {
        double want = 0;
        for (int q = 0; q < lt_ranks_of(c->bd, c->bshape); q++)
            if (reference_owner(c, q) == i)
                want += receiver_value(q, e);
        if (v[e] != want)
            return 0;
    }
    return 1;
}

/* The exact-values test: for every case that fits, f64 then f32, a pass
 * (reduce as pair_pass_run's) that check judges ("f32" or "f64"). */
typedef void pair_check(const pair_case *c, const char *dtype, const pair_pass *p);
static void pair_exact_values(int reduce, pair_check *check)
{
    for (int k = 0; k < N_PAIR_CASES; k++) {
        if (case_needs(&pair_cases[k]) > lt_size)
            continue;
        for (int t = 0; t < 2; t++) {
            pair_pass p;
            pair_pass_run(&pair_cases[k], t ? LADLE_F32 : LADLE_F64, reduce, &p);
            check(&pair_cases[k], t ? "f32" : "f64", &p);
            pair_pass_free(&p);
        }
    }
}

#endif /* LADLE_TEST_PAIR_CASES_H */
