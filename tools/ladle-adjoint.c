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
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "ladle.h"

static const char usage[] =
    "usage: mpiexec -n N ladle-adjoint PRIMITIVE [options]\n"
    "\n"
    "Runs the dot-product test |<Fx,y> - <x,F*y>| / max(|<Fx,y>|, |<x,F*y>|) of one\n"
    "primitive F with random x and y, inner products summed in double precision\n"
    "over all ranks. Ranks outside the partitions take part as inactive ranks.\n"
    "\n"
    "PRIMITIVE: broadcast | sum-reduce | all-sum-reduce | halo-exchange | repartition\n"
    "\n"
    "options:\n"
    "  --px SHAPE[@RANKS]   partition of x, e.g. 2x3@0-5 or 1x3@0,2,4\n"
    "                       (default shape 1; default ranks: the first ones)\n"
    "  --py SHAPE[@RANKS]   partition of y (broadcast, sum-reduce, repartition)\n"
    "  --shape SHAPE        repartition, halo-exchange: the global tensor shape;\n"
    "                       broadcast, sum-reduce, all-sum-reduce: each rank's block\n"
    "  --axes LIST|none     all-sum-reduce: partition axes to reduce (default: all)\n"
    "  --kernel LIST        halo-exchange: one value per tensor dimension (default 1)\n"
    "  --stride LIST        (default 1)\n"
    "  --padding LIST       (default 0)\n"
    "  --dilation LIST      (default 1)\n"
    "  --ceil-mode          halo-exchange: output length rounds up\n"
    "  --x-split S/S/..     repartition, halo-exchange: an unbalanced split of x, the\n"
    "                       block sizes of each dimension separated by '/', e.g.\n"
    "                       27,25,25/16,13,13,13 (default: balanced)\n"
    "  --transpose-src      broadcast, sum-reduce: reverse the source partition shape\n"
    "  --transpose-dest     broadcast, sum-reduce: reverse the destination shape\n"
    "  --dtype f32|f64      element type (default f64)\n"
    "  --seed N             random seed (default 1)\n"
    "  --tolerance T        pass threshold (default 1e-13 for f64, 1e-5 for f32)\n"
    "  --help               this text\n"
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
    int64_t win[4][LADLE_MAX_NDIM];
    int win_n[4];
    int ceil_mode;
    const char *x_split;
    unsigned flags;
    ladle_dtype dtype;
    unsigned long long seed;
    double tolerance;
} options;

static int world_rank(void)
{
    int r;
    MPI_Comm_rank(MPI_COMM_WORLD, &r);
    return r;
}

#define FAIL_USAGE(...)                                                                    \
    do {                                                                                   \
        if (world_rank() == 0)                                                             \
            fprintf(stderr, "ladle-adjoint: " __VA_ARGS__);                                \
        return -1;                                                                         \
    } while (0)

static int parse_args(int argc, char **argv, options *o)
{
    static const char *win_names[4] = {"--kernel", "--stride", "--padding", "--dilation"};
    memset(o, 0, sizeof *o);
    o->dtype = LADLE_F64;
    o->seed = 1;
    o->tolerance = -1;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        const char *v = i + 1 < argc ? argv[i + 1] : NULL;
        int used = 1, n = 0;
        if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0) {
            if (world_rank() == 0)
                fputs(usage, stdout);
            return 1;
        } else if (a[0] != '-') {
            if (o->primitive != NULL)
                FAIL_USAGE("unexpected argument '%s'\n", a);
            o->primitive = a;
            used = 0;
        } else if (strcmp(a, "--transpose-src") == 0) {
            o->flags |= LADLE_TRANSPOSE_SRC, used = 0;
        } else if (strcmp(a, "--transpose-dest") == 0) {
            o->flags |= LADLE_TRANSPOSE_DEST, used = 0;
        } else if (strcmp(a, "--ceil-mode") == 0) {
            o->ceil_mode = 1, used = 0;
        } else if (v == NULL) {
            FAIL_USAGE("option %s needs a value\n", a);
        } else if (strcmp(a, "--px") == 0) {
            o->px = v;
        } else if (strcmp(a, "--py") == 0) {
            o->py = v;
        } else if (strcmp(a, "--shape") == 0) {
            if (cli_parse_shape(v, &o->shape_ndim, o->shape) != 0)
                FAIL_USAGE("bad shape '%s' (expected e.g. 7x11)\n", v);
            o->have_shape = 1;
        } else if (strcmp(a, "--axes") == 0) {
            int64_t ax[LADLE_MAX_NDIM];
            o->axes_given = 1;
            if (strcmp(v, "none") == 0)
                o->naxes = 0;
            else if (cli_parse_ints(v, ax, LADLE_MAX_NDIM, &o->naxes) != 0)
                FAIL_USAGE("bad axes '%s' (expected e.g. 0,2 or none)\n", v);
            for (int k = 0; k < o->naxes; k++)
                o->axes[k] = (int)ax[k];
        } else if (strcmp(a, "--dtype") == 0) {
            if (strcmp(v, "f32") == 0)
                o->dtype = LADLE_F32;
            else if (strcmp(v, "f64") == 0)
                o->dtype = LADLE_F64;
            else
                FAIL_USAGE("bad dtype '%s' (f32 or f64)\n", v);
        } else if (strcmp(a, "--seed") == 0) {
            o->seed = strtoull(v, NULL, 10);
        } else if (strcmp(a, "--tolerance") == 0) {
            char *end = NULL;
            o->tolerance = strtod(v, &end);
            if (end == v || *end != '\0' || !(o->tolerance >= 0))
                FAIL_USAGE("bad tolerance '%s' (a number >= 0)\n", v);
        } else if (strcmp(a, "--x-split") == 0) {
            o->x_split = v;
        } else {
            int k = 0;
            while (k < 4 && strcmp(a, win_names[k]) != 0)
                k++;
            if (k == 4)
                FAIL_USAGE("unknown option '%s' (see --help)\n", a);
            if (cli_parse_ints(v, o->win[k], LADLE_MAX_NDIM, &n) != 0)
                FAIL_USAGE("bad list '%s' for %s\n", v, a);
            o->win_n[k] = n;
        }
        i += used;
    }
    if (o->primitive == NULL)
        FAIL_USAGE("no primitive given (see --help)\n");
    if (o->tolerance < 0)
        o->tolerance = ladle_adjoint_tolerance(o->dtype);
    return 0;
}

/* "SHAPE[@RANKS]" into a partition of MPI_COMM_WORLD. */
static int make_partition(const char *spec, const char *name, ladle_partition **p,
                          ladle_status *st)
{
    char buf[256];
    int ndim = 1, shape[LADLE_MAX_NDIM] = {1}, *ranks = NULL, nranks = 0, size;
    int64_t sh[LADLE_MAX_NDIM];
    const char *at = NULL;
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    if (spec != NULL) {
        snprintf(buf, sizeof buf, "%s", spec);
        char *sep = strchr(buf, '@');
        if (sep != NULL) {
            *sep = '\0';
            at = sep + 1;
        }
        if (cli_parse_shape(buf, &ndim, sh) != 0)
            FAIL_USAGE("bad partition shape in %s '%s'\n", name, spec);
        for (int d = 0; d < ndim; d++)
            shape[d] = (int)sh[d];
    }
    if (at != NULL) {
        int cap = 4096;
        ranks = calloc((size_t)cap, sizeof(int));
        if (ranks == NULL || cli_parse_ranks(at, ranks, cap, &nranks) != 0) {
            free(ranks);
            FAIL_USAGE("bad rank list in %s '%s'\n", name, spec);
        }
        long long want = 1;
        for (int d = 0; d < ndim; d++)
            want *= shape[d];
        if (want != nranks) {
            free(ranks);
            FAIL_USAGE("%s '%s' lists %d ranks for a grid of %lld\n", name, spec, nranks,
                       want);
        }
    }
    *st = ladle_partition_create(MPI_COMM_WORLD, ndim, shape, ranks, p);
    free(ranks);
    return 0;
}

static ladle_status make_x_layout(const options *o, const ladle_partition *p,
                                  ladle_layout **l, int *bad)
{
    int64_t sizes[LADLE_MAX_NDIM][64];
    const int64_t *rows[LADLE_MAX_NDIM];
    char buf[512];
    if (o->x_split == NULL)
        return ladle_layout_create_balanced(p, o->shape_ndim, o->shape, l);
    snprintf(buf, sizeof buf, "%s", o->x_split);
    int d = 0;
    for (char *tok = strtok(buf, "/"); tok != NULL; tok = strtok(NULL, "/"), d++) {
        int n = 0;
        if (d == LADLE_MAX_NDIM || cli_parse_ints(tok, sizes[d], 64, &n) != 0 ||
            d >= ladle_partition_ndim(p) || n != ladle_partition_shape(p)[d]) {
            *bad = 1;
            if (world_rank() == 0)
                fprintf(stderr,
                        "ladle-adjoint: --x-split '%s' must give %d sizes per "
                        "dimension of the partition, separated by '/'\n",
                        o->x_split,
                        d < ladle_partition_ndim(p) ? ladle_partition_shape(p)[d] : 0);
            return LADLE_ERR_ARG;
        }
        rows[d] = sizes[d];
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
    return LADLE_OK;
}

static ladle_status make_op(const options *o, ladle_partition *px, ladle_partition *py,
                            ladle_op **op, int *bad)
{
    ladle_status st = LADLE_OK;
    ladle_layout *lx = NULL, *ly = NULL;
    const char *p = o->primitive;
    if (strcmp(p, "broadcast") == 0) {
        st =
            ladle_broadcast_create(px, py, o->shape_ndim, o->shape, o->dtype, o->flags, op);
    } else if (strcmp(p, "sum-reduce") == 0) {
        st = ladle_sum_reduce_create(px, py, o->shape_ndim, o->shape, o->dtype, o->flags,
                                     op);
    } else if (strcmp(p, "all-sum-reduce") == 0) {
        int axes[LADLE_MAX_NDIM], naxes = o->naxes;
        for (int k = 0; k < LADLE_MAX_NDIM; k++)
            axes[k] = o->axes_given ? o->axes[k] : k;
        if (!o->axes_given)
            naxes = ladle_partition_ndim(px);
        st = ladle_all_sum_reduce_create(px, naxes, axes, o->shape_ndim, o->shape, o->dtype,
                                         o->flags, op);
    } else if (strcmp(p, "repartition") == 0) {
        st = make_x_layout(o, px, &lx, bad);
        if (st == LADLE_OK)
            st = ladle_layout_create_balanced(py, o->shape_ndim, o->shape, &ly);
        if (st == LADLE_OK)
            st = ladle_repartition_create(lx, ly, o->dtype, o->flags, op);
    } else if (strcmp(p, "halo-exchange") == 0) {
        ladle_window w;
        st = make_x_layout(o, px, &lx, bad);
        if (st == LADLE_OK)
            st = make_window(o, &w, bad);
        if (st == LADLE_OK)
            st = ladle_halo_exchange_create(lx, &w, o->dtype, o->flags, op);
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
    int size, me = world_rank(), first;
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    int mine = st == LADLE_OK ? size : me;
    MPI_Allreduce(&mine, &first, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
    if (first == size)
        return 0;
    if (me == first)
        fprintf(stderr, "ladle-adjoint: %s failed: %s: %s\n", what, ladle_status_name(st),
                ladle_error_message());
    return 1;
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
        MPI_Finalize();
        return parsed > 0 ? 0 : 2;
    }
    int needs_py = strcmp(o.primitive, "broadcast") == 0 ||
                   strcmp(o.primitive, "sum-reduce") == 0 ||
                   strcmp(o.primitive, "repartition") == 0;
    if (!o.have_shape) {
        o.shape_ndim = 1;
        o.shape[0] = 1;
    }
    if (make_partition(o.px, "--px", &px, &st) != 0 ||
        (needs_py && make_partition(o.py, "--py", &py, &sty) != 0)) {
        MPI_Finalize();
        return 2;
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
    /* ranks outside the op hold zeros; the op's ranks all hold the result */
    double worst[3] = {r.mismatch, r.fx_y, r.x_fty}, all[3];
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
        printf("%s %s: <F x, y> = %.17g, <x, F* y> = %.17g, tolerance %.1e\n", o.primitive,
               ladle_dtype_name(o.dtype), worst[1], worst[2], o.tolerance);
        printf("adjoint mismatch: %.3e\n", all[0]);
    }
    rc = all[0] <= o.tolerance ? 0 : 1;
done:
    ladle_op_destroy(&op);
    ladle_partition_destroy(&px);
    ladle_partition_destroy(&py);
    MPI_Finalize();
    return rc;
}
