/*
 * ladle-pipe: generate, load, validate and simulate pipeline schedules.
 *
 *   ladle-pipe --schedule 1f1b --stages 4 --microbatches 8
 *   ladle-pipe --schedule hybrid --replicas 1,3 --microbatches 12 --f 1,3 --b 2,6
 *   ladle-pipe --load my.sched --svg my.svg --trace my.json
 *
 * Prints the validator's verdict (with the worker x step grid when the
 * schedule is invalid), then the simulated makespan, bubble and peak stash.
 * No MPI needed: it runs as a plain program. Output paths are checked
 * before any work; exit status 0 valid, 1 invalid, 2 bad options or I/O.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "ladle.h"

#define MAXS LADLE_PIPE_MAX_STAGES

/* The help text, its lines as they print. */
/* clang-format off */
static void usage(FILE *out)
{
    fprintf(out,
            "usage: ladle-pipe [--schedule gpipe|1f1b|interleaved|zbh1|hybrid|zbv] [--stages S]\n"
            "                  [--microbatches M] [--chunks V] [--replicas R0,R1,...]\n"
            "                  [--f T0,T1,...] [--b ...] [--w ...] [--send ...] [--reduce ...]\n"
            "                  [--recv ...] [--param ...]\n"
            "                  [--load FILE] [--print] [--svg FILE] [--trace FILE]\n"
            "\n"
            "Generates a schedule (or loads one: one line of actions per worker, such as\n"
            "'0F0 0F1 0B0 0W0 ...'), validates it and simulates it under per-stage costs\n"
            "(forward f, backward-input b, backward-weight w, transfer send, replica\n"
            "reduction reduce; a single value applies to every stage; default 1, 1, 1, 0, 0).\n"
            "--recv: a receiving worker's own time for a message across each boundary\n"
            "once it has arrived; --param: each stage's parameter memory, added to the\n"
            "peak memory of its workers (both default 0).\n"
            "zbv takes an even S: two stages in a V on each of S/2 workers.\n"
            "--print writes the schedule in the text form; --svg the simulated timeline;\n"
            "--trace the same as Chrome-trace JSON. --help, --version.\n"
            "Exit status: 0 valid and simulated, 1 invalid, 2 bad options, files or costs.\n");
}
/* clang-format on */

/* The per-stage value options (cost_name). */
#define NCOSTS 7
/* The microbatches a generated schedule may have. */
#define MAX_MICROBATCHES 4096

typedef struct pipe_opts {
    const char *style, *load, *svg, *trace;
    const char *cost_arg[NCOSTS];
    int S, m, v, print, nrep, rep[MAXS];
    int given_gen; /* an option of generation was given (refused with --load) */
    const char *gen_opt;
} pipe_opts;

/* the per-stage values: ladle_pipe_costs's, then ladle_pipe_sim_desc's */
static const char *cost_name[NCOSTS] = {"--f",      "--b",    "--w",    "--send",
                                        "--reduce", "--recv", "--param"};

static int fail(const char *why)
{
    fprintf(stderr, "ladle-pipe: %s (see --help)\n", why);
    return 2;
}

/* One option with its value; 0, or -1 with why set. */
static int take(const char *a, const char *val, pipe_opts *o, char *why)
{
    int64_t r[MAXS];
    if (!strcmp(a, "--schedule"))
        o->style = val;
    else if (!strcmp(a, "--stages"))
        return cli_int32(a, val, 1, MAXS, &o->S, why);
    else if (!strcmp(a, "--microbatches"))
        return cli_int32(a, val, 1, MAX_MICROBATCHES, &o->m, why);
    else if (!strcmp(a, "--chunks"))
        return cli_int32(a, val, 1, 8, &o->v, why);
    else if (!strcmp(a, "--load"))
        o->load = val;
    else if (!strcmp(a, "--svg"))
        o->svg = val;
    else if (!strcmp(a, "--trace"))
        o->trace = val;
    else if (!strcmp(a, "--replicas")) {
        if (cli_ints(a, val, 1, 1024, r, MAXS, &o->nrep, why))
            return -1;
        for (int j = 0; j < o->nrep; j++)
            o->rep[j] = (int)r[j];
    } else {
        int k = 0;
        while (k < NCOSTS && strcmp(a, cost_name[k]))
            k++;
        if (k == NCOSTS)
            return cli_fail(why, "unknown option '%s'", a);
        o->cost_arg[k] = val;
    }
    return 0;
}

/* The per-stage costs of option k: one value for every stage, or one per
 * stage; each finite and >= 0. Unset: NULL. */
static int costs_of(const pipe_opts *o, int S, double c[NCOSTS][MAXS],
                    ladle_pipe_costs *costs, ladle_pipe_sim_desc *so, char *why)
{
    const double **slot[NCOSTS] = {&costs->f,      &costs->b, &costs->w, &costs->send,
                                   &costs->reduce, &so->recv, &so->param};
    memset(costs, 0, sizeof *costs);
    ladle_pipe_sim_desc_init(so);
    for (int k = 0; k < NCOSTS; k++) {
        int n = 0;
        if (o->cost_arg[k] == NULL)
            continue;
        if (cli_reals(cost_name[k], o->cost_arg[k], 0, HUGE_VAL, CLI_OPEN_HI, c[k], MAXS, &n,
                      why))
            return -1;
        if (n != 1 && n != S)
            return cli_fail(why, "%s '%s' gives %d values for %d stages (give 1 or %d)",
                            cost_name[k], o->cost_arg[k], n, S, S);
        for (int j = n; j < S; j++)
            c[k][j] = c[k][0];
        *slot[k] = c[k];
    }
    return 0;
}

/* The options taken together: the schedule's options only without
 * --load, a known schedule, --replicas and --chunks with their schedule,
 * and outputs that can be written. 0, or 2 with the reason printed. */
static int check_options(pipe_opts *o, int given_stages, int given_chunks)
{
    char why[CLI_WHY];
    if (o->load && o->gen_opt) {
        snprintf(why, sizeof why, "%s does not apply to --load (the file says it)", o->gen_opt);
        return fail(why);
    }
    ladle_pipe_style style = LADLE_PIPE_GPIPE;
    int known = ladle_pipe_style_parse(o->style, &style) == LADLE_OK;
    int kind = known ? (int)style : -1;
    if (!o->load && !known) {
        snprintf(why, sizeof why, "--schedule: '%s' is not one of gpipe, 1f1b, interleaved, "
                 "zbh1, hybrid, zbv", o->style);
        return fail(why);
    }
    if (o->nrep > 0 && kind != LADLE_PIPE_HYBRID)
        return fail("--replicas needs --schedule hybrid");
    if (o->nrep > 0 && given_stages && o->S != o->nrep)
        return fail("--stages and --replicas disagree on the number of stages");
    if (given_chunks && kind != LADLE_PIPE_INTERLEAVED)
        return fail("--chunks needs --schedule interleaved");
    if (o->nrep > 0)
        o->S = o->nrep;
    const char *out_opt[2] = {"--svg", "--trace"}, *out_path[2] = {o->svg, o->trace};
    for (int k = 0; k < 2; k++)
        if (out_path[k] && cli_output_ok(out_opt[k], out_path[k], why)) {
            fprintf(stderr, "ladle-pipe: %s\n", why);
            return 2;
        }
    return 0;
}

/* The options into o: 0, -1 after --help or --version, or 2 with the
 * reason printed. */
static int parse(int argc, char **argv, pipe_opts *o)
{
    static const char *const gen[] = {"--schedule", "--stages", "--microbatches", "--chunks",
                                      "--replicas", NULL};
    char why[CLI_WHY];
    memset(o, 0, sizeof *o);
    o->style = "1f1b";
    o->S = 4, o->m = 8, o->v = 1;
    int given_stages = 0, given_chunks = 0;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
            usage(stdout);
            return -1;
        } else if (!strcmp(a, "--version")) {
            cli_version("ladle-pipe");
            return -1;
        } else if (!strcmp(a, "--print")) {
            o->print = 1;
            continue;
        }
        if (a[0] != '-') {
            snprintf(why, sizeof why, "unexpected argument '%s'", a);
            return fail(why);
        }
        if (i + 1 >= argc) {
            if (take(a, "", o, why) && strncmp(why, "unknown", 7) == 0)
                return fail(why);
            snprintf(why, sizeof why, "%s needs a value", a);
            return fail(why);
        }
        for (int k = 0; gen[k]; k++)
            if (!strcmp(a, gen[k]) && o->gen_opt == NULL)
                o->gen_opt = gen[k];
        given_stages |= !strcmp(a, "--stages");
        given_chunks |= !strcmp(a, "--chunks");
        if (take(a, argv[++i], o, why))
            return fail(why);
    }
    return check_options(o, given_stages, given_chunks);
}

/* Write the picture or the trace: 0, or 2 with the reason printed. */
static int write_out(const char *path, const char *title, int W, const ladle_pipe_sim *sim,
                     int svg)
{
    char why[CLI_WHY];
    FILE *f = cli_fopen("ladle-pipe", path, "w");
    if (f == NULL)
        return 2;
    ladle_status st = svg ? ladle_pipe_write_svg(f, title, W, sim->nevents, sim->events)
                          : ladle_pipe_write_trace(f, W, sim->nevents, sim->events, 1.0);
    if (cli_close_ok(f, path, why) || st != LADLE_OK) {
        fprintf(stderr, "ladle-pipe: %s\n", st != LADLE_OK ? ladle_error_message() : why);
        return 2;
    }
    return 0;
}

/* The schedule: loaded from --load, or generated from the options with
 * the costs in c. 0, or 2 with the reason printed. */
static int make_schedule(const pipe_opts *o, double c[NCOSTS][MAXS], ladle_pipe_costs *costs,
                         ladle_pipe_sim_desc *so, ladle_pipe_schedule **s)
{
    char why[CLI_WHY];
    ladle_status st;
    if (o->load) {
        st = ladle_pipe_schedule_load(o->load, s);
    } else {
        if (costs_of(o, o->S, c, costs, so, why))
            return fail(why);
        ladle_pipe_style style = LADLE_PIPE_GPIPE;
        st = ladle_pipe_style_parse(o->style, &style);
        if (st == LADLE_OK)
            st = ladle_pipe_schedule_generate(style, o->S, o->nrep ? o->rep : NULL,
                                              style == LADLE_PIPE_ZBV ? 2 : o->v, o->m, costs,
                                              s);
    }
    if (st != LADLE_OK) {
        fprintf(stderr, "ladle-pipe: %s\n", ladle_error_message());
        return 2;
    }
    return 0;
}

/* Simulate the valid schedule s under the costs of the options: its
 * figures, and the picture and trace asked for. 0, or 2 with the reason
 * printed. */
static int simulate(const pipe_opts *o, const ladle_pipe_schedule *s, double c[NCOSTS][MAXS])
{
    char why[CLI_WHY];
    int rc = 0, S = ladle_pipe_schedule_stages(s), W = ladle_pipe_schedule_workers(s);
    ladle_pipe_sim_desc so;
    ladle_pipe_costs costs;
    ladle_pipe_sim sim;
    if (costs_of(o, S, c, &costs, &so, why)) {
        fprintf(stderr, "ladle-pipe: %s\n", why);
        return 2;
    }
    if (ladle_pipe_simulate(s, &costs, &so, &sim) != LADLE_OK) {
        fprintf(stderr, "ladle-pipe: %s\n", ladle_error_message());
        return 2;
    }
    printf("workers %d  stages %d  microbatches %d\n", W, S,
           ladle_pipe_schedule_microbatches(s));
    printf("makespan %.4g  bubble %.4f  peak %s %g (worker:", sim.makespan, sim.bubble,
           so.param ? "memory" : "stash", sim.peak_memory_max);
    for (int w = 0; w < W; w++)
        printf(" %g", sim.peak_memory[w]);
    printf(")\n");
    char title[160];
    snprintf(title, sizeof title, "%s, %d workers, %d microbatches: bubble %.1f%%",
             o->load ? o->load : o->style, W, ladle_pipe_schedule_microbatches(s),
             100 * sim.bubble);
    if (o->svg)
        rc = write_out(o->svg, title, W, &sim, 1);
    if (o->trace && rc == 0)
        rc = write_out(o->trace, title, W, &sim, 0);
    ladle_pipe_sim_destroy(&sim);
    return rc;
}

int main(int argc, char **argv)
{
    pipe_opts o;
    int rc = parse(argc, argv, &o);
    if (rc != 0)
        return rc < 0 ? 0 : rc;
    ladle_pipe_schedule *s = NULL;
    double c[NCOSTS][MAXS];
    ladle_pipe_sim_desc so;
    ladle_pipe_costs costs;
    if ((rc = make_schedule(&o, c, &costs, &so, &s)) != 0)
        return rc;
    if (o.print)
        ladle_pipe_schedule_write(s, stdout);
    ladle_pipe_report rep_out;
    if (ladle_pipe_schedule_validate(s, &rep_out) != LADLE_OK) {
        fprintf(stderr, "ladle-pipe: %s\n", ladle_error_message());
        ladle_pipe_schedule_destroy(&s);
        return 2;
    }
    printf("%s", rep_out.message);
    int ok = rep_out.ok;
    ladle_pipe_report_destroy(&rep_out);
    if (ok)
        rc = simulate(&o, s, c);
    ladle_pipe_schedule_destroy(&s);
    return rc ? rc : ok ? 0 : 1;
}
