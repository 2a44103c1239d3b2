/* The zero-bubble V schedule: valid for p = 1..6 workers and many
 * microbatch counts, refused when corrupted, its simulation against a case
 * timed by hand and against a lower bound any schedule must respect, and
 * its memory against 1F1B's and ZB-H1's in the same run. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"

static ladle_pipe_schedule *zbv(int p, int m)
{
    ladle_pipe_schedule *s = NULL;
    LT_OK(ladle_pipe_schedule_generate(LADLE_PIPE_ZBV, 2 * p, NULL, 2, m, NULL, &s));
    return s;
}

/* The V's placement, every list valid (no deadlock, messages matched), and
 * no worker stashing more than 2p chunk activations: p microbatches of a
 * whole stage, the peak of 1F1B's first stage; exactly that once m >= 2p. */
START_TEST(valid_and_stash)
{
    for (int p = 1; p <= 6; p++)
        for (int m = 1; m <= 20; m++) {
            ladle_pipe_schedule *s = zbv(p, m);
            LT_ASSERT(ladle_pipe_schedule_workers(s) == p, "p=%d: %d workers", p,
                      ladle_pipe_schedule_workers(s));
            for (int j = 0; j < 2 * p; j++)
                LT_ASSERT(ladle_pipe_schedule_worker(s, j, 0) ==
                              (j < p ? j : 2 * p - 1 - j),
                          "p=%d: stage %d on worker %d", p, j,
                          ladle_pipe_schedule_worker(s, j, 0));
            ladle_pipe_report r;
            LT_OK(ladle_pipe_schedule_validate(s, &r));
            LT_ASSERT(r.ok, "zbv p=%d m=%d: %s", p, m, r.message);
            for (int w = 0; w < p; w++) {
                int most = 2 * m < 2 * p ? 2 * m : 2 * p;
                LT_ASSERT(r.peak_stash[w] <= most && (m < 2 * p || r.peak_stash[w] == most),
                          "zbv p=%d m=%d: worker %d stashes %d (at most %d)", p, m, w,
                          r.peak_stash[w], most);
            }
            ladle_pipe_report_destroy(&r);
            ladle_pipe_schedule_destroy(&s);
        }
}
END_TEST

/* A copy of s's lists into a fresh schedule with the V placement, with
 * worker w's actions at positions i and i2 swapped (i = i2: none) and the
 * action at position drop left out (-1: none). */
static ladle_pipe_schedule *corrupt(const ladle_pipe_schedule *s, int w, int i, int i2,
                                    int drop)
{
    int p = ladle_pipe_schedule_workers(s), m = ladle_pipe_schedule_microbatches(s);
    int place[12];
    for (int j = 0; j < 2 * p; j++)
        place[j] = ladle_pipe_schedule_worker(s, j, 0);
    ladle_pipe_schedule *c = NULL;
    LT_OK(ladle_pipe_schedule_create(p, 2 * p, NULL, place, m, &c));
    for (int v = 0; v < p; v++) {
        const ladle_pipe_action *a = ladle_pipe_schedule_actions(s, v);
        for (int k = 0; k < ladle_pipe_schedule_length(s, v); k++) {
            int at = v != w ? k : k == i ? i2 : k == i2 ? i : k;
            if (v != w || k != drop)
                LT_OK(ladle_pipe_schedule_append(c, v, a[at]));
        }
    }
    return c;
}

static int find(const ladle_pipe_schedule *s, int w, ladle_pipe_kind kind, int stage,
                int mb)
{
    const ladle_pipe_action *a = ladle_pipe_schedule_actions(s, w);
    for (int k = 0; k < ladle_pipe_schedule_length(s, w); k++)
        if (a[k].kind == kind && a[k].stage == stage && a[k].mb == mb)
            return k;
    return -1;
}

static int valid(const ladle_pipe_schedule *s)
{
    ladle_pipe_report r;
    LT_OK(ladle_pipe_schedule_validate(s, &r));
    int ok = r.ok;
    ladle_pipe_report_destroy(&r);
    return ok;
}

/* The untouched copy passes; the turn of the V taken backwards (stage p's
 * forward before stage p-1's on the same worker), a B before its F, and a
 * missing weight gradient are refused. */
START_TEST(corrupted_refused)
{
    int p = 3, m = 6;
    ladle_pipe_schedule *s = zbv(p, m), *c = corrupt(s, 0, 0, 0, -1);
    LT_ASSERT(valid(c), "the faithful copy is refused");
    ladle_pipe_schedule_destroy(&c);
    int a = find(s, p - 1, LADLE_PIPE_F, p - 1, 0), b = find(s, p - 1, LADLE_PIPE_F, p, 0);
    LT_ASSERT(a >= 0 && b > a, "worker %d: F(%d,0) at %d, F(%d,0) at %d", p - 1, p - 1, a,
              p, b);
    c = corrupt(s, p - 1, a, b, -1);
    LT_ASSERT(!valid(c), "the V's turn taken backwards passes");
    ladle_pipe_schedule_destroy(&c);
    a = find(s, 0, LADLE_PIPE_F, 2 * p - 1, 0), b = find(s, 0, LADLE_PIPE_B, 2 * p - 1, 0);
    c = corrupt(s, 0, a, b, -1);
    LT_ASSERT(!valid(c), "a backward before its forward passes");
    ladle_pipe_schedule_destroy(&c);
    c = corrupt(s, 1, 0, 0, find(s, 1, LADLE_PIPE_W, 1, 2));
    LT_ASSERT(!valid(c), "a missing weight gradient passes");
    ladle_pipe_schedule_destroy(&c);
    ladle_pipe_schedule_destroy(&s);
}
END_TEST

/* p = 2, m = 2, unit costs per chunk, timed by hand from the order
 * (worker 0: 0F0 0F1 3F0 3B0 3W0 3F1 3B1 3W1 0B0 0W0 0B1 0W1; worker 1:
 * 1F0 2F0 1F1 2F1 2B0 2W0 1B0 2B1 1B1 1W0 2W1 1W1): worker 1 starts at 1
 * (its first input) and runs without a gap to 13; worker 0 idles from 2
 * to 3 waiting for 2F0, and every later input reaches it before it is free
 * (2F1 at 5, 1B0 at 8 while 3W1 runs to 9, 1B1 at 10), ending at 13.
 * Makespan 13, busy 24, bubble 1 - 24/26 = 1/13. Stash: worker 0 holds at
 * most 3 chunks (0F0, 0F1, then 3F0 or 3F1), worker 1 all 4 forwards; with
 * half a stage's memory per chunk that is 1.5 and 2. */
START_TEST(by_hand)
{
    ladle_pipe_schedule *s = zbv(2, 2);
    double act[4] = {0.5, 0.5, 0.5, 0.5};
    ladle_pipe_costs c = {NULL, NULL, NULL, NULL, NULL, NULL, act};
    ladle_pipe_sim sim;
    LT_OK(ladle_pipe_simulate(s, &c, NULL, &sim));
    LT_ASSERT(fabs(sim.makespan - 13) < 1e-12 && fabs(sim.bubble - 1.0 / 13) < 1e-12,
              "makespan %g bubble %g (13 and 1/13)", sim.makespan, sim.bubble);
    LT_ASSERT(sim.peak_memory[0] == 1.5 && sim.peak_memory[1] == 2,
              "peak memory %g %g (1.5 and 2)", sim.peak_memory[0], sim.peak_memory[1]);
    ladle_pipe_sim_destroy(&sim);
    ladle_pipe_schedule_destroy(&s);
}
END_TEST

/* Equal costs, one stage's F = B = W = 1, so a chunk's are 1/2. Worker p-1
 * cannot start before its first input, (p-1)/2 after the start, and then
 * has 3m of work: no schedule ends before 3m + (p-1)/2. ZB-V meets that
 * bound for m >= 2p, a bubble of (p-1)/(6m+p-1): near zero, against
 * 1F1B's (p-1)/(m+p-1) and ZB-H1's (p-1)/(3m+p-1) on the same work, while
 * each worker's peak memory is p stages' microbatches, 1F1B's first. */
START_TEST(against_1f1b_zbh1)
{
    static const int pm[][2] = {{2, 4}, {3, 6}, {4, 8}, {4, 16}, {5, 10}, {6, 12}, {6, 24}};
    double half[12], one[6];
    for (int j = 0; j < 12; j++)
        half[j] = 0.5;
    for (int j = 0; j < 6; j++)
        one[j] = 1;
    for (size_t t = 0; t < sizeof pm / sizeof pm[0]; t++) {
        int p = pm[t][0], m = pm[t][1];
        ladle_pipe_costs cv = {half, half, half, NULL, NULL, NULL, half};
        ladle_pipe_costs c1 = {one, one, one, NULL, NULL, NULL, one};
        ladle_pipe_schedule *v = zbv(p, m), *o = NULL, *h = NULL;
        LT_OK(ladle_pipe_schedule_generate(LADLE_PIPE_1F1B, p, NULL, 1, m, &c1, &o));
        LT_OK(ladle_pipe_schedule_generate(LADLE_PIPE_ZBH1, p, NULL, 1, m, &c1, &h));
        ladle_pipe_sim sv, so, sh;
        LT_OK(ladle_pipe_simulate(v, &cv, NULL, &sv));
        LT_OK(ladle_pipe_simulate(o, &c1, NULL, &so));
        LT_OK(ladle_pipe_simulate(h, &c1, NULL, &sh));
        double bound = 3.0 * m + (p - 1) / 2.0;
        LT_ASSERT(fabs(sv.makespan - bound) < 1e-12, "zbv p=%d m=%d: makespan %g, bound %g",
                  p, m, sv.makespan, bound);
        LT_ASSERT(fabs(sv.bubble - (p - 1.0) / (6.0 * m + p - 1)) < 1e-12 &&
                      fabs(so.bubble - (p - 1.0) / (m + p - 1)) < 1e-12 &&
                      fabs(sh.bubble - (p - 1.0) / (3.0 * m + p - 1)) < 1e-12,
                  "p=%d m=%d: bubbles zbv %g, 1f1b %g, zbh1 %g", p, m, sv.bubble, so.bubble,
                  sh.bubble);
        for (int w = 0; w < p; w++)
            LT_ASSERT(sv.peak_memory[w] == p, "zbv p=%d: worker %d peak memory %g, not %d",
                      p, w, sv.peak_memory[w], p);
        LT_ASSERT(so.peak_memory_max == p && sh.peak_memory_max <= p,
                  "p=%d: 1f1b peak %g, zbh1 %g", p, so.peak_memory_max, sh.peak_memory_max);
        ladle_pipe_sim_destroy(&sv), ladle_pipe_sim_destroy(&so),
            ladle_pipe_sim_destroy(&sh);
        ladle_pipe_schedule_destroy(&v), ladle_pipe_schedule_destroy(&o);
        ladle_pipe_schedule_destroy(&h);
    }
}
END_TEST

/* The text form keeps the V: written, parsed back, and also given as its
 * compute actions only (the placement read off the actions, the messages
 * added), it simulates to the same makespan. */
START_TEST(text_round_trip)
{
    ladle_pipe_schedule *s = zbv(3, 7), *t = NULL, *u = NULL;
    char *text = NULL, compute[4096];
    size_t len = 0;
    FILE *f = open_memstream(&text, &len);
    LT_ASSERT(f != NULL, "open_memstream");
    LT_OK(ladle_pipe_schedule_write(s, f));
    fclose(f);
    LT_OK(ladle_pipe_schedule_parse(text, &t));
    size_t at = 0;
    for (int w = 0; w < 3; w++) {
        const ladle_pipe_action *a = ladle_pipe_schedule_actions(s, w);
        for (int k = 0; k < ladle_pipe_schedule_length(s, w); k++)
            if (a[k].kind <= LADLE_PIPE_W)
                at +=
                    (size_t)snprintf(compute + at, sizeof compute - at, "%d%s%d ",
                                     a[k].stage, ladle_pipe_kind_name(a[k].kind), a[k].mb);
        at += (size_t)snprintf(compute + at, sizeof compute - at, "\n");
    }
    LT_ASSERT(at < sizeof compute, "the compute text fits");
    LT_OK(ladle_pipe_schedule_parse(compute, &u));
    ladle_pipe_sim a, b, c;
    LT_OK(ladle_pipe_simulate(s, NULL, NULL, &a));
    LT_OK(ladle_pipe_simulate(t, NULL, NULL, &b));
    LT_OK(ladle_pipe_simulate(u, NULL, NULL, &c));
    LT_ASSERT(a.makespan == b.makespan && a.makespan == c.makespan &&
                  ladle_pipe_schedule_worker(u, 3, 0) == 2 &&
                  ladle_pipe_schedule_worker(u, 5, 0) == 0,
              "makespans %g %g %g", a.makespan, b.makespan, c.makespan);
    ladle_pipe_sim_destroy(&a), ladle_pipe_sim_destroy(&b), ladle_pipe_sim_destroy(&c);
    free(text);
    ladle_pipe_schedule_destroy(&s), ladle_pipe_schedule_destroy(&t);
    ladle_pipe_schedule_destroy(&u);
}
END_TEST

/* The name, and the shapes the V cannot take. */
START_TEST(names_and_bad_shapes)
{
    ladle_pipe_style st = LADLE_PIPE_GPIPE;
    LT_OK(ladle_pipe_style_parse("zbv", &st));
    LT_ASSERT(st == LADLE_PIPE_ZBV && !strcmp(ladle_pipe_style_name(LADLE_PIPE_ZBV), "zbv"),
              "zbv parses as %d", (int)st);
    ladle_pipe_schedule *s = NULL;
    LT_FAILS(ladle_pipe_schedule_generate(LADLE_PIPE_ZBV, 5, NULL, 2, 4, NULL, &s),
             LADLE_ERR_ARG);
    LT_FAILS(ladle_pipe_schedule_generate(LADLE_PIPE_ZBV, 4, NULL, 3, 4, NULL, &s),
             LADLE_ERR_ARG);
    int rep[4] = {1, 2, 1, 1};
    LT_FAILS(ladle_pipe_schedule_generate(LADLE_PIPE_ZBV, 4, rep, 2, 4, NULL, &s),
             LADLE_ERR_ARG);
    LT_ASSERT(s == NULL, "a failed generate set its output");
}
END_TEST

LT_SUITE("zbv", "zbv", 60, valid_and_stash, corrupted_refused, by_hand, against_1f1b_zbh1,
         text_round_trip, names_and_bad_shapes)
