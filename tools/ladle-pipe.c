/*
 * ladle-pipe: generate, load, validate and simulate pipeline schedules.
 *
 *   ladle-pipe --schedule 1f1b --stages 4 --microbatches 8
 *   ladle-pipe --schedule hybrid --replicas 1,3 --microbatches 12 --f 1,3 --b 2,6
 *   ladle-pipe --load my.sched --svg my.svg --trace my.json
 *
 * Prints the validator's verdict (with the worker x step grid when the
 * schedule is invalid), then the simulated makespan, bubble and peak stash.
 * No MPI needed: it runs as a plain program.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ladle.h"

#define MAXS LADLE_PIPE_MAX_STAGES

static void usage(FILE *out)
{
    fprintf(out,
            "usage: ladle-pipe [--schedule gpipe|1f1b|interleaved|zbh1|hybrid] [--stages S]\n"
            "                  [--microbatches M] [--chunks V] [--replicas R0,R1,...]\n"
            "                  [--f T0,T1,...] [--b ...] [--w ...] [--send ...] [--reduce ...]\n"
            "                  [--load FILE] [--print] [--svg FILE] [--trace FILE]\n"
            "\n"
            "Generates a schedule (or loads one: one line of actions per worker, such as\n"
            "'0F0 0F1 0B0 0W0 ...'), validates it and simulates it under per-stage costs\n"
            "(forward f, backward-input b, backward-weight w, transfer send, replica\n"
            "reduction reduce; a single value applies to every stage; default 1, 1, 1, 0, 0).\n"
            "--print writes the schedule in the text form; --svg the simulated timeline;\n"
            "--trace the same as Chrome-trace JSON. Exits 1 when the schedule is invalid.\n");
}

/* "a,b,c" into v (a single value fills all n). */
static int parse_doubles(const char *s, double *v, int n)
{
    int k = 0;
    const char *p = s;
    while (*p && k < MAXS) {
        char *end;
        v[k++] = strtod(p, &end);
        if (end == p)
            return -1;
        p = *end == ',' ? end + 1 : end;
        if (*end != ',' && *end != '\0')
            return -1;
    }
    for (int i = k; i < n && k == 1; i++)
        v[i] = v[0];
    return k == 1 || k >= n ? 0 : -1;
}

int main(int argc, char **argv)
{
    const char *style = "1f1b", *load = NULL, *svg = NULL, *trace = NULL;
    const char *cost_arg[5] = {NULL, NULL, NULL, NULL, NULL};
    static const char *cost_name[5] = {"--f", "--b", "--w", "--send", "--reduce"};
    int S = 4, m = 8, v = 1, print = 0, rep[MAXS], have_rep = 0;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *val = i + 1 < argc ? argv[i + 1] : NULL;
        int used = 1;
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
            usage(stdout);
            return 0;
        } else if (!strcmp(a, "--print")) {
            print = 1;
            used = 0;
        } else if (val == NULL) {
            fprintf(stderr, "ladle-pipe: %s needs a value\n", a);
            return 2;
        } else if (!strcmp(a, "--schedule")) {
            style = val;
        } else if (!strcmp(a, "--stages")) {
            S = atoi(val);
        } else if (!strcmp(a, "--microbatches")) {
            m = atoi(val);
        } else if (!strcmp(a, "--chunks")) {
            v = atoi(val);
        } else if (!strcmp(a, "--load")) {
            load = val;
        } else if (!strcmp(a, "--svg")) {
            svg = val;
        } else if (!strcmp(a, "--trace")) {
            trace = val;
        } else if (!strcmp(a, "--replicas")) {
            double d[MAXS];
            int n = 0;
            for (const char *p = val; *p; p++)
                n += *p == ',';
            n++;
            if (n > MAXS || parse_doubles(val, d, n) != 0) {
                fprintf(stderr, "ladle-pipe: bad --replicas '%s'\n", val);
                return 2;
            }
            for (int j = 0; j < n; j++)
                rep[j] = (int)d[j];
            S = n;
            have_rep = 1;
        } else {
            int k;
            for (k = 0; k < 5 && strcmp(a, cost_name[k]); k++)
                ;
            if (k == 5) {
                fprintf(stderr, "ladle-pipe: unknown option %s (see --help)\n", a);
                return 2;
            }
            cost_arg[k] = val;
        }
        i += used;
    }
    ladle_pipe_schedule *s = NULL;
    ladle_status st;
    if (load) {
        st = ladle_pipe_schedule_load(load, &s);
    } else {
        int kind = ladle_pipe_style_parse(style);
        if (kind < 0) {
            fprintf(stderr, "ladle-pipe: unknown schedule '%s'\n", style);
            return 2;
        }
        double c[5][MAXS];
        ladle_pipe_costs costs = {0};
        for (int k = 0; k < 5 && S <= MAXS; k++)
            if (cost_arg[k] && parse_doubles(cost_arg[k], c[k], S) != 0) {
                fprintf(stderr, "ladle-pipe: bad %s '%s'\n", cost_name[k], cost_arg[k]);
                return 2;
            }
        costs.f = cost_arg[0] ? c[0] : NULL;
        costs.b = cost_arg[1] ? c[1] : NULL;
        costs.w = cost_arg[2] ? c[2] : NULL;
        st = ladle_pipe_schedule_generate(kind, S, have_rep ? rep : NULL, v, m, &costs, &s);
    }
    if (st != LADLE_OK) {
        fprintf(stderr, "ladle-pipe: %s\n", ladle_error_message());
        return 2;
    }
    S = ladle_pipe_schedule_stages(s);
    int W = ladle_pipe_schedule_workers(s);
    if (print)
        ladle_pipe_schedule_write(s, stdout);
    ladle_pipe_report rep_out;
    if (ladle_pipe_schedule_validate(s, &rep_out) != LADLE_OK) {
        fprintf(stderr, "ladle-pipe: %s\n", ladle_error_message());
        return 2;
    }
    printf("%s", rep_out.message);
    int ok = rep_out.ok;
    ladle_pipe_report_free(&rep_out);
    if (!ok) {
        ladle_pipe_schedule_destroy(&s);
        return 1;
    }
    double c[5][MAXS];
    ladle_pipe_costs costs = {0};
    const double **slot[5] = {&costs.f, &costs.b, &costs.w, &costs.send, &costs.reduce};
    for (int k = 0; k < 5; k++)
        if (cost_arg[k]) {
            if (S > MAXS || parse_doubles(cost_arg[k], c[k], S) != 0) {
                fprintf(stderr, "ladle-pipe: bad %s '%s'\n", cost_name[k], cost_arg[k]);
                return 2;
            }
            *slot[k] = c[k];
        }
    ladle_pipe_sim sim;
    if (ladle_pipe_simulate(s, &costs, &sim) != LADLE_OK) {
        fprintf(stderr, "ladle-pipe: %s\n", ladle_error_message());
        return 2;
    }
    printf("workers %d  stages %d  microbatches %d\n", W, S, ladle_pipe_schedule_microbatches(s));
    printf("makespan %.4g  bubble %.4f  peak stash %g (worker:", sim.makespan, sim.bubble,
           sim.peak_memory_max);
    for (int w = 0; w < W; w++)
        printf(" %g", sim.peak_memory[w]);
    printf(")\n");
    int rc = 0;
    if (svg) {
        FILE *f = fopen(svg, "w");
        char title[160];
        snprintf(title, sizeof title, "%s, %d workers, %d microbatches: bubble %.1f%%",
                 load ? load : style, W, ladle_pipe_schedule_microbatches(s), 100 * sim.bubble);
        if (f == NULL || ladle_pipe_write_svg(f, title, W, sim.nevents, sim.events) != LADLE_OK)
            rc = 2;
        if (f)
            fclose(f);
    }
    if (trace) {
        FILE *f = fopen(trace, "w");
        if (f == NULL || ladle_pipe_write_trace(f, W, sim.nevents, sim.events, 1.0) != LADLE_OK)
            rc = 2;
        if (f)
            fclose(f);
    }
    if (rc)
        fprintf(stderr, "ladle-pipe: cannot write the picture or trace\n");
    ladle_pipe_sim_free(&sim);
    ladle_pipe_schedule_destroy(&s);
    return rc;
}
