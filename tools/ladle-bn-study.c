/*
 * ladle-bn-study: how much does synchronised batch norm cost, and what does
 * it buy? Trains the same LeNet-5 with batch norm over the same ranks (the
 * batch split across all of them) three times: statistics per rank
 * (local), per group of two ranks, and over every rank (global), and prints
 * a table of time per step and test accuracy, with a chart in SVG.
 *
 *   mpiexec -n 4 bin/ladle-bn-study --epochs 1 --svg bn-study.svg
 *
 * Same data order, seed and weights in the three runs: only the statistics'
 * reach differs. Options as ladle-train's (--batch, --lr, --epochs, --steps,
 * --data, --seed, ...; not its layout, checkpoint or pipeline options),
 * plus --svg FILE. Exit status as ladle-train's.
 */
#include "train.h"

typedef struct row {
    const char *name;
    ladle_bn_sync sync;
    int group;
    double acc, ms;
} row;

/* The chart (rank 0): 0, or 1 with the reason printed. */
static int chart(const char *path, const row *rows, int n, int ranks, const opts *o)
{
    char why[CLI_WHY];
    FILE *f = fopen(path, "w");
    if (f == NULL) {
        fprintf(stderr, "ladle-bn-study: cannot write %s: %s\n", path, strerror(errno));
        return 1;
    }
    double ms_max = 0;
    for (int i = 0; i < n; i++)
        ms_max = rows[i].ms > ms_max ? rows[i].ms : ms_max;
    const int W = 640, H = 300, left = 70, top = 40, bar = 60, gap = 150, plot = 180;
    fprintf(f, "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%d\" height=\"%d\" "
               "font-family=\"sans-serif\" font-size=\"12\">\n", W, H);
    fprintf(f, "<rect width=\"%d\" height=\"%d\" fill=\"white\"/>\n", W, H);
    fprintf(f, "<text x=\"%d\" y=\"20\" font-size=\"14\">LeNet-5 + batch norm, %d ranks (batch "
               "%lld split %d ways), %d epoch%s: statistics local, per 2 ranks, global</text>\n",
            left, ranks, (long long)o->batch, o->D, o->epochs, o->epochs > 1 ? "s" : "");
    /* two bars per mode: time per step (grey, left axis) and accuracy (blue) */
    for (int i = 0; i < n; i++) {
        int x = left + 20 + i * gap;
        int hm = (int)(plot * rows[i].ms / (ms_max > 0 ? ms_max : 1));
        int ha = (int)(plot * rows[i].acc);
        fprintf(f, "<rect x=\"%d\" y=\"%d\" width=\"%d\" height=\"%d\" fill=\"#999\"/>\n", x,
                top + plot - hm, bar / 2, hm);
        fprintf(f, "<text x=\"%d\" y=\"%d\" text-anchor=\"middle\">%.2f ms</text>\n",
                x + bar / 4, top + plot - hm - 4, rows[i].ms);
        fprintf(f, "<rect x=\"%d\" y=\"%d\" width=\"%d\" height=\"%d\" fill=\"#36c\"/>\n",
                x + bar / 2 + 4, top + plot - ha, bar / 2, ha);
        fprintf(f, "<text x=\"%d\" y=\"%d\" text-anchor=\"middle\">%.1f%%</text>\n",
                x + bar / 2 + 4 + bar / 4, top + plot - ha - 4, 100 * rows[i].acc);
        fprintf(f, "<text x=\"%d\" y=\"%d\" text-anchor=\"middle\">%s</text>\n", x + bar / 2,
                top + plot + 18, rows[i].name);
    }
    fprintf(f, "<line x1=\"%d\" y1=\"%d\" x2=\"%d\" y2=\"%d\" stroke=\"black\"/>\n", left,
            top + plot, W - 20, top + plot);
    fprintf(f, "<rect x=\"%d\" y=\"%d\" width=\"10\" height=\"10\" fill=\"#999\"/><text x=\"%d\" "
               "y=\"%d\">time per step (scaled to the slowest)</text>\n",
            left, H - 30, left + 14, H - 21);
    fprintf(f, "<rect x=\"%d\" y=\"%d\" width=\"10\" height=\"10\" fill=\"#36c\"/><text x=\"%d\" "
               "y=\"%d\">test accuracy (0-100%%)</text>\n",
            left + 300, H - 30, left + 314, H - 21);
    fprintf(f, "</svg>\n");
    if (cli_close_ok(f, path, why)) {
        fprintf(stderr, "ladle-bn-study: %s\n", why);
        return 1;
    }
    return 0;
}

static void study_usage(void)
{
    printf("usage: mpiexec -n N ladle-bn-study [options]   (N even)\n"
           "Trains LeNet-5 with batch norm three times over the N ranks (the batch split N\n"
           "ways), with statistics per rank, per 2 ranks and over all ranks, and prints\n"
           "time per step and test accuracy for each.\n\n"
           "  --svg FILE           write a chart of the three runs\n"
           "  --epochs, --steps, --batch, --lr, --momentum, --adam, --constant-lr,\n"
           "  --weight-decay, --seed, --dtype, --data: as ladle-train's (see its --help)\n"
           "  --help, --version\n");
}

int main(int argc, char **argv)
{
    opts o;
    const char *svg = NULL;
    char **args = NULL;
    int nargs = 0, rc = 0;
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &me);
    MPI_Comm_size(MPI_COMM_WORLD, &world);
    /* --svg is ours; the rest goes to ladle-train's parser */
    args = calloc((size_t)argc + 1, sizeof *args);
    for (int i = 0; args && i < argc; i++) {
        if (!strcmp(argv[i], "--svg")) {
            if (i + 1 >= argc || argv[i + 1][0] == '\0') {
                if (me == 0)
                    fprintf(stderr, "ladle-bn-study: --svg needs a file name (see --help)\n");
                rc = 2;
                break;
            }
            svg = argv[++i];
            continue;
        }
        args[nargs++] = argv[i];
    }
    if (args == NULL)
        rc = 1;
    if (rc == 0)
        rc = parse(nargs, args, &o, M_STUDY, "ladle-bn-study", study_usage);
    if (rc == 0 && world % 2 != 0) {
        if (me == 0)
            fprintf(stderr, "ladle-bn-study: needs an even number of ranks (groups of 2), not "
                            "%d\n", world);
        rc = 2;
    }
    if (rc == 0 && o.batch < world) {
        if (me == 0)
            fprintf(stderr, "ladle-bn-study: a batch of %lld cannot be split over %d ranks\n",
                    (long long)o.batch, world);
        rc = 2;
    }
    const char *out_opt[1] = {"--svg"}, *out_path[1] = {svg};
    if (rc == 0 && tool_outputs_ok(tool, 1, out_opt, out_path))
        rc = 2;
    if (rc != 0) {
        free(args);
        return tool_exit(rc < 0 ? 0 : rc);
    }
    ladle_set_num_threads(1);
    o.bn = 1;
    o.D = world;
    o.Ph = o.Pw = o.F = 1;
    o.quiet = 1;
    row rows[3] = {{"local", LADLE_BN_SYNC_LOCAL, 1, 0, 0},
                   {"groups of 2", LADLE_BN_SYNC_GROUP, 2, 0, 0},
                   {"global", LADLE_BN_SYNC_GLOBAL, 0, 0, 0}};
    for (int i = 0; i < 3 && rc == 0; i++) {
        run_result res = {0, 0};
        o.bn_sync = rows[i].sync;
        o.bn_group = rows[i].group;
        if (me == 0) {
            printf("== batch norm statistics: %s\n", rows[i].name);
            fflush(stdout);
        }
        rc = train_run(&o, &res);
        rows[i].acc = res.accuracy;
        rows[i].ms = res.ms_per_step;
    }
    if (rc == 0 && me == 0) {
        printf("\n%-14s %12s %14s   (%d ranks, batch %lld: %lld samples per rank's statistics "
               "when local)\n",
               "statistics", "ms per step", "test accuracy", world, (long long)o.batch,
               (long long)(o.batch / world));
        for (int i = 0; i < 3; i++)
            printf("%-14s %12.2f %13.2f%%\n", rows[i].name, rows[i].ms, 100 * rows[i].acc);
        if (svg && (rc = chart(svg, rows, 3, world, &o)) == 0)
            printf("chart: %s\n", svg);
    }
    MPI_Bcast(&rc, 1, MPI_INT, 0, MPI_COMM_WORLD);
    free(args);
    return tool_exit(rc);
}
