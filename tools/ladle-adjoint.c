/*
 * ladle-adjoint: run the dot-product test of one primitive on partitions
 * named on the command line.
 *
 *   mpiexec -n 6 bin/ladle-adjoint broadcast --px 1x3@0-2 --py 2x3@0-5 \
 *       --shape 7x11 --dtype f64
 *
 * Ranks of MPI_COMM_WORLD outside both partitions take part as inactive
 * ranks. The last line printed is "adjoint mismatch: <value>"; the exit
 * status is 0 when it is within the tolerance, 1 when it is not, and 2 for
 * an illegal configuration or bad options.
 */
#include <math.h>
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "tool.h"
#include "ladle.h"

static const char usage[] =
    "usage: mpiexec -n N ladle-adjoint PRIMITIVE [options]\n"
    "\n"
    "Runs the dot-product test |<Fx,y> - <x,F*y>| / max(|<Fx,y>|, |<x,F*y>|) of one\n"
    "primitive F with random x and y, inner products summed in double precision\n"
    "over all ranks. Ranks outside the partitions take part as inactive ranks.\n"
    "\n"
    "PRIMITIVE: broadcast | sum-reduce | all-sum-reduce | halo-exchange | repartition |\n"
    "           all-gather | reduce-scatter\n"
    "\n"
    "options:\n"
    "  --px SHAPE[@RANKS]   partition of x, e.g. 2x3@0-5 or 1x3@0,2,4\n"
    "                       (default shape 1; default ranks: the first ones)\n"
    "  --py SHAPE[@RANKS]   partition of y (broadcast, sum-reduce, repartition)\n"
    "  --shape SHAPE        repartition, halo-exchange, all-gather, reduce-scatter:\n"
    "                       the global tensor shape;\n"
    "                       broadcast, sum-reduce, all-sum-reduce: each rank's block\n"
    "  --axes LIST|none     all-sum-reduce: partition axes to reduce (default: all)\n"
    "  --axis N             all-gather, reduce-scatter: the partition axis of the\n"
    "                       groups (default 0)\n"
    "  --dim N              all-gather, reduce-scatter: the sharded tensor dimension\n"
    "                       (default 0)\n"
    "  --counts LIST        all-gather, reduce-scatter: each member's share of --dim,\n"
    "                       e.g. 5,0,2 (default: balanced)\n"
    "  --kernel LIST        halo-exchange: one value per tensor dimension (default 1)\n"
    "  --stride LIST        (default 1)\n"
    "  --padding LIST       (default 0)\n"
    "  --dilation LIST      (default 1)\n"
    "  --ceil-mode          halo-exchange: output length rounds up\n"
    "  --periodic LIST      halo-exchange: the dimensions that wrap around (circular\n"
    "                       padding), e.g. 2,3 (default none)\n"
    "  --x-split S/S/..     repartition, halo-exchange: an unbalanced split of x, the\n"
    "                       block sizes of each dimension separated by '/', e.g.\n"
    "                       27,25,25/16,13,13,13 (default: balanced)\n"
    "  --transpose-src      broadcast, sum-reduce: reverse the source partition shape\n"
    "  --transpose-dest     broadcast, sum-reduce: reverse the destination shape\n"
    "  --dtype f32|f64      element type (default f64)\n"
    "  --device cpu|cuda|guarded  where the tensors live (default cpu); cuda runs the\n"
    "                       test on GPU memory, each rank on its GPU (ladle/device.h)\n"
    "  --seed N             random seed (default 1)\n"
    "  --tolerance T        pass threshold (default 1e-13 for f64, 1e-5 for f32)\n"
    "  --help, --version    this text; the version and the MPI it was built with\n"
    "\n"
    "The last line printed is 'adjoint mismatch: <value>'. Exit status: 0 within the\n"
    "tolerance, 1 above it, 2 for an illegal configuration or bad options.\n";

typedef struct options {
    const char *primitive;
    const char *px, *py;
    int shape_ndim;
    int64_t shape[LADLE_MAX_NDIM];
    int have_shape;
    int naxes;
    int axes[LADLE_MAX_NDIM];
    int axes_given;
    int axis, dim, ncounts;
    int64_t counts[64];
    int64_t win[4][LADLE_MAX_NDIM];
    int win_n[4];
    int ceil_mode;
    unsigned periodic;
    const char *x_split;
    unsigned flags;
    ladle_dtype dtype;
    ladle_device device;
    uint64_t seed;
    double tolerance;
} options;

static int world_rank(void)
{
    int r;
    MPI_Comm_rank(MPI_COMM_WORLD, &r);
    return r;
}

static int world_size(void)
{
    int n;
    MPI_Comm_size(MPI_COMM_WORLD, &n);
    return n;
}

#define FAIL_USAGE(...)                                                                    \
    do {                                                                                   \
        if (world_rank() == 0)                                                             \
            fprintf(stderr, "ladle-adjoint: " __VA_ARGS__);                                \
        return -1;                                                                         \
    } while (0)

static const char *const primitives[] = {"broadcast",      "sum-reduce",  "all-sum-reduce",
                                         "halo-exchange",  "repartition", "all-gather",
                                         "reduce-scatter", NULL};
enum { P_BCAST, P_REDUCE, P_ALLREDUCE, P_HALO, P_REPART, P_GATHER, P_SCATTER };

/* Which primitives take which options (bits of the enum above). */
#define FOR(p) (1u << (p))
typedef struct optuse {
    const char *name;
    unsigned for_;
} optuse;
static const optuse uses[] = {
    {"--py", FOR(P_BCAST) | FOR(P_REDUCE) | FOR(P_REPART)},
    {"--axes", FOR(P_ALLREDUCE)},
    {"--axis", FOR(P_GATHER) | FOR(P_SCATTER)},
    {"--dim", FOR(P_GATHER) | FOR(P_SCATTER)},
    {"--counts", FOR(P_GATHER) | FOR(P_SCATTER)},
    {"--kernel", FOR(P_HALO)},
    {"--stride", FOR(P_HALO)},
    {"--padding", FOR(P_HALO)},
    {"--dilation", FOR(P_HALO)},
    {"--ceil-mode", FOR(P_HALO)},
    {"--periodic", FOR(P_HALO)},
    {"--x-split", FOR(P_HALO) | FOR(P_REPART)},
    {"--transpose-src", FOR(P_BCAST) | FOR(P_REDUCE)},
    {"--transpose-dest", FOR(P_BCAST) | FOR(P_REDUCE)},
};
#define N_USES ((int)(sizeof uses / sizeof uses[0]))

/* The values a window option accepts: kernel, stride and dilation from 1,
 * padding from 0; ladle itself refuses a window too large for the tensor. */
#define WIN_MAX ((int64_t)1 << 62)

static int takes_value(const char *a)
{
    static const char *const names[] = {
        "--px",        "--py",       "--shape",  "--axes",   "--dtype",   "--seed",
        "--tolerance", "--x-split",  "--kernel", "--stride", "--padding", "--dilation",
        "--device",    "--periodic", "--axis",   "--dim",    "--counts",  NULL};
    for (int k = 0; names[k]; k++)
        if (strcmp(a, names[k]) == 0)
            return 1;
    return 0;
}

static int parse_value(const char *a, const char *v, options *o, char *why)
{
    static const char *win_names[4] = {"--kernel", "--stride", "--padding", "--dilation"};
    int idx = 0, n = 0;
    if (strcmp(a, "--px") == 0 || strcmp(a, "--py") == 0) {
        *(a[3] == 'x' ? &o->px : &o->py) = v;
        return 0;
    }
    if (strcmp(a, "--shape") == 0) {
        o->have_shape = 1;
        return cli_shape(a, v, 0, WIN_MAX, LADLE_MAX_NDIM, &o->shape_ndim, o->shape, why);
    }
    if (strcmp(a, "--axes") == 0) {
        int64_t ax[LADLE_MAX_NDIM];
        o->axes_given = 1;
        o->naxes = 0;
        if (strcmp(v, "none") == 0)
            return 0;
        if (cli_ints(a, v, 0, LADLE_MAX_NDIM - 1, ax, LADLE_MAX_NDIM, &o->naxes, why))
            return -1;
        for (int k = 0; k < o->naxes; k++)
            o->axes[k] = (int)ax[k];
        return 0;
    }
    if (strcmp(a, "--dtype") == 0) {
        static const char *const names[] = {"f32", "f64", NULL};
        if (cli_choice(a, v, names, &idx, why))
            return -1;
        o->dtype = idx ? LADLE_F64 : LADLE_F32;
        return 0;
    }
    if (strcmp(a, "--device") == 0) {
        static const char *const names[] = {"cpu", "cuda", "guarded", NULL};
        static const ladle_device devices[] = {LADLE_CPU, LADLE_CUDA, LADLE_GUARDED};
        if (cli_choice(a, v, names, &idx, why))
            return -1;
        o->device = devices[idx];
        return 0;
    }
    if (strcmp(a, "--seed") == 0)
        return cli_u64(a, v, &o->seed, why);
    if (strcmp(a, "--axis") == 0 || strcmp(a, "--dim") == 0) {
        int64_t k;
        if (cli_ints(a, v, 0, LADLE_MAX_NDIM - 1, &k, 1, &n, why))
            return -1;
        *(a[3] == 'x' ? &o->axis : &o->dim) = (int)k;
        return 0;
    }
    if (strcmp(a, "--counts") == 0)
        return cli_ints(a, v, 0, WIN_MAX, o->counts, 64, &o->ncounts, why);
    if (strcmp(a, "--tolerance") == 0)
        return cli_real(a, v, 0, HUGE_VAL, CLI_OPEN_HI, &o->tolerance, why);
    if (strcmp(a, "--x-split") == 0) {
        o->x_split = v;
        return 0;
    }
    if (strcmp(a, "--periodic") == 0) {
        int64_t dims[LADLE_MAX_NDIM];
        if (cli_ints(a, v, 0, LADLE_MAX_NDIM - 1, dims, LADLE_MAX_NDIM, &n, why))
            return -1;
        for (int k = 0; k < n; k++)
            o->periodic |= 1u << dims[k];
        return 0;
    }
    for (int k = 0; k < 4; k++)
        if (strcmp(a, win_names[k]) == 0) {
            if (cli_ints(a, v, k == 2 ? 0 : 1, WIN_MAX, o->win[k], LADLE_MAX_NDIM, &n, why))
                return -1;
            o->win_n[k] = n;
            return 0;
        }
    return cli_fail(why, "unknown option '%s'", a);
}

static int parse_args(int argc, char **argv, options *o)
{
    char why[CLI_WHY];
    const char *given[N_USES] = {NULL};
    memset(o, 0, sizeof *o);
    o->dtype = LADLE_F64;
    o->device = LADLE_CPU;
    o->seed = 1;
    o->tolerance = -1;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        for (int k = 0; k < N_USES; k++)
            if (strcmp(a, uses[k].name) == 0)
                given[k] = a;
        if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0) {
            if (world_rank() == 0)
                fputs(usage, stdout);
            return 1;
        } else if (strcmp(a, "--version") == 0) {
            if (world_rank() == 0)
                cli_version("ladle-adjoint");
            return 1;
        } else if (a[0] != '-') {
            if (o->primitive != NULL)
                FAIL_USAGE("unexpected argument '%s' (one primitive per run)\n", a);
            o->primitive = a;
        } else if (strcmp(a, "--transpose-src") == 0) {
            o->flags |= LADLE_TRANSPOSE_SRC;
        } else if (strcmp(a, "--transpose-dest") == 0) {
            o->flags |= LADLE_TRANSPOSE_DEST;
        } else if (strcmp(a, "--ceil-mode") == 0) {
            o->ceil_mode = 1;
        } else if (!takes_value(a)) {
            FAIL_USAGE("unknown option '%s' (see --help)\n", a);
        } else if (i + 1 >= argc) {
            FAIL_USAGE("option %s needs a value\n", a);
        } else if (parse_value(a, argv[++i], o, why) != 0) {
            FAIL_USAGE("%s\n", why);
        }
    }
    int which = 0;
    if (o->primitive == NULL)
        FAIL_USAGE("no primitive given (see --help)\n");
    if (cli_choice("the primitive", o->primitive, primitives, &which, why))
        FAIL_USAGE("%s (see --help)\n", why);
    for (int k = 0; k < N_USES; k++)
        if (given[k] && !(uses[k].for_ & FOR(which)))
            FAIL_USAGE("%s does not apply to %s (see --help)\n", uses[k].name, o->primitive);
    if (o->tolerance < 0)
        o->tolerance = ladle_adjoint_tolerance(o->dtype);
    return 0;
}

/* "SHAPE[@RANKS]" into a partition of MPI_COMM_WORLD. */
static int make_partition(const char *spec, const char *name, ladle_partition **p,
                          ladle_status *st)
{
    char buf[256], why[CLI_WHY];
    int ndim = 1, shape[LADLE_MAX_NDIM] = {1}, *ranks = NULL, nranks = 0, size = world_size();
    int64_t sh[LADLE_MAX_NDIM] = {0}, want = 1;
    const char *at = NULL;
    if (spec != NULL) {
        if (strlen(spec) >= sizeof buf)
            FAIL_USAGE("%s '%.40s...' is too long\n", name, spec);
        snprintf(buf, sizeof buf, "%s", spec);
        char *sep = strchr(buf, '@');
        if (sep != NULL) {
            *sep = '\0';
            at = sep + 1;
        }
        if (cli_shape(name, buf, 1, size, LADLE_MAX_NDIM, &ndim, sh, why) != 0)
            FAIL_USAGE("%s\n", why);
        for (int d = 0; d < ndim; d++) {
            shape[d] = (int)sh[d];
            want *= sh[d];
            if (want > size)
                FAIL_USAGE("%s '%s' needs more than the %d ranks there are\n", name, spec, size);
        }
    }
    if (at != NULL) {
        ranks = calloc((size_t)size, sizeof(int));
        if (ranks == NULL)
            FAIL_USAGE("out of memory\n");
        if (cli_ranks(name, at, size, ranks, size, &nranks, why) != 0) {
            free(ranks);
            FAIL_USAGE("%s\n", why);
        }
        if (want != nranks) {
            free(ranks);
            FAIL_USAGE("%s '%s' lists %d ranks for a grid of %lld\n", name, spec, nranks,
                       (long long)want);
        }
    }
    *st = ladle_partition_create(ladle_comm_of(MPI_COMM_WORLD), ndim, shape, ranks, p);
    free(ranks);
    return 0;
}

static ladle_status make_x_layout(const options *o, const ladle_partition *p,
                                  ladle_layout **l, int *bad)
{
    int64_t sizes[LADLE_MAX_NDIM][64];
    const int64_t *rows[LADLE_MAX_NDIM];
    char buf[512], why[CLI_WHY];
    int pd = ladle_partition_ndim(p), d = 0;
    if (o->x_split == NULL)
        return ladle_layout_create_balanced(p, o->shape_ndim, o->shape, l);
    snprintf(buf, sizeof buf, "%s", o->x_split);
    why[0] = '\0';
    if (strlen(o->x_split) >= sizeof buf)
        snprintf(why, sizeof why, "--x-split is longer than %zu characters", sizeof buf - 1);
    for (char *tok = buf; why[0] == '\0' && tok != NULL; d++) {
        char *slash = strchr(tok, '/');
        int n = 0;
        if (slash)
            *slash = '\0';
        if (d == pd)
            snprintf(why, sizeof why, "--x-split '%s' has more than the partition's %d "
                     "dimensions", o->x_split, pd);
        else if (cli_ints("--x-split", tok, 0, WIN_MAX, sizes[d], 64, &n, why) == 0 &&
                 n != ladle_partition_shape(p)[d])
            snprintf(why, sizeof why, "--x-split '%s': dimension %d has %d sizes for %d "
                     "partition coordinates", o->x_split, d, n, ladle_partition_shape(p)[d]);
        rows[d] = sizes[d];
        tok = slash ? slash + 1 : NULL;
    }
    if (why[0] == '\0' && d != pd)
        snprintf(why, sizeof why, "--x-split '%s' gives %d dimension%s of sizes; the partition "
                 "has %d (separate them with '/')", o->x_split, d, d == 1 ? "" : "s", pd);
    if (why[0] != '\0') {
        *bad = 1;
        if (world_rank() == 0)
            fprintf(stderr, "ladle-adjoint: %s\n", why);
        return LADLE_ERR_ARG;
    }
    return ladle_layout_create_split(p, o->shape_ndim, o->shape, rows, l);
}

static ladle_status make_window(const options *o, ladle_window *w, int *bad)
{
    ladle_window_init(w, o->shape_ndim);
    int64_t *fields[4] = {w->kernel, w->stride, w->padding, w->dilation};
    static const char *names[4] = {"kernel", "stride", "padding", "dilation"};
    for (int k = 0; k < 4; k++) {
        if (o->win_n[k] == 0)
            continue;
        if (o->win_n[k] != o->shape_ndim) {
            *bad = 1;
            if (world_rank() == 0)
                fprintf(stderr,
                        "ladle-adjoint: --%s needs %d values, one per tensor "
                        "dimension\n",
                        names[k], o->shape_ndim);
            return LADLE_ERR_ARG;
        }
        for (int d = 0; d < o->shape_ndim; d++)
            fields[k][d] = o->win[k][d];
    }
    w->ceil_mode = o->ceil_mode;
    w->periodic = o->periodic;
    return LADLE_OK;
}

/* All-gather or reduce-scatter: --counts needs one entry per member of a
 * group (the partition's extent along --axis); ladle checks the rest. */
static ladle_status make_shard_op(const options *o, const ladle_partition *px, ladle_op **op,
                                  int *bad)
{
    ladle_all_gather_desc d;
    ladle_all_gather_desc_init(&d, o->axis, o->shape_ndim, o->shape, o->dim);
    d.flags = o->flags;
    if (o->ncounts > 0) {
        /* an axis outside the partition is ladle's to refuse */
        int g = o->axis < ladle_partition_ndim(px) ? ladle_partition_shape(px)[o->axis] : -1;
        if (g >= 0 && o->ncounts != g) {
            *bad = 1;
            if (world_rank() == 0)
                fprintf(stderr,
                        "ladle-adjoint: --counts gives %d shares for groups of %d "
                        "members (the partition's extent along --axis %d)\n",
                        o->ncounts, g, o->axis);
            return LADLE_ERR_ARG;
        }
        d.counts = o->counts;
    }
    if (o->primitive[0] == 'a')
        return ladle_all_gather_create(&d, px, o->dtype, o->device, op);
    return ladle_reduce_scatter_create(&d, px, o->dtype, o->device, op);
}

static ladle_status make_op(const options *o, ladle_partition *px, ladle_partition *py,
                            ladle_op **op, int *bad)
{
    ladle_status st = LADLE_OK;
    ladle_layout *lx = NULL, *ly = NULL;
    const char *p = o->primitive;
    ladle_broadcast_desc bd;
    ladle_broadcast_desc_init(&bd, o->shape_ndim, o->shape);
    bd.flags = o->flags;
    if (strcmp(p, "broadcast") == 0) {
        st = ladle_broadcast_create(&bd, px, py, o->dtype, o->device, op);
    } else if (strcmp(p, "sum-reduce") == 0) {
        st = ladle_sum_reduce_create(&bd, px, py, o->dtype, o->device, op);
    } else if (strcmp(p, "all-sum-reduce") == 0) {
        int axes[LADLE_MAX_NDIM], naxes = o->naxes;
        for (int k = 0; k < LADLE_MAX_NDIM; k++)
            axes[k] = o->axes_given ? o->axes[k] : k;
        if (!o->axes_given)
            naxes = ladle_partition_ndim(px);
        ladle_all_sum_reduce_desc ad;
        ladle_all_sum_reduce_desc_init(&ad, naxes, axes, o->shape_ndim, o->shape);
        ad.flags = o->flags;
        st = ladle_all_sum_reduce_create(&ad, px, o->dtype, o->device, op);
    } else if (strcmp(p, "all-gather") == 0 || strcmp(p, "reduce-scatter") == 0) {
        st = make_shard_op(o, px, op, bad);
    } else if (strcmp(p, "repartition") == 0) {
        st = make_x_layout(o, px, &lx, bad);
        if (st == LADLE_OK)
            st = ladle_layout_create_balanced(py, o->shape_ndim, o->shape, &ly);
        if (st == LADLE_OK)
            st = ladle_repartition_create(lx, ly, o->dtype, o->device, o->flags, op);
    } else if (strcmp(p, "halo-exchange") == 0) {
        ladle_window w;
        st = make_x_layout(o, px, &lx, bad);
        if (st == LADLE_OK)
            st = make_window(o, &w, bad);
        if (st == LADLE_OK)
            st = ladle_halo_exchange_create(lx, &w, o->dtype, o->device, o->flags, op);
    } else {
        *bad = 1;
        if (world_rank() == 0)
            fprintf(stderr, "ladle-adjoint: unknown primitive '%s' (see --help)\n", p);
        st = LADLE_ERR_ARG;
    }
    ladle_layout_destroy(&lx);
    ladle_layout_destroy(&ly);
    return st;
}

/* Report the first failing rank's message; returns 1 if any rank failed. */
static int report(ladle_status st, const char *what)
{
    int first = tool_first_failed(st);
    if (first < 0)
        return 0;
    if (world_rank() == first)
        fprintf(stderr, "ladle-adjoint: %s failed: %s: %s\n", what, ladle_status_name(st),
                ladle_error_message());
    return 1;
}

/* The test's result r of op, said on rank 0: the inner products and the
 * worst mismatch over the ranks. 0, or 1 where it exceeds the tolerance.
 * Collective. */
static int print_result(const options *o, const ladle_op *op, const ladle_adjoint_result *r)
{
    /* ranks outside the op hold zeros; the op's ranks all hold the result */
    double worst[3] = {r->mismatch, r->fx_y, r->x_fty}, all[3];
    MPI_Allreduce(worst, all, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
    /* <Fx,y> and <x,F*y> from world rank 0 if it took part, else from the
     * lowest rank that did */
    int me = world_rank(), size, src;
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    int mine = ladle_op_active(op) ? me : size;
    MPI_Allreduce(&mine, &src, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
    if (src < size)
        MPI_Bcast(&worst[1], 2, MPI_DOUBLE, src, MPI_COMM_WORLD);
    if (me == 0) {
        printf("%s %s on %s: <F x, y> = %.17g, <x, F* y> = %.17g, tolerance %.1e\n",
               o->primitive, ladle_dtype_name(o->dtype), ladle_device_name(o->device), worst[1],
               worst[2], o->tolerance);
        printf("adjoint mismatch: %.3e\n", all[0]);
    }
    return all[0] <= o->tolerance ? 0 : 1;
}

int main(int argc, char **argv)
{
    options o;
    ladle_partition *px = NULL, *py = NULL;
    ladle_op *op = NULL;
    ladle_adjoint_result r;
    ladle_status st = LADLE_OK, sty = LADLE_OK;
    int rc = 0, bad = 0;

    MPI_Init(&argc, &argv);
    int parsed = parse_args(argc, argv, &o);
    if (parsed != 0) {
        return tool_exit(parsed > 0 ? 0 : 2);
    }
    int needs_py = strcmp(o.primitive, "broadcast") == 0 ||
                   strcmp(o.primitive, "sum-reduce") == 0 ||
                   strcmp(o.primitive, "repartition") == 0;
    if (!o.have_shape) {
        o.shape_ndim = 1;
        o.shape[0] = 1;
    }
    /* a refused --py frees the partition --px made */
    if (make_partition(o.px, "--px", &px, &st) != 0 ||
        (needs_py && make_partition(o.py, "--py", &py, &sty) != 0)) {
        rc = 2;
        goto done;
    }
    if (report(st != LADLE_OK ? st : sty, "creating the partitions")) {
        rc = 2;
        goto done;
    }
    st = make_op(&o, px, py, &op, &bad);
    if (bad || report(st, "creating the operator")) {
        rc = 2;
        goto done;
    }
    st = ladle_adjoint_test(op, o.seed, &r);
    if (report(st, "the adjoint test")) {
        rc = 2;
        goto done;
    }
    rc = print_result(&o, op, &r);
done:
    ladle_op_destroy(&op);
    ladle_partition_destroy(&px);
    ladle_partition_destroy(&py);
    return tool_exit(rc);
}
