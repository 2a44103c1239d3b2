/*
 * ladle-tour: a tour of the parallel primitives (what `make demo` runs).
 *
 * Builds each primitive on a few partitions of MPI_COMM_WORLD (6 ranks show
 * every case; fewer skip the ones that do not fit), runs the dot-product
 * test in f32 and f64, and prints one table row per case. Exits 1 if any
 * adjoint mismatch exceeds its tolerance, 2 for an argument it does not
 * know (it takes none but --help and --version).
 */
#include <mpi.h>
#include <stdio.h>
#include <string.h>

#include "cli.h"
#include "tool.h"
#include "ladle.h"

typedef enum { BCAST, REDUCE, ALLREDUCE, REPART, HALO } kind;

typedef struct tour_case {
    kind k;
    const char *what;
    int xd, xshape[5], xfirst;
    int yd, yshape[5], yfirst;
    int nd;
    int64_t shape[5];
    unsigned flags;
    int naxes, axes[3];
    int64_t kernel[5], padding[5], stride[5];
} tour_case;

/* clang-format off */
static const tour_case tour[] = {
    {BCAST, "broadcast 1x3 -> 2x3", 2, {1, 3}, 0, 2, {2, 3}, 0, 2, {7, 11}, 0, 0, {0}, {0}, {0}, {0}},
    {BCAST, "broadcast 1 -> 6 (a weight)", 1, {1}, 0, 1, {6}, 0, 2, {64, 64}, 0, 0, {0}, {0}, {0}, {0}},
    {BCAST, "broadcast 1x3 -> 3x2, transposed", 2, {1, 3}, 0, 2, {3, 2}, 0, 1, {100}, LADLE_TRANSPOSE_SRC, 0, {0}, {0}, {0}, {0}},
    {REDUCE, "sum-reduce 2x3 -> 1x3", 2, {2, 3}, 0, 2, {1, 3}, 3, 2, {7, 11}, 0, 0, {0}, {0}, {0}, {0}},
    {REDUCE, "sum-reduce 6 -> 1 (gradients)", 1, {6}, 0, 1, {1}, 0, 1, {100000}, 0, 0, {0}, {0}, {0}, {0}},
    {ALLREDUCE, "all-sum-reduce 2x3 over axis 0", 2, {2, 3}, 0, 0, {0}, 0, 2, {5, 5}, 0, 1, {0}, {0}, {0}, {0}},
    {ALLREDUCE, "all-sum-reduce 2x3 over both axes", 2, {2, 3}, 0, 0, {0}, 0, 1, {100000}, 0, 2, {0, 1}, {0}, {0}, {0}},
    {REPART, "repartition 6x1 -> 2x3", 2, {6, 1}, 0, 2, {2, 3}, 0, 2, {77, 55}, 0, 0, {0}, {0}, {0}, {0}},
    {REPART, "repartition 1x1 -> 3x2 (scatter)", 2, {1, 1}, 0, 2, {3, 2}, 0, 2, {77, 55}, 0, 0, {0}, {0}, {0}, {0}},
    {REPART, "repartition 2x3 -> 1x1 (gather)", 2, {2, 3}, 0, 2, {1, 1}, 5, 2, {77, 55}, 0, 0, {0}, {0}, {0}, {0}},
    {REPART, "repartition 1x2 -> 1x3 (next stage)", 2, {1, 2}, 0, 2, {1, 3}, 3, 2, {16, 30}, 0, 0, {0}, {0}, {0}, {0}},
    {HALO, "halo exchange 2x3 tiles, 3x3 kernel", 4, {1, 1, 2, 3}, 0, 0, {0}, 0, 4, {4, 3, 32, 32}, 0, 0, {0}, {1, 1, 3, 3}, {0, 0, 1, 1}, {1, 1, 1, 1}},
    {HALO, "halo exchange 1x2x3 boxes, 5x5x5 s2", 5, {1, 1, 1, 2, 3}, 0, 0, {0}, 0, 5, {2, 2, 9, 20, 21}, 0, 0, {0}, {1, 1, 5, 5, 5}, {0, 0, 2, 2, 2}, {1, 1, 2, 2, 2}},
};
/* clang-format on */
#define N_TOUR ((int)(sizeof tour / sizeof tour[0]))

static int grid(int nd, const int *s)
{
    int n = 1;
    for (int d = 0; d < nd; d++)
        n *= s[d];
    return n;
}

static ladle_status build(const tour_case *c, ladle_dtype dt, ladle_op **op)
{
    ladle_status st = LADLE_OK;
    ladle_partition *px = NULL, *py = NULL;
    ladle_layout *lx = NULL, *ly = NULL;
    int xr[64], yr[64];
    for (int r = 0; r < 64; r++)
        xr[r] = c->xfirst + r, yr[r] = c->yfirst + r;
    st = ladle_partition_create(ladle_comm_of(MPI_COMM_WORLD), c->xd, c->xshape, xr, &px);
    if (st == LADLE_OK && c->yd > 0)
        st = ladle_partition_create(ladle_comm_of(MPI_COMM_WORLD), c->yd, c->yshape, yr,
                                    &py);
    if (st != LADLE_OK)
        goto done;
    ladle_broadcast_desc bd;
    ladle_broadcast_desc_init(&bd, c->nd, c->shape);
    bd.flags = c->flags;
    ladle_all_sum_reduce_desc ad;
    ladle_all_sum_reduce_desc_init(&ad, c->naxes, c->axes, c->nd, c->shape);
    switch (c->k) {
    case BCAST:
        st = ladle_broadcast_create(&bd, px, py, dt, LADLE_CPU, op);
        break;
    case REDUCE:
        st = ladle_sum_reduce_create(&bd, px, py, dt, LADLE_CPU, op);
        break;
    case ALLREDUCE:
        st = ladle_all_sum_reduce_create(&ad, px, dt, LADLE_CPU, op);
        break;
    case REPART:
        st = ladle_layout_create_balanced(px, c->nd, c->shape, &lx);
        if (st == LADLE_OK)
            st = ladle_layout_create_balanced(py, c->nd, c->shape, &ly);
        if (st == LADLE_OK)
            st = ladle_repartition_create(lx, ly, dt, LADLE_CPU, 0, op);
        break;
    case HALO: {
        ladle_window w;
        ladle_window_init(&w, c->nd);
        for (int d = 0; d < c->nd; d++) {
            w.kernel[d] = c->kernel[d];
            w.padding[d] = c->padding[d];
            w.stride[d] = c->stride[d];
        }
        st = ladle_layout_create_balanced(px, c->nd, c->shape, &lx);
        if (st == LADLE_OK)
            st = ladle_halo_exchange_create(lx, &w, dt, LADLE_CPU, 0, op);
        break;
    }
    }
done:
    ladle_layout_destroy(&lx);
    ladle_layout_destroy(&ly);
    ladle_partition_destroy(&px);
    ladle_partition_destroy(&py);
    return st;
}

/* The tour takes only --help and --version: -1 to go on without them,
 * else the exit status (0 after --help or --version, 2 after anything
 * else), said on rank 0. */
static int tour_args(int rank, int argc, char **argv)
{
    for (int i = 1; i < argc; i++) {
        int help = !strcmp(argv[i], "--help") || !strcmp(argv[i], "-h");
        int version = !strcmp(argv[i], "--version");
        if (rank == 0 && help)
            printf("usage: mpiexec -n 6 ladle-tour\n"
                   "Builds each parallel primitive on a few partitions of the ranks (6 show\n"
                   "every case; fewer skip what does not fit), runs the dot-product test in\n"
                   "f32 and f64 and prints a row per case. Exit status 1 if an adjoint\n"
                   "mismatch exceeds its tolerance. Options: --help, --version.\n");
        else if (rank == 0 && version)
            cli_version("ladle-tour");
        else if (rank == 0)
            fprintf(stderr, "ladle-tour: unexpected argument '%s' (it takes only --help and "
                            "--version)\n", argv[i]);
        return help || version ? 0 : 2;
    }
    return -1;
}

/* Rank 0: what the tour shows, and the table's heading. */
static void print_intro(int size)
{
    printf("ladle %s: a tour of the parallel primitives on %d ranks\n\n", ladle_version(),
           size);
    printf("Each primitive F is a linear operator with a hand-written adjoint F*. The\n"
           "dot-product test fills x and y with random numbers and compares <F x, y>\n"
           "with <x, F* y>, both summed over all ranks in double precision.\n\n");
    printf("%-38s %-5s %22s %10s %9s %s\n", "case", "dtype", "<F x, y>", "mismatch",
           "tolerance", "");
    printf("%.*s\n", 96,
           "-----------------------------------------------------------"
           "-------------------------------------------------------");
}

/* The dot-product test of case k in f64 and f32, a row each on rank 0:
 * how many of the two failed on some rank. Collective. */
static int run_case(int k, int rank)
{
    const tour_case *c = &tour[k];
    int bad = 0;
    for (int t = 0; t < 2; t++) {
        ladle_dtype dt = t ? LADLE_F32 : LADLE_F64;
        ladle_op *op = NULL;
        ladle_adjoint_result r = {0, 0, 0};
        ladle_status st = build(c, dt, &op);
        if (st == LADLE_OK)
            st = ladle_adjoint_test(op, 2026 + (uint64_t)k, &r);
        /* the op's ranks hold the result; rank 0 is in every case */
        double tol = ladle_adjoint_tolerance(dt);
        int ok = st == LADLE_OK && r.mismatch <= tol, all_ok = 0;
        MPI_Allreduce(&ok, &all_ok, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
        if (!all_ok)
            bad++;
        if (rank == 0) {
            if (st != LADLE_OK)
                printf("%-38s %-5s failed: %s\n", c->what, ladle_dtype_name(dt),
                       ladle_error_message());
            else
                printf("%-38s %-5s %22.15g %10.2e %9.0e %s\n", c->what, ladle_dtype_name(dt),
                       r.fx_y, r.mismatch, tol, all_ok ? "ok" : "FAILED");
        }
        ladle_op_destroy(&op);
    }
    return bad;
}

/* The ranks case c needs. */
static int case_ranks(const tour_case *c)
{
    int need = c->xfirst + grid(c->xd, c->xshape);
    if (c->yd > 0 && c->yfirst + grid(c->yd, c->yshape) > need)
        need = c->yfirst + grid(c->yd, c->yshape);
    return need;
}

int main(int argc, char **argv)
{
    int rank, size, bad = 0, skipped = 0;
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    int rc = tour_args(rank, argc, argv);
    if (rc >= 0)
        return tool_exit(rc);
    if (rank == 0)
        print_intro(size);
    for (int k = 0; k < N_TOUR; k++) {
        if (case_ranks(&tour[k]) > size) {
            skipped++;
            continue;
        }
        bad += run_case(k, rank);
    }
    if (rank == 0) {
        if (skipped)
            printf("\n(%d cases need more than %d ranks and were skipped; run on 6)\n",
                   skipped, size);
        printf("\n%s\n",
               bad ? "some adjoints FAILED" : "every adjoint holds to machine precision");
        printf("Try your own partitions: mpiexec -n 6 bin/ladle-adjoint --help\n");
    }
    return tool_exit(bad ? 1 : 0);
}
