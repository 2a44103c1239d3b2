/*
 * ladle-bn-study: what does synchronised batch norm cost, and what does it
 * buy? Trains the same network data parallel over the N ranks for every
 * per-rank batch size asked for, with the batch-norm statistics per rank
 * (local), over groups of 2 and of 4 ranks, and over every rank (global),
 * several seeds each; prints the test accuracy (mean and spread over the
 * seeds) and the time per step (median over the seeds), with the cost of
 * the statistics' reduction separated: the step time of a synchronised mode
 * less that of local statistics at the same batch, the two differing in
 * nothing else. Appends every run to a CSV file and draws accuracy against
 * time per step, one panel per rank count found in the file, as SVG.
 *
 *   mpiexec -n 4 bin/ladle-bn-study --per-rank 2,8,32 --seeds 3 \
 *       --samples 12000 --csv bn.csv --svg bn.svg
 *
 * Same data order, weights and learning rate in every mode of a point: only
 * the statistics' reach differs. See docs/training.md for the experiment
 * and its results. Exit status as ladle-train's.
 */
#include <unistd.h>

#include "train.h"

#define MAX_SIZES 16
#define MAX_SEEDS 64
#define SAMPLES_MAX ((int64_t)1 << 40)

typedef struct mode {
    const char *name;
    ladle_bn_sync sync;
    int group; /* ranks per group of statistics (1: local; 0: all) */
} mode;

static const mode modes[] = {{"local", LADLE_BN_SYNC_LOCAL, 1},
                             {"group2", LADLE_BN_SYNC_GROUP, 2},
                             {"group4", LADLE_BN_SYNC_GROUP, 4},
                             {"global", LADLE_BN_SYNC_GLOBAL, 0}};
#define N_MODES 4
static const char *const mode_names[] = {"local", "group2", "group4", "global", NULL};
static const char *const mode_colors[] = {"#d62728", "#ff7f0e", "#2ca02c", "#1f77b4"};

/* What the study asks for beyond ladle-train's options. */
typedef struct study {
    int64_t per_rank[MAX_SIZES];
    int nsizes;
    int use[N_MODES]; /* asked for (and meaningful on this many ranks) */
    int seeds;
    int64_t samples;  /* per run, 0: one epoch of the whole set */
    int64_t lr_batch; /* the global batch at which --lr holds */
    const char *csv, *svg;
} study;

/* One run (a row of the CSV). */
typedef struct row {
    int ranks, mode;
    int64_t per_rank;
    uint64_t seed;
    double acc, ms, loss; /* loss: the run's last training step's */
} row;

/* ---- options ------------------------------------------------------------- */

static void study_usage(void)
{
    printf("usage: mpiexec -n N ladle-bn-study [options]\n"
           "Trains a network data parallel over the N ranks for each per-rank batch, with\n"
           "batch-norm statistics per rank, per group of 2 and 4 ranks and over all ranks,\n"
           "several seeds each, and prints test accuracy (mean, spread) and time per step\n"
           "(median), the statistics' reduction separated.\n\n"
           "  --per-rank B1,B2,..  per-rank batch sizes, 1 to %lld (2,4,8,16,32,64)\n"
           "  --modes M1,M2,..     of local, group2, group4, global (all that apply: a group\n"
           "                       must divide N and be smaller)\n"
           "  --seeds S            seeds per point, 1 to %d, from --seed up (3)\n"
           "  --samples K          training samples per epoch of each run (the whole set)\n"
           "  --lr-batch B         the global batch --lr is meant for; each run scales it\n"
           "                       by its batch / B (128)\n"
           "  --csv FILE           append one line per run to FILE\n"
           "  --svg FILE           chart accuracy against time per step: of every run in\n"
           "                       --csv FILE (one panel per rank count), else of this study\n"
           "  --model M            resnet8 | resnet20 | resnet18 | lenet (resnet8)\n"
           "  --epochs E, --lr R   (1, 0.1)\n"
           "  --momentum, --adam, --constant-lr, --weight-decay, --seed, --dtype, --data,\n"
           "  --steps, --test-limit, --quiet: as ladle-train's\n"
           "  --help, --version\n",
           (long long)BATCH_MAX, MAX_SEEDS);
}

static int study_fail(const char *why)
{
    if (me == 0)
        fprintf(stderr, "ladle-bn-study: %s (see --help)\n", why);
    return 2;
}

/* The study's own defaults: six sizes per rank, every mode, three seeds. */
static void study_own_defaults(study *st)
{
    st->per_rank[0] = 2, st->per_rank[1] = 4, st->per_rank[2] = 8;
    st->per_rank[3] = 16, st->per_rank[4] = 32, st->per_rank[5] = 64;
    st->nsizes = 6;
    st->seeds = 3;
    st->lr_batch = 128;
    for (int k = 0; k < N_MODES; k++)
        st->use[k] = 1;
}

/* --modes val: the comma-separated modes to use, the others dropped. 0, or
 * 1 with the reason in why. */
static int parse_modes(const char *val, study *st, char *why)
{
    memset(st->use, 0, sizeof st->use);
    for (const char *p = val;; p++) {
        size_t len = cli_item(p, ',');
        int k = 0;
        while (k < N_MODES &&
               (strlen(mode_names[k]) != len || strncmp(mode_names[k], p, len) != 0))
            k++;
        if (k == N_MODES)
            return cli_fail(why, "--modes: '%.*s' is not one of local, group2, "
                                 "group4, global", (int)len, p);
        st->use[k] = 1;
        p += len;
        if (*p == '\0')
            return 0;
    }
}

/* A group must split the ranks into several groups: group G of N ranks
 * needs G | N and G < N (G = N is global). A mode that does not fit is an
 * error where the modes were given, else dropped: 0, or 2 with the reason
 * printed. */
static int check_groups(study *st, int given_modes)
{
    char why[CLI_WHY];
    for (int k = 0; k < N_MODES; k++) {
        int g = modes[k].group;
        if (!st->use[k] || g <= 1)
            continue;
        if (world % g == 0 && g < world)
            continue;
        if (given_modes) {
            snprintf(why, sizeof why,
                     "--modes: %s needs a rank count that %d divides, larger than %d (not %d)",
                     mode_names[k], g, g, world);
            return study_fail(why);
        }
        st->use[k] = 0;
    }
    return 0;
}

/* Take the study's own options out of argv (the rest goes to ladle-train's
 * parser): 0, or 2 with the reason printed. */
static int study_options(int argc, char **argv, study *st, char **rest, int *nrest)
{
    char why[CLI_WHY];
    int64_t v[MAX_SIZES];
    int n = 0, given_modes = 0;
    study_own_defaults(st);
    *nrest = 0;
    for (int i = 0; i < argc; i++) {
        const char *a = argv[i];
        int ours = !strcmp(a, "--per-rank") || !strcmp(a, "--modes") ||
                   !strcmp(a, "--seeds") || !strcmp(a, "--samples") ||
                   !strcmp(a, "--lr-batch") || !strcmp(a, "--csv") || !strcmp(a, "--svg");
        if (!ours) {
            rest[(*nrest)++] = argv[i];
            continue;
        }
        if (i + 1 >= argc || argv[i + 1][0] == '\0') {
            snprintf(why, sizeof why, "%s needs a value", a);
            return study_fail(why);
        }
        const char *val = argv[++i];
        int bad_value = 0;
        if (!strcmp(a, "--per-rank")) {
            bad_value = cli_ints(a, val, 1, BATCH_MAX, v, MAX_SIZES, &n, why);
            if (!bad_value) {
                memcpy(st->per_rank, v, sizeof(int64_t) * (size_t)n);
                st->nsizes = n;
            }
        } else if (!strcmp(a, "--modes")) {
            given_modes = 1;
            bad_value = parse_modes(val, st, why);
        } else if (!strcmp(a, "--seeds"))
            bad_value = cli_int32(a, val, 1, MAX_SEEDS, &st->seeds, why);
        else if (!strcmp(a, "--samples"))
            bad_value = cli_int(a, val, 1, SAMPLES_MAX, &st->samples, why);
        else if (!strcmp(a, "--lr-batch"))
            bad_value = cli_int(a, val, 1, BATCH_MAX, &st->lr_batch, why);
        else if (!strcmp(a, "--csv"))
            st->csv = val;
        else
            st->svg = val;
        if (bad_value)
            return study_fail(why);
    }
    return check_groups(st, given_modes);
}

/* ---- the CSV ------------------------------------------------------------- */

static const char csv_header[] = "ranks,per_rank,mode,seed,accuracy,ms_per_step,last_loss,model,"
                                 "samples,epochs,oversubscribed\n";

/* Append rows (rank 0): 0, or 1 with the reason printed. */
static int csv_append(const char *path, const row *rows, int n, const opts *o, int64_t samples,
                      int over)
{
    char why[CLI_WHY];
    FILE *f = cli_fopen("ladle-bn-study", path, "a+");
    if (f == NULL)
        return 1;
    fseek(f, 0, SEEK_END);
    if (ftell(f) == 0)
        fputs(csv_header, f);
    for (int i = 0; i < n; i++)
        fprintf(f, "%d,%lld,%s,%llu,%.6f,%.4f,%.6f,%s,%lld,%d,%d\n", rows[i].ranks,
                (long long)rows[i].per_rank, mode_names[rows[i].mode],
                (unsigned long long)rows[i].seed, rows[i].acc, rows[i].ms, rows[i].loss,
                model_names[o->model], (long long)samples, o->epochs, over);
    if (cli_close_ok(f, path, why)) {
        fprintf(stderr, "ladle-bn-study: %s\n", why);
        return 1;
    }
    return 0;
}

/* Read every row of a CSV this tool wrote (rank 0): the number read into
 * *rows (malloc'd), or -1 with the reason printed. Lines that do not parse
 * are refused with their number: a chart of half a file would mislead. */
static int csv_read(const char *path, row **rows)
{
    FILE *f = fopen(path, "r");
    char line[512];
    int n = 0, cap = 0, at = 0;
    *rows = NULL;
    if (f == NULL) {
        fprintf(stderr, "ladle-bn-study: cannot read %s: %s\n", path, strerror(errno));
        return -1;
    }
    while (fgets(line, sizeof line, f)) {
        at++;
        if (at == 1 && strcmp(line, csv_header) == 0)
            continue;
        row r = {0};
        char name[16];
        long long pr = 0;
        unsigned long long seed = 0;
        int k = 0;
        if (sscanf(line, "%d,%lld,%15[^,],%llu,%lf,%lf,%lf", &r.ranks, &pr, name, &seed, &r.acc,
                   &r.ms, &r.loss) != 7 ||
            r.ranks < 1 || pr < 1 || !(r.acc >= 0 && r.acc <= 1) || !(r.ms >= 0)) {
            fprintf(stderr, "ladle-bn-study: %s, line %d: not a row of this tool's\n", path, at);
            goto fail;
        }
        while (k < N_MODES && strcmp(name, mode_names[k]) != 0)
            k++;
        if (k == N_MODES) {
            fprintf(stderr, "ladle-bn-study: %s, line %d: unknown mode '%s'\n", path, at, name);
            goto fail;
        }
        r.mode = k;
        r.per_rank = pr;
        r.seed = seed;
        if (n == cap) {
            cap = cap ? 2 * cap : 64;
            row *grown = realloc(*rows, sizeof *grown * (size_t)cap);
            if (grown == NULL) {
                fprintf(stderr, "ladle-bn-study: out of memory reading %s\n", path);
                goto fail;
            }
            *rows = grown;
        }
        (*rows)[n++] = r;
    }
    fclose(f);
    return n;
fail:
    fclose(f);
    free(*rows);
    *rows = NULL;
    return -1;
}

/* ---- statistics of a point ------------------------------------------------ */

typedef struct summary {
    int ranks, mode, n;
    int64_t per_rank;
    double acc_mean, acc_sd, ms_median;
} summary;

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* Group rows by (ranks, per-rank batch, mode): mean and sample standard
 * deviation of the accuracy, median of the time per step. Returns the
 * number of points written to out (at most cap). */
static int summarise(const row *rows, int n, summary *out, int cap)
{
    int m = 0;
    double *buf = malloc(sizeof *buf * (size_t)(n > 0 ? n : 1));
    if (buf == NULL)
        return 0;
    for (int i = 0; i < n; i++) {
        int seen = 0;
        for (int j = 0; j < m && !seen; j++)
            seen = out[j].ranks == rows[i].ranks && out[j].per_rank == rows[i].per_rank &&
                   out[j].mode == rows[i].mode;
        if (seen || m == cap)
            continue;
        summary s = {rows[i].ranks, rows[i].mode, 0, rows[i].per_rank, 0, 0, 0};
        double sum = 0, sq = 0;
        for (int j = i; j < n; j++) {
            if (rows[j].ranks != s.ranks || rows[j].per_rank != s.per_rank ||
                rows[j].mode != s.mode)
                continue;
            buf[s.n++] = rows[j].ms;
            sum += rows[j].acc;
        }
        s.acc_mean = sum / s.n;
        for (int j = i; j < n; j++)
            if (rows[j].ranks == s.ranks && rows[j].per_rank == s.per_rank &&
                rows[j].mode == s.mode)
                sq += (rows[j].acc - s.acc_mean) * (rows[j].acc - s.acc_mean);
        s.acc_sd = s.n > 1 ? sqrt(sq / (s.n - 1)) : 0;
        qsort(buf, (size_t)s.n, sizeof *buf, cmp_double);
        s.ms_median = s.n % 2 ? buf[s.n / 2] : 0.5 * (buf[s.n / 2 - 1] + buf[s.n / 2]);
        out[m++] = s;
    }
    free(buf);
    return m;
}

/* The point of local statistics at the same ranks and batch, or NULL. */
static const summary *local_of(const summary *p, int n, const summary *s)
{
    for (int i = 0; i < n; i++)
        if (p[i].ranks == s->ranks && p[i].per_rank == s->per_rank && p[i].mode == 0)
            return &p[i];
    return NULL;
}

static void print_table(const summary *p, int n)
{
    printf("\n%5s %8s %-7s %5s %9s %7s %9s %12s\n", "ranks", "per-rank", "stats", "seeds",
           "accuracy", "spread", "ms/step", "reduction ms");
    for (int i = 0; i < n; i++) {
        const summary *loc = local_of(p, n, &p[i]);
        char red[32] = "-";
        if (p[i].mode != 0 && loc)
            snprintf(red, sizeof red, "%+.2f", p[i].ms_median - loc->ms_median);
        printf("%5d %8lld %-7s %5d %8.2f%% %6.2f%% %9.2f %12s\n", p[i].ranks,
               (long long)p[i].per_rank, mode_names[p[i].mode], p[i].n, 100 * p[i].acc_mean,
               100 * p[i].acc_sd, p[i].ms_median, red);
    }
    printf("(accuracy: mean over the seeds, spread: their standard deviation; ms/step: "
           "median over the seeds;\n reduction ms: this mode's step less local statistics' at "
           "the same ranks and batch)\n");
}

/* ---- the chart -------------------------------------------------------------- */

/* The chart's geometry: panels of PANEL_W x PANEL_H, GAP apart, below a
 * title of TOP and right of a margin LEFT; the axes' ranges, log10 ms in
 * x0 .. x1 and accuracy in y0 .. y1. */
enum { PANEL_W = 300, PANEL_H = 260, LEFT = 60, TOP = 75, GAP = 40 };
typedef struct chart_axes {
    double x0, x1, y0, y1;
} chart_axes;

/* x of ms in the panel at px; y of an accuracy */
static int chart_x(const chart_axes *ax, int px, double ms)
{
    return px + (int)(PANEL_W * (log10(ms > 1e-3 ? ms : 1e-3) - ax->x0) / (ax->x1 - ax->x0));
}

static int chart_y(const chart_axes *ax, double acc)
{
    return TOP + PANEL_H - (int)(PANEL_H * (acc - ax->y0) / (ax->y1 - ax->y0));
}

/* The rank counts of the points, ascending, at most 8: their number. */
static int chart_ranks(const summary *p, int n, int ranks[8])
{
    int nr = 0;
    for (int i = 0; i < n; i++) {
        int seen = 0;
        for (int k = 0; k < nr; k++)
            seen |= ranks[k] == p[i].ranks;
        if (!seen && nr < 8)
            ranks[nr++] = p[i].ranks;
    }
    for (int a = 0; a < nr; a++) /* ascending */
        for (int b = a + 1; b < nr; b++)
            if (ranks[b] < ranks[a]) {
                int t = ranks[a];
                ranks[a] = ranks[b];
                ranks[b] = t;
            }
    return nr;
}

/* The axes: decades of ms around the data; accuracy in steps of 5%. */
static chart_axes chart_axes_of(const summary *p, int n)
{
    double lo_ms = INFINITY, hi_ms = 0, lo_acc = 1, hi_acc = 0;
    for (int i = 0; i < n; i++) {
        double ms = p[i].ms_median > 1e-3 ? p[i].ms_median : 1e-3;
        lo_ms = ms < lo_ms ? ms : lo_ms;
        hi_ms = ms > hi_ms ? ms : hi_ms;
        double a0 = p[i].acc_mean - p[i].acc_sd, a1 = p[i].acc_mean + p[i].acc_sd;
        lo_acc = a0 < lo_acc ? a0 : lo_acc;
        hi_acc = a1 > hi_acc ? a1 : hi_acc;
    }
    if (n == 0)
        lo_ms = 1, hi_ms = 10, lo_acc = 0, hi_acc = 1;
    chart_axes ax = {floor(log10(lo_ms)), ceil(log10(hi_ms)), floor(lo_acc * 20) / 20,
                     ceil(hi_acc * 20) / 20};
    if (ax.x1 <= ax.x0)
        ax.x1 = ax.x0 + 1;
    if (ax.y1 <= ax.y0)
        ax.y1 = ax.y0 + 0.05;
    return ax;
}

/* The SVG's start, background and the titles. */
static void chart_title(FILE *f, int W, int H, const opts *o, int64_t samples)
{
    fprintf(f,
            "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%d\" height=\"%d\" "
            "font-family=\"sans-serif\" font-size=\"11\">\n"
            "<rect width=\"%d\" height=\"%d\" fill=\"white\"/>\n",
            W, H, W, H);
    fprintf(f,
            "<text x=\"%d\" y=\"20\" font-size=\"14\">%s, data parallel: test accuracy "
            "against time per step</text>\n"
            "<text x=\"%d\" y=\"38\">batch-norm statistics per rank (local), per group of 2 "
            "or 4 ranks, over all ranks (global)</text>\n",
            LEFT, model_titles[o->model], LEFT);
    if (samples)
        fprintf(f, "<text x=\"%d\" y=\"54\">%d epoch%s of %lld samples per run; labels: "
                   "samples per rank; bars: one standard deviation over the seeds</text>\n",
                LEFT, o->epochs, o->epochs > 1 ? "s" : "", (long long)samples);
    else
        fprintf(f, "<text x=\"%d\" y=\"54\">%d epoch%s per run; labels: samples per rank; "
                   "bars: one standard deviation over the seeds</text>\n",
                LEFT, o->epochs, o->epochs > 1 ? "s" : "");
}

/* A panel's frame, its title, and the grid with the axes' labels (the
 * accuracies left of the first panel only). */
static void chart_frame(FILE *f, const chart_axes *ax, int px, int ranks, int first)
{
    fprintf(f,
            "<rect x=\"%d\" y=\"%d\" width=\"%d\" height=\"%d\" fill=\"none\" "
            "stroke=\"black\"/>\n",
            px, TOP, PANEL_W, PANEL_H);
    fprintf(f, "<text x=\"%d\" y=\"%d\" text-anchor=\"middle\" font-size=\"13\">%d "
               "ranks</text>\n",
            px + PANEL_W / 2, TOP - 4, ranks);
    for (double d = ax->x0; d <= ax->x1 + 1e-9; d += 1) {
        double ms = pow(10, d);
        fprintf(f, "<line x1=\"%d\" y1=\"%d\" x2=\"%d\" y2=\"%d\" stroke=\"#ddd\"/>\n",
                chart_x(ax, px, ms), TOP, chart_x(ax, px, ms), TOP + PANEL_H);
        fprintf(f, "<text x=\"%d\" y=\"%d\" text-anchor=\"middle\">%g</text>\n",
                chart_x(ax, px, ms), TOP + PANEL_H + 14, ms);
    }
    for (double acc = ax->y0; acc <= ax->y1 + 1e-9; acc += 0.05) {
        fprintf(f, "<line x1=\"%d\" y1=\"%d\" x2=\"%d\" y2=\"%d\" stroke=\"#ddd\"/>\n", px,
                chart_y(ax, acc), px + PANEL_W, chart_y(ax, acc));
        if (first)
            fprintf(f, "<text x=\"%d\" y=\"%d\" text-anchor=\"end\">%.0f%%</text>\n", px - 4,
                    chart_y(ax, acc) + 4, 100 * acc);
    }
    fprintf(f, "<text x=\"%d\" y=\"%d\" text-anchor=\"middle\">ms per step (log)</text>\n",
            px + PANEL_W / 2, TOP + PANEL_H + 30);
}

/* Mode k's points at this rank count in the panel at px: a line through
 * them in order of batch, each with its error bar and its label. */
static void chart_mode(FILE *f, const chart_axes *ax, int px, const summary *p, int n,
                       int ranks, int k)
{
    const summary *pts[MAX_SIZES * 4];
    int m = 0;
    for (int i = 0; i < n && m < MAX_SIZES * 4; i++)
        if (p[i].ranks == ranks && p[i].mode == k)
            pts[m++] = &p[i];
    for (int u = 0; u < m; u++)
        for (int v = u + 1; v < m; v++)
            if (pts[v]->per_rank < pts[u]->per_rank) {
                const summary *t = pts[u];
                pts[u] = pts[v];
                pts[v] = t;
            }
    if (m > 1) {
        fprintf(f, "<polyline fill=\"none\" stroke=\"%s\" stroke-width=\"1.5\" points=\"",
                mode_colors[k]);
        for (int u = 0; u < m; u++)
            fprintf(f, "%d,%d ", chart_x(ax, px, pts[u]->ms_median),
                    chart_y(ax, pts[u]->acc_mean));
        fprintf(f, "\"/>\n");
    }
    for (int u = 0; u < m; u++) {
        int cx = chart_x(ax, px, pts[u]->ms_median), cy = chart_y(ax, pts[u]->acc_mean);
        fprintf(f,
                "<line x1=\"%d\" y1=\"%d\" x2=\"%d\" y2=\"%d\" stroke=\"%s\"/>\n"
                "<circle cx=\"%d\" cy=\"%d\" r=\"3.5\" fill=\"%s\"/>\n"
                "<text x=\"%d\" y=\"%d\" fill=\"%s\" font-size=\"9\">%lld</text>\n",
                cx, chart_y(ax, pts[u]->acc_mean - pts[u]->acc_sd), cx,
                chart_y(ax, pts[u]->acc_mean + pts[u]->acc_sd), mode_colors[k], cx, cy,
                mode_colors[k], cx + 5, cy - 4, mode_colors[k], (long long)pts[u]->per_rank);
    }
}

/* Accuracy (y) against time per step (x, log scale), one panel per rank
 * count, a line per mode through its per-rank batches (labelled), error
 * bars of one standard deviation. Rank 0: 0, or 1 with the reason printed. */
static int chart(const char *path, const summary *p, int n, const opts *o, int64_t samples)
{
    char why[CLI_WHY];
    int ranks[8], nr = chart_ranks(p, n, ranks);
    chart_axes ax = chart_axes_of(p, n);
    int W = LEFT + (nr > 0 ? nr : 1) * (PANEL_W + GAP) + 20, H = TOP + PANEL_H + 90;
    if (W < 620) /* room for the titles and the legend */
        W = 620;
    FILE *f = cli_fopen("ladle-bn-study", path, "w");
    if (f == NULL)
        return 1;
    chart_title(f, W, H, o, samples);
    for (int a = 0; a < nr; a++) {
        int px = LEFT + a * (PANEL_W + GAP);
        chart_frame(f, &ax, px, ranks[a], a == 0);
        for (int k = 0; k < N_MODES; k++)
            chart_mode(f, &ax, px, p, n, ranks[a], k);
    }
    for (int k = 0; k < N_MODES; k++) {
        int lx = LEFT + k * 120, ly = H - 22;
        fprintf(f,
                "<rect x=\"%d\" y=\"%d\" width=\"12\" height=\"12\" fill=\"%s\"/>"
                "<text x=\"%d\" y=\"%d\">%s</text>\n",
                lx, ly - 10, mode_colors[k], lx + 16, ly, mode_names[k]);
    }
    fprintf(f, "</svg>\n");
    if (cli_close_ok(f, path, why)) {
        fprintf(stderr, "ladle-bn-study: %s\n", why);
        return 1;
    }
    return 0;
}

/* ---- the study ---------------------------------------------------------------- */

/* Whether this node holds more ranks than cores: its times then measure the
 * scheduler as much as the work, and the table says so. */
static int oversubscribed(void)
{
    MPI_Comm node;
    int here = 1, over = 0;
    long cores = sysconf(_SC_NPROCESSORS_ONLN);
    if (MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &node) ==
        MPI_SUCCESS) {
        MPI_Comm_size(node, &here);
        MPI_Comm_free(&node);
    }
    over = cores > 0 && here > cores;
    MPI_Allreduce(MPI_IN_PLACE, &over, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
    return over;
}

/* What the options may not ask of the study, and whether --csv is one of
 * ours (refused now, not after the runs): 0, or 2 with the reason printed;
 * the same on every rank. */
static int check_study(const opts *o, const study *sd)
{
    int rc = 0;
    if (world < 2)
        rc = study_fail("the statistics' reach needs 2 or more ranks to differ");
    if (rc == 0 && given(o, "--batch"))
        rc = study_fail("--batch: the study's batches are --per-rank sizes times the ranks");
    for (int i = 0; rc == 0 && i < sd->nsizes; i++)
        if (sd->per_rank[i] > BATCH_MAX / world) {
            char why[CLI_WHY];
            snprintf(why, sizeof why, "--per-rank %lld over %d ranks makes a batch beyond %lld",
                     (long long)sd->per_rank[i], world, (long long)BATCH_MAX);
            rc = study_fail(why);
        }
    const char *out_opt[2] = {"--csv", "--svg"}, *out_path[2] = {sd->csv, sd->svg};
    if (rc == 0 && tool_outputs_ok(tool, 2, out_opt, out_path))
        rc = 2;
    if (rc == 0 && sd->csv && me == 0) {
        row *all = NULL;
        FILE *f = fopen(sd->csv, "r");
        int empty = f == NULL || fgetc(f) == EOF;
        if (f)
            fclose(f);
        if (!empty && csv_read(sd->csv, &all) < 0)
            rc = 2;
        free(all);
    }
    MPI_Bcast(&rc, 1, MPI_INT, 0, MPI_COMM_WORLD);
    return rc;
}

/* The study's network and training, where the options leave them. */
static void study_defaults(opts *o)
{
    if (!given(o, "--model"))
        o->model = MODEL_RESNET8;
    if (!given(o, "--epochs"))
        o->epochs = 1;
    if (!given(o, "--lr")) /* SGD's 0.1 at batch 128, as for ResNets */
        o->lr = 0.1;
    o->bn = 1;
    o->D = world;
    o->Ph = o->Pw = o->F = o->C = 1;
}

/* The line saying what the study runs (rank 0). */
static void announce_study(const opts *o, const study *sd, int over)
{
    if (me != 0)
        return;
    printf("%s, %d ranks data parallel%s; per-rank batches", model_titles[o->model], world,
           over ? " (oversubscribed: the times measure sharing the cores)" : "");
    for (int i = 0; i < sd->nsizes; i++)
        printf("%s%lld", i ? "," : " ", (long long)sd->per_rank[i]);
    printf("; statistics");
    for (int k = 0; k < N_MODES; k++)
        if (sd->use[k])
            printf(" %s", mode_names[k]);
    printf("; %d seed%s from %llu\n", sd->seeds, sd->seeds > 1 ? "s" : "",
           (unsigned long long)o->seed);
    fflush(stdout);
}

/* The run of per-rank batch i, seed s (counted from --seed) and mode k:
 * its row in *out; 0, or the exit status. */
static int run_point(const opts *o, const study *sd, int i, int s, int k, data_cache *keep,
                     row *out)
{
    opts r = *o;
    run_result res = {0, 0, 0};
    r.batch = sd->per_rank[i] * world;
    r.seed = o->seed + (uint64_t)s;
    r.lr = o->lr * (double)r.batch / (double)sd->lr_batch;
    r.bn_sync = modes[k].sync;
    r.bn_group = modes[k].group > 1 ? modes[k].group : 2;
    if (sd->samples) {
        int64_t steps = sd->samples / r.batch;
        r.steps = (int)(steps < 1 ? 1 : steps > INT_MAX ? INT_MAX : steps);
        if (o->steps && o->steps < r.steps)
            r.steps = o->steps;
    }
    if (me == 0 && !o->quiet) {
        printf("== per-rank batch %lld (batch %lld, lr %g), seed %llu, "
               "statistics %s\n",
               (long long)sd->per_rank[i], (long long)r.batch, r.lr,
               (unsigned long long)r.seed, mode_names[k]);
        fflush(stdout);
    }
    r.quiet = 1;
    r.silent = o->quiet;
    int rc = train_run(&r, &res, keep);
    *out = (row){world, k, sd->per_rank[i], r.seed, res.accuracy, res.ms_per_step,
                 res.last_loss};
    if (rc == 0 && me == 0 && !o->quiet) {
        printf("   test accuracy %.2f%%, %.2f ms per step\n", 100 * res.accuracy,
               res.ms_per_step);
        fflush(stdout);
    }
    return rc;
}

/* The table of this study's n runs, the CSV, and the chart (of every run
 * in the CSV: the rank counts of the earlier studies next to this one's).
 * Rank 0: 0, or 1 with the reason printed. */
static int report_study(const opts *o, const study *sd, const row *rows, int n, int over)
{
    row *all = NULL;
    int npts = 0, nall = n;
    summary *pts = calloc((size_t)n + 1, sizeof *pts);
    int rc = pts == NULL;
    if (rc == 0) {
        npts = summarise(rows, n, pts, n);
        print_table(pts, npts);
    }
    if (rc == 0 && sd->csv)
        rc = csv_append(sd->csv, rows, n, o, sd->samples, over);
    if (rc == 0 && sd->svg) {
        if (sd->csv) {
            nall = csv_read(sd->csv, &all);
            rc = nall < 0;
            if (rc == 0) {
                free(pts);
                pts = calloc((size_t)nall + 1, sizeof *pts);
                rc = pts == NULL;
            }
            if (rc == 0)
                npts = summarise(all, nall, pts, nall);
        }
        if (rc == 0)
            rc = chart(sd->svg, pts, npts, o, sd->samples);
        if (rc == 0)
            printf("chart: %s\n", sd->svg);
    }
    free(all);
    free(pts);
    return rc;
}

/* parse and check, announce, run every point, report */
int main(int argc, char **argv)
{
    opts o;
    study sd = {0};
    char **args = NULL;
    int nargs = 0, rc = 0;
    row *rows = NULL;
    data_cache keep = {0};
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &me);
    MPI_Comm_size(MPI_COMM_WORLD, &world);
    tool = "ladle-bn-study";
    args = calloc((size_t)argc + 1, sizeof *args);
    if (args == NULL)
        rc = 1;
    if (rc == 0)
        rc = study_options(argc, argv, &sd, args, &nargs);
    if (rc == 0)
        rc = parse(nargs, args, &o, M_STUDY, "ladle-bn-study", study_usage);
    if (rc == 0)
        rc = check_study(&o, &sd);
    else
        MPI_Bcast(&rc, 1, MPI_INT, 0, MPI_COMM_WORLD);
    if (rc != 0) {
        free(args);
        return tool_exit(rc < 0 ? 0 : rc);
    }
    ladle_set_num_threads(1);
    study_defaults(&o);
    int over = oversubscribed();
    int nmodes = 0;
    for (int k = 0; k < N_MODES; k++)
        nmodes += sd.use[k];
    int nrows = sd.nsizes * nmodes * sd.seeds;
    rows = calloc((size_t)nrows, sizeof *rows);
    if (rows == NULL) {
        rc = 1;
        goto out;
    }
    announce_study(&o, &sd, over);
    /* seeds inside the batch and modes inside the seeds: the runs that are
     * compared run minutes apart at most */
    int at = 0;
    for (int i = 0; i < sd.nsizes && rc == 0; i++)
        for (int s = 0; s < sd.seeds && rc == 0; s++)
            for (int k = 0; k < N_MODES && rc == 0; k++)
                if (sd.use[k])
                    rc = run_point(&o, &sd, i, s, k, &keep, &rows[at++]);
    if (rc == 0 && me == 0)
        rc = report_study(&o, &sd, rows, at, over);
out:
    MPI_Bcast(&rc, 1, MPI_INT, 0, MPI_COMM_WORLD);
    ladle_dataset_destroy(&keep.train);
    ladle_dataset_destroy(&keep.test);
    free(rows);
    free(args);
    return tool_exit(rc);
}
