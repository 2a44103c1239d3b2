/* Pipeline schedules: the generators against the known bubble and stash
 * formulas, the validator on hand-made bad schedules, the simulator on a
 * case worked out by hand, the text form and the timeline writers. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"

static ladle_pipe_schedule *gen(int style, int S, const int *rep, int v, int m,
                                const ladle_pipe_costs *c)
{
    ladle_pipe_schedule *s = NULL;
    LT_OK(ladle_pipe_schedule_generate(style, S, rep, v, m, c, &s));
    return s;
}

static ladle_pipe_report validate(const ladle_pipe_schedule *s)
{
    ladle_pipe_report r;
    LT_OK(ladle_pipe_schedule_validate(s, &r));
    return r;
}

static ladle_pipe_sim simulate(const ladle_pipe_schedule *s, const ladle_pipe_costs *c)
{
    ladle_pipe_sim sim;
    LT_OK(ladle_pipe_simulate(s, c, NULL, &sim));
    return sim;
}

/* Equal stage costs, no weight-gradient time: GPipe and 1F1B idle (p-1)
 * stage-times of the m+p-1 each worker spans, and 1F1B's stage i stashes
 * min(p-i, m) microbatches (GPipe all m). */
START_TEST(gpipe_1f1b_bubble)
{
    static const int pm[][2] = {{1, 3}, {2, 1}, {2, 4}, {3, 5}, {4, 8}, {5, 3}, {6, 12}};
    double f[6], b[6], w[6];
    for (int j = 0; j < 6; j++)
        f[j] = 1.5, b[j] = 2.5, w[j] = 0;
    ladle_pipe_costs c = {f, b, w, NULL, NULL, NULL, NULL};
    for (size_t t = 0; t < sizeof pm / sizeof pm[0]; t++) {
        int p = pm[t][0], m = pm[t][1];
        for (int style = LADLE_PIPE_GPIPE; style <= LADLE_PIPE_1F1B; style++) {
            ladle_pipe_schedule *s = gen(style, p, NULL, 1, m, &c);
            ladle_pipe_report r = validate(s);
            LT_ASSERT(r.ok, "%s p=%d m=%d: %s", ladle_pipe_style_name(style), p, m, r.message);
            for (int i = 0; i < p && r.ok; i++) {
                int want = style == LADLE_PIPE_GPIPE ? m : (p - i < m ? p - i : m);
                LT_ASSERT(r.peak_stash[i] == want, "%s p=%d m=%d stage %d stashes %d, not %d",
                          ladle_pipe_style_name(style), p, m, i, r.peak_stash[i], want);
            }
            ladle_pipe_report_destroy(&r);
            ladle_pipe_sim sim = simulate(s, &c);
            double want = (double)(p - 1) / (m + p - 1);
            LT_ASSERT(fabs(sim.bubble - want) < 1e-12, "%s p=%d m=%d: bubble %.15g, not %.15g",
                      ladle_pipe_style_name(style), p, m, sim.bubble, want);
            LT_ASSERT(fabs(sim.makespan - (m + p - 1) * 4.0) < 1e-12, "makespan %g, not %g",
                      sim.makespan, (m + p - 1) * 4.0);
            ladle_pipe_sim_destroy(&sim);
            ladle_pipe_schedule_destroy(&s);
        }
    }
}
END_TEST

/* With f = b = w, 1F1B idles (p-1)(f+b+w) and ZB-H1 (p-1)(f+b-w): a third;
 * ZB-H1 keeps 1F1B's peak stash of p. */
START_TEST(zbh1_third)
{
    static const int pm[][2] = {{2, 4}, {3, 6}, {4, 8}, {4, 16}, {6, 12}, {8, 16}};
    for (size_t t = 0; t < sizeof pm / sizeof pm[0]; t++) {
        int p = pm[t][0], m = pm[t][1];
        ladle_pipe_schedule *z = gen(LADLE_PIPE_ZBH1, p, NULL, 1, m, NULL);
        ladle_pipe_schedule *o = gen(LADLE_PIPE_1F1B, p, NULL, 1, m, NULL);
        ladle_pipe_report r = validate(z);
        LT_ASSERT(r.ok && r.peak_stash_max <= p, "ZB-H1 p=%d m=%d: peak %d: %s", p, m,
                  r.peak_stash_max, r.message);
        ladle_pipe_report_destroy(&r);
        ladle_pipe_sim sz = simulate(z, NULL), so = simulate(o, NULL);
        double ideal = 3.0 * m, idle_z = sz.makespan - ideal, idle_o = so.makespan - ideal;
        LT_ASSERT(fabs(idle_o - 3.0 * (p - 1)) < 1e-12, "1F1B p=%d idles %g", p, idle_o);
        LT_ASSERT(fabs(idle_z - (p - 1)) < 1e-12, "ZB-H1 p=%d m=%d idles %g, not %d", p, m,
                  idle_z, p - 1);
        ladle_pipe_sim_destroy(&sz), ladle_pipe_sim_destroy(&so);
        ladle_pipe_schedule_destroy(&z), ladle_pipe_schedule_destroy(&o);
    }
}
END_TEST

/* Interleaving v chunks divides 1F1B's idle time by at least v. */
START_TEST(interleaved)
{
    static const int wvm[][3] = {{2, 2, 4}, {3, 2, 6}, {4, 2, 8}, {4, 3, 8}, {2, 4, 6}};
    for (size_t t = 0; t < sizeof wvm / sizeof wvm[0]; t++) {
        int W = wvm[t][0], v = wvm[t][1], m = wvm[t][2];
        ladle_pipe_schedule *s = gen(LADLE_PIPE_INTERLEAVED, W * v, NULL, v, m, NULL);
        LT_ASSERT(ladle_pipe_schedule_workers(s) == W, "%d workers",
                  ladle_pipe_schedule_workers(s));
        ladle_pipe_report r = validate(s);
        LT_ASSERT(r.ok, "interleaved W=%d v=%d m=%d: %s", W, v, m, r.message);
        ladle_pipe_report_destroy(&r);
        /* each chunk costs 1/v of a stage of the plain pipeline */
        double c1[64];
        for (int j = 0; j < 64; j++)
            c1[j] = 1.0 / v;
        ladle_pipe_costs cv = {c1, c1, c1, NULL, NULL, NULL, NULL};
        ladle_pipe_schedule *o = gen(LADLE_PIPE_1F1B, W, NULL, 1, m, NULL);
        ladle_pipe_sim si = simulate(s, &cv), so = simulate(o, NULL);
        double idle_i = si.makespan - 3.0 * m, idle_o = so.makespan - 3.0 * m;
        LT_ASSERT(idle_i <= idle_o / v + 1e-12, "W=%d v=%d m=%d: idles %g, 1F1B %g", W, v, m,
                  idle_i, idle_o);
        ladle_pipe_sim_destroy(&si), ladle_pipe_sim_destroy(&so);
        ladle_pipe_schedule_destroy(&s), ladle_pipe_schedule_destroy(&o);
    }
    ladle_pipe_schedule *s = NULL;
    LT_FAILS(ladle_pipe_schedule_generate(LADLE_PIPE_INTERLEAVED, 8, NULL, 2, 6, NULL, &s),
             LADLE_ERR_ARG); /* 6 microbatches on 4 workers */
    LT_FAILS(ladle_pipe_schedule_generate(LADLE_PIPE_INTERLEAVED, 7, NULL, 2, 8, NULL, &s),
             LADLE_ERR_ARG);
}
END_TEST

/* The replicated hybrid: valid for many replica counts and m not a
 * multiple of r; on a stage 3x heavier than its neighbour, 3 replicas keep
 * every worker busy where 1F1B waits on the heavy stage. */
START_TEST(hybrid)
{
    static const int reps[][4] = {{1, 1, 0, 0}, {2, 1, 0, 0}, {1, 3, 0, 0}, {1, 2, 1, 0},
                                  {2, 3, 1, 0}, {1, 1, 1, 2}, {3, 2, 0, 0}};
    for (size_t t = 0; t < sizeof reps / sizeof reps[0]; t++) {
        int S = 0;
        while (S < 4 && reps[t][S])
            S++;
        for (int m = 1; m <= 9; m += 2) {
            ladle_pipe_schedule *s = gen(LADLE_PIPE_HYBRID, S, reps[t], 1, m, NULL);
            ladle_pipe_report r = validate(s);
            LT_ASSERT(r.ok, "hybrid %zu m=%d: %s", t, m, r.message);
            ladle_pipe_report_destroy(&r);
            for (int j = 0; j < S; j++)
                for (int k = 0; k < m; k++)
                    LT_ASSERT(ladle_pipe_schedule_route(s, j, k) == k % reps[t][j],
                              "route of %d at stage %d", k, j);
            ladle_pipe_schedule_destroy(&s);
        }
    }
    double f[2] = {1, 3}, b[2] = {1, 3};
    ladle_pipe_costs c = {f, b, f, NULL, NULL, NULL, NULL};
    int rep[2] = {1, 3};
    ladle_pipe_schedule *h = gen(LADLE_PIPE_HYBRID, 2, rep, 1, 24, &c);
    ladle_pipe_schedule *o = gen(LADLE_PIPE_1F1B, 2, NULL, 1, 24, &c);
    ladle_pipe_sim sh = simulate(h, &c), so = simulate(o, &c);
    /* the heavy stage alone needs 24 * 9 on one worker, 24 * 9 / 3 on three */
    LT_ASSERT(so.makespan >= 24 * 9 && sh.makespan < 1.1 * 24 * 3,
              "hybrid %g, 1F1B %g", sh.makespan, so.makespan);
    ladle_pipe_sim_destroy(&sh), ladle_pipe_sim_destroy(&so);
    ladle_pipe_schedule_destroy(&h), ladle_pipe_schedule_destroy(&o);
    ladle_pipe_schedule *s = NULL;
    LT_FAILS(ladle_pipe_schedule_generate(LADLE_PIPE_1F1B, 2, rep, 1, 4, NULL, &s),
             LADLE_ERR_ARG);
}
END_TEST

/* Whether the simulation has worker's (kind, mb) event from start to end. */
static int has_event(const ladle_pipe_sim *sim, int worker, ladle_pipe_kind kind, int mb,
                     double start, double end)
{
    for (int e = 0; e < sim->nevents; e++) {
        const ladle_pipe_event *ev = &sim->events[e];
        if (ev->worker == worker && ev->action.kind == kind && ev->action.mb == mb)
            return fabs(ev->start - start) < 1e-12 && fabs(ev->end - end) < 1e-12;
    }
    return 0;
}

/* p = 2, m = 2, 1F1B, f = (1, 2), b = (3, 4), w = 0, transfers 0.5, by hand:
 * worker 0: F0 [0,1] F1 [1,2]; worker 1: F0 [1.5,3.5] B0 [3.5,7.5]
 * F1 [7.5,9.5] B1 [9.5,13.5]; worker 0: B0 [8,11] B1 [14,17]. */
START_TEST(simulator_by_hand)
{
    double f[2] = {1, 2}, b[2] = {3, 4}, w[2] = {0, 0}, send[2] = {0.5, 0.5};
    ladle_pipe_costs c = {f, b, w, send, NULL, NULL, NULL};
    ladle_pipe_schedule *s = gen(LADLE_PIPE_1F1B, 2, NULL, 1, 2, &c);
    ladle_pipe_sim sim = simulate(s, &c);
    LT_ASSERT(fabs(sim.makespan - 17) < 1e-12, "makespan %g", sim.makespan);
    LT_ASSERT(fabs(sim.busy - 20) < 1e-12, "busy %g", sim.busy);
    LT_ASSERT(fabs(sim.bubble - (1 - 20.0 / 34)) < 1e-12, "bubble %g", sim.bubble);
    static const struct {
        int worker;
        ladle_pipe_kind kind;
        int mb;
        double start, end;
    } want[] = {{0, LADLE_PIPE_F, 1, 1, 2},  {1, LADLE_PIPE_F, 0, 1.5, 3.5},
                {1, LADLE_PIPE_B, 1, 9.5, 13.5}, {0, LADLE_PIPE_B, 0, 8, 11},
                {0, LADLE_PIPE_B, 1, 14, 17}};
    for (size_t i = 0; i < sizeof want / sizeof want[0]; i++)
        LT_ASSERT(has_event(&sim, want[i].worker, want[i].kind, want[i].mb, want[i].start,
                            want[i].end),
                  "event %zu", i);
    LT_ASSERT(fabs(ladle_pipe_events_bubble(2, sim.nevents, sim.events) - sim.bubble) < 1e-12,
              "events bubble");
    ladle_pipe_sim_destroy(&sim);
    ladle_pipe_schedule_destroy(&s);
}
END_TEST

/* The same by hand with a receive taking 0.25 of the receiver's time
 * after the message arrives (ladle_pipe_sim_desc): worker 1: F0
 * [1.75,3.75] B0 [3.75,7.75], F1's message arrived at 2.5 but is taken at
 * [7.75,8]: F1 [8,10] B1 [10,14]; worker 0: B0's gradient arrives at 8.25,
 * taken by 8.5: B0 [8.5,11.5]; B1's at 14.5, taken by 14.75: B1
 * [14.75,17.75]. And parameters of 10 and 20 on top of the stash: worker 0
 * stashes 2 microbatches (F0, F1 before B0's W), worker 1 one. */
START_TEST(simulator_recv_and_params)
{
    double f[2] = {1, 2}, b[2] = {3, 4}, w[2] = {0, 0}, send[2] = {0.5, 0.5};
    double recv[2] = {0.25, 0.25}, param[2] = {10, 20};
    ladle_pipe_costs c = {f, b, w, send, NULL, NULL, NULL};
    ladle_pipe_schedule *s = gen(LADLE_PIPE_1F1B, 2, NULL, 1, 2, &c);
    ladle_pipe_sim_desc o;
    ladle_pipe_sim_desc_init(&o);
    o.recv = recv;
    o.param = param;
    ladle_pipe_sim sim;
    LT_OK(ladle_pipe_simulate(s, &c, &o, &sim));
    LT_ASSERT(fabs(sim.makespan - 17.75) < 1e-12, "makespan %g", sim.makespan);
    LT_ASSERT(fabs(sim.busy - 20) < 1e-12, "busy %g", sim.busy);
    static const struct {
        int worker;
        ladle_pipe_kind kind;
        int mb;
        double start, end;
    } want[] = {{1, LADLE_PIPE_F, 0, 1.75, 3.75}, {1, LADLE_PIPE_B, 0, 3.75, 7.75},
                {1, LADLE_PIPE_F, 1, 8, 10},      {1, LADLE_PIPE_B, 1, 10, 14},
                {0, LADLE_PIPE_B, 0, 8.5, 11.5},  {0, LADLE_PIPE_B, 1, 14.75, 17.75}};
    for (size_t i = 0; i < sizeof want / sizeof want[0]; i++)
        LT_ASSERT(has_event(&sim, want[i].worker, want[i].kind, want[i].mb, want[i].start,
                            want[i].end),
                  "event %zu", i);
    LT_ASSERT(sim.peak_memory[0] == 12 && sim.peak_memory[1] == 21 &&
                  sim.peak_memory_max == 21,
              "peak memory %g %g (max %g)", sim.peak_memory[0], sim.peak_memory[1],
              sim.peak_memory_max);
    ladle_pipe_sim_destroy(&sim);
    /* no descriptor: the costs alone */
    LT_OK(ladle_pipe_simulate(s, &c, NULL, &sim));
    LT_ASSERT(fabs(sim.makespan - 17) < 1e-12, "makespan without options %g", sim.makespan);
    ladle_pipe_sim_destroy(&sim);
    /* bad options change nothing */
    sim.makespan = -1;
    recv[1] = -1;
    LT_FAILS(ladle_pipe_simulate(s, &c, &o, &sim), LADLE_ERR_ARG);
    recv[1] = NAN;
    LT_FAILS(ladle_pipe_simulate(s, &c, &o, &sim), LADLE_ERR_ARG);
    recv[1] = 0.25;
    o.size = 0; /* not set up by ladle_pipe_sim_desc_init */
    LT_FAILS(ladle_pipe_simulate(s, &c, &o, &sim), LADLE_ERR_ARG);
    LT_ASSERT(sim.makespan == -1, "a failed simulation wrote its result");
    ladle_pipe_schedule_destroy(&s);
}
END_TEST

/* A descriptor whose size is not this library's (a struct that never went
 * through ladle_pipe_sim_desc_init, or one of older headers) is refused
 * before any field is read, and the result is left alone. */
START_TEST(sim_desc_size)
{
    double recv[2] = {0.25, 0.25};
    ladle_pipe_schedule *s = gen(LADLE_PIPE_1F1B, 2, NULL, 1, 2, NULL);
    ladle_pipe_sim_desc d;
    ladle_pipe_sim sim;
    sim.makespan = -1;
    memset(&d, 0, sizeof d);
    LT_FAILS(ladle_pipe_simulate(s, NULL, &d, &sim), LADLE_ERR_ARG);
    ladle_pipe_sim_desc_init(&d);
    d.recv = recv;
    d.size = sizeof d - 1;
    ladle_status st = ladle_pipe_simulate(s, NULL, &d, &sim);
    LT_ASSERT(st == LADLE_ERR_ARG &&
                  strstr(ladle_error_message(), "descriptor size") != NULL,
              "%s: %s", ladle_status_name(st), ladle_error_message());
    ladle_error_clear();
    LT_ASSERT(sim.makespan == -1, "a refused descriptor wrote the result");
    ladle_pipe_sim_desc_init(NULL); /* accepted */
    ladle_pipe_schedule_destroy(&s);
}
END_TEST

/* The 0.1 names (ladle/deprecated.h) give what their replacements give. */
START_TEST(sim_deprecated)
{
    double f[2] = {1, 2}, b[2] = {3, 4}, send[2] = {0.5, 0.5}, recv[2] = {0.25, 0.25},
           param[2] = {10, 20};
    ladle_pipe_costs c = {f, b, NULL, send, NULL, NULL, NULL};
    ladle_pipe_schedule *s = gen(LADLE_PIPE_1F1B, 2, NULL, 1, 3, &c);
    ladle_pipe_sim_desc d;
    ladle_pipe_sim_desc_init(&d);
    d.recv = recv;
    d.param = param;
    ladle_pipe_sim want, got, bare;
    LT_OK(ladle_pipe_simulate(s, &c, &d, &want));
    LT_OK(ladle_pipe_simulate(s, &c, NULL, &bare));
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wdeprecated-declarations"
    ladle_pipe_sim_opts o;
    ladle_pipe_sim_opts_init(&o);
    int same_init = o.size == d.size && o.recv == NULL && o.param == NULL;
    o.recv = recv;
    o.param = param;
    LT_OK(ladle_pipe_simulate_ex(s, &c, &o, &got));
    ladle_pipe_sim got_bare;
    LT_OK(ladle_pipe_simulate_ex(s, &c, NULL, &got_bare));
    o.size = 0;
    LT_FAILS(ladle_pipe_simulate_ex(s, &c, &o, &got_bare), LADLE_ERR_ARG);
    ladle_pipe_sim_opts_init(NULL); /* accepted, as before */
#pragma GCC diagnostic pop
    int same = same_init && got.nevents == want.nevents && got.makespan == want.makespan &&
               got.busy == want.busy && got.bubble == want.bubble &&
               got.peak_memory_max == want.peak_memory_max &&
               got_bare.makespan == bare.makespan &&
               got_bare.peak_memory_max == bare.peak_memory_max;
    for (int i = 0; same && i < want.nevents; i++)
        same = !memcmp(&got.events[i], &want.events[i], sizeof want.events[i]);
    for (int w = 0; same && w < 2; w++)
        same = got.peak_memory[w] == want.peak_memory[w];
    LT_ASSERT(same, "the deprecated simulation differs: makespan %g, want %g", got.makespan,
              want.makespan);
    ladle_pipe_sim_destroy(&want), ladle_pipe_sim_destroy(&got);
    ladle_pipe_sim_destroy(&bare), ladle_pipe_sim_destroy(&got_bare);
    ladle_pipe_schedule_destroy(&s);
}
END_TEST

/* A replicated stage meets at REDUCE: it starts when the slower replica
 * arrives. Stage 0 on one worker, stage 1 on two; m = 3, unit costs,
 * reduce 0.25: replica 0 of stage 1 runs microbatches 0 and 2. */
START_TEST(simulator_reduce)
{
    int rep[2] = {1, 2};
    double red[2] = {0, 0.25};
    ladle_pipe_costs c = {NULL, NULL, NULL, NULL, red, NULL, NULL};
    ladle_pipe_schedule *s = gen(LADLE_PIPE_HYBRID, 2, rep, 1, 3, &c);
    ladle_pipe_sim sim = simulate(s, &c);
    double start[4] = {-1, -1, -1, -1}, wend[4] = {0};
    for (int e = 0; e < sim.nevents; e++) {
        const ladle_pipe_event *ev = &sim.events[e];
        if (ev->action.kind == LADLE_PIPE_REDUCE) {
            start[ev->worker] = ev->start;
            LT_ASSERT(fabs(ev->end - ev->start - 0.25) < 1e-12, "reduce time");
        }
        if (ev->action.kind == LADLE_PIPE_W && ev->end > wend[ev->worker])
            wend[ev->worker] = ev->end;
    }
    LT_ASSERT(start[0] < 0 && start[1] >= 0 && start[1] == start[2], "reduce on 1 and 2");
    double later = wend[1] > wend[2] ? wend[1] : wend[2];
    LT_ASSERT(fabs(start[1] - later) < 1e-12, "reduce starts %g, last W ends %g", start[1],
              later);
    ladle_pipe_sim_destroy(&sim);
    ladle_pipe_schedule_destroy(&s);
}
END_TEST

/* Parse a hand-written schedule and validate it. */
static ladle_pipe_report check_text(const char *text)
{
    ladle_pipe_schedule *s = NULL;
    ladle_pipe_report r;
    memset(&r, 0, sizeof r);
    LT_OK(ladle_pipe_schedule_parse(text, &s));
    if (s)
        r = validate(s);
    ladle_pipe_schedule_destroy(&s);
    return r;
}

START_TEST(validator_rejects)
{
    /* a valid compute-only 2-stage schedule first */
    ladle_pipe_report r = check_text("0F0 0F1 0B0 0W0 0B1 0W1\n1F0 1B0 1W0 1F1 1B1 1W1\n");
    LT_ASSERT(r.ok, "%s", r.message);
    ladle_pipe_report_destroy(&r);
    static const struct {
        const char *text, *needle;
        int worker;
    } bad[] = {
        /* backward before forward */
        {"0F0 0F1 0B0 0W0 0B1 0W1\n1B0 1F0 1W0 1F1 1B1 1W1\n", "1B0 comes before 1F0", 1},
        /* worker 0 waits for a gradient before sending the input it depends on */
        {"0RECV_B0 0F0 0SEND_F0 0B0 0W0\n1F0 1B0 1W0\n", "deadlock", 0},
        /* a cycle: worker 1 wants microbatch 1 first, worker 0 sends it only
         * after the gradient of microbatch 0 */
        {"0F0 0B0 0W0 0F1 0B1 0W1\n1F1 1B1 1W1 1F0 1B0 1W0\n", "deadlock", 0},
        /* a receive of a microbatch nobody sends */
        {"0F0 0B0 0W0\n1RECV_F0 1F0 1B0 1W0 1RECV_F0\n", "a second 1RECV_F0", 1},
        /* weight gradient before its backward */
        {"0F0 0W0 0B0\n1F0 1B0 1W0\n", "0W0 comes before 0B0", 0},
        /* a microbatch missing: the step would come before its gradient */
        {"0F0 0F1 0B0 0W0 0B1 0W1\n1F0 1B0 1W0\n", "1STEP before 1W1", 1},
        /* a microbatch twice */
        {"0F0 0B0 0W0\n1F0 1B0 1W0 1F0\n", "a second 1F0", 1},
        /* microbatch 1 of stage 1 computed on the wrong replica */
        {"# ladle-pipeline stages 2 microbatches 2 replicas 1,2\n0F0 0F1 0B0 0W0 0B1 0W1\n"
         "1F0 1B0 1W0 1F1 1B1 1W1 1REDUCE\n1REDUCE\n",
         "goes to replica 1, on worker 2", 1},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        r = check_text(bad[i].text);
        LT_ASSERT(!r.ok && r.worker == bad[i].worker && r.message &&
                      strstr(r.message, bad[i].needle) && strstr(r.message, "[") &&
                      strstr(r.message, "worker 0"),
                  "case %zu: ok %d worker %d:\n%s", i, r.ok, r.worker,
                  r.message ? r.message : "(none)");
        ladle_pipe_report_destroy(&r);
    }
    ladle_pipe_schedule *s = NULL;
    ladle_status st = ladle_pipe_schedule_parse("0F0 0X1\n", &s);
    LT_ASSERT(st == LADLE_ERR_IO && strstr(ladle_error_message(), "'0X1'") != NULL, "%s",
              ladle_error_message());
    LT_FAILS(ladle_pipe_schedule_parse("0F0 0Fx\n", &s), LADLE_ERR_IO);
    LT_FAILS(ladle_pipe_schedule_parse("# only a comment\n", &s), LADLE_ERR_IO);
    LT_FAILS(ladle_pipe_schedule_validate(NULL, NULL), LADLE_ERR_NULL);
}
END_TEST

/* Every generated schedule passes, for many shapes. */
START_TEST(generated_pass)
{
    for (int p = 1; p <= 6; p++)
        for (int m = 1; m <= 9; m++)
            for (int style = LADLE_PIPE_GPIPE; style <= LADLE_PIPE_HYBRID; style++) {
                int v = style == LADLE_PIPE_INTERLEAVED ? 2 : 1, rep[6];
                if (style == LADLE_PIPE_INTERLEAVED && m % p != 0)
                    continue;
                for (int j = 0; j < p; j++)
                    rep[j] = 1 + (j * 7 + m) % 3;
                ladle_pipe_schedule *s =
                    gen(style, p * v, style == LADLE_PIPE_HYBRID ? rep : NULL, v, m, NULL);
                ladle_pipe_report r = validate(s);
                LT_ASSERT(r.ok, "%s p=%d m=%d: %s", ladle_pipe_style_name(style), p, m,
                          r.message);
                ladle_pipe_report_destroy(&r);
                ladle_pipe_schedule_destroy(&s);
            }
}
END_TEST

/* The text form round-trips, and a compute-only file gets the generator's
 * messages back. */
START_TEST(text_round_trip)
{
    int rep[3] = {1, 2, 1};
    ladle_pipe_schedule *s = gen(LADLE_PIPE_HYBRID, 3, rep, 1, 5, NULL), *t = NULL, *u = NULL;
    char *buf = NULL, *bare = NULL;
    size_t len = 0, blen = 0;
    FILE *f = open_memstream(&buf, &len);
    LT_OK(ladle_pipe_schedule_write(s, f));
    fclose(f);
    LT_OK(ladle_pipe_schedule_parse(buf, &t));
    /* the compute actions only */
    f = open_memstream(&bare, &blen);
    for (int w = 0; w < ladle_pipe_schedule_workers(s); w++) {
        const ladle_pipe_action *a = ladle_pipe_schedule_actions(s, w);
        for (int i = 0; i < ladle_pipe_schedule_length(s, w); i++)
            if (a[i].kind <= LADLE_PIPE_W)
                fprintf(f, "%d%s%d ", a[i].stage, ladle_pipe_kind_name(a[i].kind), a[i].mb);
        fprintf(f, "\n");
    }
    fclose(f);
    LT_OK(ladle_pipe_schedule_parse(bare, &u));
    const ladle_pipe_schedule *got[2] = {t, u};
    for (int g = 0; g < 2; g++) {
        int same = got[g] && ladle_pipe_schedule_workers(got[g]) == 4 &&
                   ladle_pipe_schedule_replicas(got[g], 1) == 2;
        for (int w = 0; same && w < 4; w++) {
            int n = ladle_pipe_schedule_length(s, w);
            const ladle_pipe_action *a = ladle_pipe_schedule_actions(s, w);
            const ladle_pipe_action *b = ladle_pipe_schedule_actions(got[g], w);
            same = ladle_pipe_schedule_length(got[g], w) == n;
            for (int i = 0; same && i < n; i++)
                same = a[i].kind == b[i].kind && a[i].stage == b[i].stage && a[i].mb == b[i].mb;
        }
        LT_ASSERT(same, "copy %d differs", g);
    }
    free(buf), free(bare);
    ladle_pipe_schedule_destroy(&s), ladle_pipe_schedule_destroy(&t);
    ladle_pipe_schedule_destroy(&u);
}
END_TEST

static int count(const char *hay, const char *needle)
{
    int n = 0;
    for (const char *p = strstr(hay, needle); p; p = strstr(p + 1, needle))
        n++;
    return n;
}

START_TEST(pictures)
{
    ladle_pipe_schedule *s = gen(LADLE_PIPE_ZBH1, 3, NULL, 1, 4, NULL);
    ladle_pipe_sim sim = simulate(s, NULL);
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    LT_OK(ladle_pipe_write_svg(f, "zb", 3, sim.nevents, sim.events));
    fclose(f);
    /* one box per event, five in the legend, the background */
    LT_ASSERT(count(buf, "<rect") == sim.nevents + 6, "%d boxes for %d events",
              count(buf, "<rect"), sim.nevents);
    LT_ASSERT(sim.nevents == 3 * 3 * 4 + 3, "%d events", sim.nevents);
    free(buf);
    buf = NULL;
    f = open_memstream(&buf, &len);
    LT_OK(ladle_pipe_write_trace(f, 3, sim.nevents, sim.events, 1000.0));
    fclose(f);
    LT_ASSERT(count(buf, "\"ph\": \"X\"") == sim.nevents && count(buf, "thread_name") == 3,
              "trace");
    free(buf);
    ladle_pipe_sim_destroy(&sim);
    ladle_pipe_schedule_destroy(&s);
}
END_TEST

START_TEST(bad_arguments)
{
    ladle_pipe_schedule *s = NULL;
    LT_FAILS(ladle_pipe_schedule_generate(LADLE_PIPE_1F1B, 4, NULL, 1, 0, NULL, &s),
             LADLE_ERR_ARG);
    LT_FAILS(ladle_pipe_schedule_generate((ladle_pipe_style)99, 4, NULL, 1, 4, NULL, &s),
             LADLE_ERR_ARG);
    LT_FAILS(ladle_pipe_schedule_generate(LADLE_PIPE_1F1B, 4, NULL, 1, 4, NULL, NULL),
             LADLE_ERR_NULL);
    double neg[2] = {1, -1};
    ladle_pipe_costs c = {neg, NULL, NULL, NULL, NULL, NULL, NULL};
    LT_FAILS(ladle_pipe_schedule_generate(LADLE_PIPE_ZBH1, 2, NULL, 1, 4, &c, &s), LADLE_ERR_ARG);
    int rep[2] = {1, 0};
    LT_FAILS(ladle_pipe_schedule_generate(LADLE_PIPE_HYBRID, 2, rep, 1, 4, NULL, &s),
             LADLE_ERR_ARG);
    int place[2] = {0, 0}, two[1] = {2};
    LT_FAILS(ladle_pipe_schedule_create(2, 1, two, place, 4, &s), LADLE_ERR_ARG);
    LT_OK(ladle_pipe_schedule_create(2, 2, NULL, NULL, 2, &s));
    ladle_pipe_action a = {LADLE_PIPE_F, 0, 5};
    LT_FAILS(ladle_pipe_schedule_append(s, 0, a), LADLE_ERR_ARG);
    a.mb = 0;
    LT_FAILS(ladle_pipe_schedule_append(s, 3, a), LADLE_ERR_ARG);
    ladle_pipe_sim sim;
    /* empty: incomplete */
    LT_FAILS(ladle_pipe_simulate(s, NULL, NULL, &sim), LADLE_ERR_ARG);
    ladle_pipe_schedule_destroy(&s);
    ladle_pipe_style style = LADLE_PIPE_GPIPE;
    LT_OK(ladle_pipe_style_parse("zbh1", &style));
    LT_ASSERT(s == NULL && style == LADLE_PIPE_ZBH1, "names");
    ladle_status st = ladle_pipe_style_parse("nope", &style);
    LT_ASSERT(st == LADLE_ERR_ARG && style == LADLE_PIPE_ZBH1 &&
                  strstr(ladle_error_message(), "'nope'") != NULL,
              "an unknown style leaves the output alone and is named: %s (%s)",
              ladle_status_name(st), ladle_error_message());
    ladle_error_clear();
    LT_FAILS(ladle_pipe_style_parse(NULL, &style), LADLE_ERR_NULL);
    LT_ASSERT(strcmp(ladle_pipe_style_name((ladle_pipe_style)99), "?") == 0 &&
                  strcmp(ladle_pipe_kind_name((ladle_pipe_kind)99), "?") == 0,
              "unknown names");
}
END_TEST

/* Huge, negative and garbage numbers in a schedule's text, shapes whose
 * tables would overflow, and outputs left alone by calls that fail. */
START_TEST(hostile_input)
{
    static const struct {
        const char *text, *needle;
    } bad[] = {
        {"# ladle-pipeline stages 99999999999999999999\n0F0\n", "stages '9999"},
        {"# ladle-pipeline stages -3\n0F0\n", "stages '-3'"},
        {"# ladle-pipeline stages 2x\n0F0\n", "stages '2x'"},
        {"# ladle-pipeline stages 300\n0F0\n", "from 1 to 256"},
        {"# ladle-pipeline microbatches 2147483648\n0F0\n", "microbatches '2147483648'"},
        {"# ladle-pipeline microbatches 0\n0F0\n", "microbatches '0'"},
        {"# ladle-pipeline stages 1 microbatches\n0F0\n", "has no value"},
        {"0F99999999999999999999\n", "'0F99999999999999999999'"},
        {"99999999999999999999F0\n", "'99999999999999999999F0'"},
        {"# ladle-pipeline replicas 1,99999999999999999999\n0F0\n", "bad list"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        ladle_pipe_schedule *s = NULL;
        ladle_status st = ladle_pipe_schedule_parse(bad[i].text, &s);
        LT_ASSERT(st == LADLE_ERR_IO && s == NULL &&
                      strstr(ladle_error_message(), bad[i].needle),
                  "case %zu: %s (%s)", i, ladle_status_name(st), ladle_error_message());
        ladle_error_clear();
    }
    ladle_pipe_schedule *s = NULL;
    /* tables of 2^32 cells: refused before anything is allocated */
    LT_FAILS(ladle_pipe_schedule_create(1 << 16, 1 << 16, NULL, NULL, 1, &s),
             LADLE_ERR_ARG);
    LT_FAILS(ladle_pipe_schedule_create(4, 1 << 16, NULL, NULL, 1 << 20, &s),
             LADLE_ERR_ARG);
    LT_FAILS(ladle_pipe_schedule_generate(LADLE_PIPE_INTERLEAVED, 1 << 16, NULL, 2, 1 << 20,
                                          NULL, &s),
             LADLE_ERR_ARG);
    int huge[2] = {2147483647, 2147483647};
    LT_FAILS(ladle_pipe_schedule_generate(LADLE_PIPE_HYBRID, 2, huge, 1, 4, NULL, &s),
             LADLE_ERR_ARG);
    LT_ASSERT(s == NULL, "no schedule on failure");
    /* a directory and a missing file, with the reason */
    ladle_status st = ladle_pipe_schedule_load("/tmp", &s);
    LT_ASSERT(st == LADLE_ERR_IO && strstr(ladle_error_message(), "directory"), "%s (%s)",
              ladle_status_name(st), ladle_error_message());
    ladle_error_clear();
    st = ladle_pipe_schedule_load("/tmp/ladle_no_such_dir/s.txt", &s);
    LT_ASSERT(st == LADLE_ERR_IO && strstr(ladle_error_message(), "No such file"),
              "%s (%s)", ladle_status_name(st), ladle_error_message());
    ladle_error_clear();
    /* simulate and validate write nothing when they fail */
    LT_OK(ladle_pipe_schedule_create(2, 2, NULL, NULL, 2, &s));
    ladle_pipe_sim sim;
    memset(&sim, 0, sizeof sim);
    sim.makespan = 42;
    sim.nevents = 7;
    /* empty: incomplete */
    LT_FAILS(ladle_pipe_simulate(s, NULL, NULL, &sim), LADLE_ERR_ARG);
    LT_ASSERT(sim.makespan == 42 && sim.nevents == 7 && sim.events == NULL,
              "a failed simulation wrote its output");
    ladle_pipe_report r;
    memset(&r, 0, sizeof r);
    r.ok = 5;
    LT_FAILS(ladle_pipe_schedule_validate(NULL, &r), LADLE_ERR_NULL);
    LT_ASSERT(r.ok == 5 && r.message == NULL, "a failed validation wrote its report");
    ladle_pipe_schedule_destroy(&s);
    /* nor does the profiling pass: the second entry is no plain layer */
    int64_t xs[2] = {4, 4};
    ladle_op *ops[2] = {NULL, NULL};
    LT_OK(ladle_linear_create(LT_LINEAR(xs[1], 4, 1, 0), 2, xs, LADLE_F32, lt_device(), 1,
                              &ops[0]));
    LT_OK(ladle_loss_create(LT_LOSS(LADLE_LOSS_MSE, LADLE_REDUCE_MEAN, 0, 0), 2, xs,
                            LADLE_F32, lt_device(), &ops[1]));
    double f[2] = {-7, -7}, b[2] = {-7, -7}, w[2] = {-7, -7};
    LT_FAILS(ladle_pipe_profile(2, ops, 2, f, b, w), LADLE_ERR_ARG);
    LT_ASSERT(f[0] == -7 && b[0] == -7 && w[0] == -7, "a failed profile wrote its times");
    ladle_op_destroy(&ops[0]), ladle_op_destroy(&ops[1]);
}
END_TEST

/* The profiling pass gives positive, finite times, and the heavier layer
 * (4x the arithmetic) costs more. */
START_TEST(profiling)
{
    int64_t small[2] = {64, 64}, big[2] = {64, 128};
    ladle_op *ops[2] = {NULL, NULL};
    LT_OK(ladle_linear_create(LT_LINEAR(small[1], 64, 1, 0), 2, small, LADLE_F32,
                              lt_device(), 1, &ops[0]));
    LT_OK(ladle_linear_create(LT_LINEAR(big[1], 128, 1, 0), 2, big, LADLE_F32, lt_device(),
                              1, &ops[1]));
    double f[2], b[2], w[2];
    LT_OK(ladle_pipe_profile(2, ops, 15, f, b, w));
    int ok = 1;
    for (int i = 0; i < 2; i++)
        ok &= f[i] > 0 && b[i] > 0 && w[i] > 0 && f[i] < 1 && b[i] < 1 && w[i] < 1;
    LT_ASSERT(ok && f[1] + b[1] + w[1] > f[0] + b[0] + w[0], "costs %g %g %g, %g %g %g", f[0],
              b[0], w[0], f[1], b[1], w[1]);
    /* the pass leaves no gradient behind */
    ladle_tensor *g = ladle_op_grad(ops[0], 0);
    double sum = 0;
    for (int64_t e = 0; e < ladle_tensor_numel(g); e++)
        sum += fabs(lt_get(g, e));
    LT_ASSERT(sum == 0, "gradient left: %g", sum);
    LT_FAILS(ladle_pipe_profile(2, ops, 0, f, b, w), LADLE_ERR_ARG);
    LT_FAILS(ladle_pipe_profile(2, NULL, 3, f, b, w), LADLE_ERR_NULL);
    ladle_op_destroy(&ops[0]), ladle_op_destroy(&ops[1]);
}
END_TEST

LT_SUITE("pipe_schedule", "pipe_schedule", 120, gpipe_1f1b_bubble, zbh1_third, interleaved,
         hybrid, simulator_by_hand, simulator_recv_and_params, sim_desc_size,
         sim_deprecated, simulator_reduce, validator_rejects, generated_pass,
         text_round_trip, pictures, bad_arguments, hostile_input, profiling)
