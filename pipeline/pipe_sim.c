/* The schedule simulator, and timelines of simulated or measured runs as
 * SVG and Chrome-trace JSON (see ladle/pipeline.h). */
#include <errno.h>
#include <math.h>
#include <string.h>

#include "ladle/deprecated.h" /* the 0.1 names' wrappers */
#include "pipeline/pipe.h"

static double at(const double *v, int j, double dflt) { return v ? v[j] : dflt; }

static double duration(const ladle_pipe_costs *c, ladle_pipe_action a)
{
    int j = a.stage;
    switch (a.kind) {
    case LADLE_PIPE_F:
        return at(c ? c->f : NULL, j, 1.0);
    case LADLE_PIPE_B:
        return at(c ? c->b : NULL, j, 1.0);
    case LADLE_PIPE_W:
        return at(c ? c->w : NULL, j, 1.0);
    case LADLE_PIPE_REDUCE:
        return at(c ? c->reduce : NULL, j, 0.0);
    case LADLE_PIPE_STEP:
        return at(c ? c->step : NULL, j, 0.0);
    default:
        return 0.0;
    }
}

typedef struct replay {
    const ladle_pipe_schedule *s;
    const ladle_pipe_costs *c;
    const double *recv, *param; /* ladle_pipe_sim_desc's, or NULL */
    double *sent;    /* per key: when a send was issued, or -1 */
    double *free_at; /* per worker */
    double *stash;
    int *pc;
    ladle_pipe_sim *out;
} replay;

static void record(replay *R, int w, ladle_pipe_action a, double start, double end)
{
    ladle_pipe_sim *o = R->out;
    if (!(ladle__pipe_is_compute(a.kind) || a.kind == LADLE_PIPE_REDUCE ||
          a.kind == LADLE_PIPE_STEP))
        return;
    ladle_pipe_event *e = &o->events[o->nevents++];
    e->worker = w;
    e->action = a;
    e->start = start;
    e->end = end;
    o->makespan = end > o->makespan ? end : o->makespan;
    if (ladle__pipe_is_compute(a.kind))
        o->busy += end - start;
    double mem = at(R->c ? R->c->act : NULL, a.stage, 1.0);
    if (a.kind == LADLE_PIPE_F) {
        R->stash[w] += mem;
        if (R->stash[w] > o->peak_memory[w])
            o->peak_memory[w] = R->stash[w];
    } else if (a.kind == LADLE_PIPE_W) {
        R->stash[w] -= mem;
    }
}

/* Advance worker w as far as it can go; 1 if it moved. */
static int advance(replay *R, int w)
{
    const ladle_pipe_schedule *s = R->s;
    int moved = 0;
    while (R->pc[w] < s->len[w]) {
        ladle_pipe_action a = s->acts[w][R->pc[w]];
        double start = R->free_at[w];
        if (a.kind == LADLE_PIPE_RECV_F || a.kind == LADLE_PIPE_RECV_B) {
            double t = R->sent[ladle__pipe_key(s, ladle__pipe_matching_send(a))];
            if (t < 0)
                break;
            int boundary = a.kind == LADLE_PIPE_RECV_F ? a.stage - 1 : a.stage;
            t += at(R->c ? R->c->send : NULL, boundary, 0.0);
            /* arrived, then the receiver's own time to take it */
            R->free_at[w] = (t > start ? t : start) + at(R->recv, boundary, 0.0);
        } else if (a.kind == LADLE_PIPE_SEND_F || a.kind == LADLE_PIPE_SEND_B) {
            R->sent[ladle__pipe_key(s, a)] = start;
        } else if (a.kind == LADLE_PIPE_REDUCE) {
            /* the replicas meet: it starts when the last arrives */
            int j = a.stage, all = 1;
            for (int q = 0; q < s->replicas[j] && all; q++) {
                int v = s->placement[s->rep_first[j] + q];
                all = R->pc[v] < s->len[v] && s->acts[v][R->pc[v]].kind == LADLE_PIPE_REDUCE &&
                      s->acts[v][R->pc[v]].stage == j;
                if (all && R->free_at[v] > start)
                    start = R->free_at[v];
            }
            if (!all)
                break;
            double end = start + duration(R->c, a);
            for (int q = 0; q < s->replicas[j]; q++) {
                int v = s->placement[s->rep_first[j] + q];
                record(R, v, a, start, end);
                R->free_at[v] = end;
                if (v != w)
                    R->pc[v]++;
            }
        } else {
            double end = start + duration(R->c, a);
            record(R, w, a, start, end);
            R->free_at[w] = end;
        }
        R->pc[w]++;
        moved = 1;
    }
    return moved;
}

/* Replay the (valid) schedule into o. */
static ladle_status replay_all(const ladle_pipe_schedule *s, const ladle_pipe_costs *c,
                               const ladle_pipe_sim_desc *d, ladle_pipe_sim *o)
{
    ladle_status st = LADLE_OK;
    replay R;
    memset(&R, 0, sizeof R);
    int64_t total = 0;
    for (int w = 0; w < s->workers; w++)
        total += s->len[w];
    LADLE_CHECK(total < INT32_MAX, LADLE_ERR_ARG, "%lld actions are too many to simulate",
                (long long)total);
    R.s = s;
    R.c = c;
    R.recv = d ? d->recv : NULL;
    R.param = d ? d->param : NULL;
    R.out = o;
    R.sent = ladle__calloc((size_t)ladle__pipe_keys(s), sizeof(double));
    R.free_at = ladle__calloc((size_t)s->workers, sizeof(double));
    R.stash = ladle__calloc((size_t)s->workers, sizeof(double));
    R.pc = ladle__calloc((size_t)s->workers, sizeof(int));
    o->peak_memory = ladle__calloc((size_t)s->workers, sizeof(double));
    o->events = ladle__calloc((size_t)total + 1, sizeof(ladle_pipe_event));
    LADLE_CHECK(R.sent && R.free_at && R.stash && R.pc && o->peak_memory && o->events,
                LADLE_ERR_ALLOC, "out of memory");
    for (int64_t i = 0; i < ladle__pipe_keys(s); i++)
        R.sent[i] = -1;
    for (int moved = 1; moved;) {
        moved = 0;
        for (int w = 0; w < s->workers; w++)
            moved |= advance(&R, w);
    }
    /* each worker holds its stages' parameters throughout */
    for (int j = 0; R.param != NULL && j < s->stages; j++)
        for (int q = 0; q < s->replicas[j]; q++)
            o->peak_memory[s->placement[s->rep_first[j] + q]] += R.param[j];
    for (int w = 0; w < s->workers; w++) {
        LADLE_CHECK(R.pc[w] == s->len[w], LADLE_ERR_INTERNAL,
                    "the simulation stopped on worker %d at step %d", w, R.pc[w]);
        if (o->peak_memory[w] > o->peak_memory_max)
            o->peak_memory_max = o->peak_memory[w];
    }
    o->bubble = o->makespan > 0 ? 1.0 - o->busy / (s->workers * o->makespan) : 0.0;
fail:
    ladle__free(R.sent), ladle__free(R.free_at), ladle__free(R.stash), ladle__free(R.pc);
    return st;
}

void ladle_pipe_sim_desc_init(ladle_pipe_sim_desc *d)
{
    if (!LADLE_DESC_START(d))
        return;
}

ladle_status ladle_pipe_simulate(const ladle_pipe_schedule *s, const ladle_pipe_costs *c,
                                 const ladle_pipe_sim_desc *d, ladle_pipe_sim *out)
{
    ladle_status st = LADLE_OK;
    ladle_pipe_report rep;
    ladle_pipe_sim sim;
    memset(&rep, 0, sizeof rep);
    memset(&sim, 0, sizeof sim);
    LADLE_NOT_NULL(s);
    LADLE_NOT_NULL(out);
    /* everything is checked before anything is written: *out changes only
     * on success */
    LADLE_CALL(ladle_pipe_schedule_validate(s, &rep));
    LADLE_CHECK(rep.ok, LADLE_ERR_ARG, "%s", rep.message);
    LADLE_CALL(ladle__pipe_check_costs(c, s->stages));
    if (d != NULL) {
        LADLE_CHECK_SIZE(d); /* before reading a field */
        static const char *const names[2] = {"recv", "param"};
        const double *const v[2] = {d->recv, d->param};
        LADLE_CALL(ladle__pipe_check_values(2, v, names, s->stages));
    }
    LADLE_CALL(replay_all(s, c, d, &sim));
    *out = sim;
    memset(&sim, 0, sizeof sim);
fail:
    ladle_pipe_sim_destroy(&sim);
    ladle_pipe_report_destroy(&rep);
    return st;
}

/* The 0.1 names, kept one release (ladle/deprecated.h). */

void ladle_pipe_sim_opts_init(ladle_pipe_sim_opts *o) { ladle_pipe_sim_desc_init(o); }

ladle_status ladle_pipe_simulate_ex(const ladle_pipe_schedule *s, const ladle_pipe_costs *c,
                                    const ladle_pipe_sim_opts *opts, ladle_pipe_sim *out)
{
    return ladle_pipe_simulate(s, c, opts, out);
}

ladle_status ladle_pipe_sim_destroy(ladle_pipe_sim *sim)
{
    if (sim == NULL)
        return LADLE_OK;
    ladle__free(sim->peak_memory);
    ladle__free(sim->events);
    memset(sim, 0, sizeof *sim);
    return LADLE_OK;
}

double ladle_pipe_events_bubble(int workers, int n, const ladle_pipe_event *e)
{
    if (workers < 1 || n < 1 || e == NULL)
        return 0.0;
    double lo = INFINITY, hi = -INFINITY, busy = 0;
    for (int i = 0; i < n; i++) {
        lo = e[i].start < lo ? e[i].start : lo;
        hi = e[i].end > hi ? e[i].end : hi;
        if (ladle__pipe_is_compute(e[i].action.kind))
            busy += e[i].end - e[i].start;
    }
    return hi > lo ? 1.0 - busy / (workers * (hi - lo)) : 0.0;
}

/* ---- pictures ----------------------------------------------------------- */

static const char *colour(int kind)
{
    switch (kind) {
    case LADLE_PIPE_F:
        return "#4e79a7";
    case LADLE_PIPE_B:
        return "#76b7b2";
    case LADLE_PIPE_W:
        return "#59a14f";
    case LADLE_PIPE_REDUCE:
        return "#f28e2b";
    default:
        return "#bab0ac";
    }
}

ladle_status ladle_pipe_write_svg(FILE *out, const char *title, int workers, int n,
                                  const ladle_pipe_event *e)
{
    ladle_status st = LADLE_OK;
    LADLE_NOT_NULL(out);
    LADLE_CHECK(workers >= 1 && n >= 0 && (n == 0 || e != NULL), LADLE_ERR_ARG,
                "%d workers and %d events", workers, n);
    double lo = INFINITY, hi = -INFINITY;
    for (int i = 0; i < n; i++) {
        lo = e[i].start < lo ? e[i].start : lo;
        hi = e[i].end > hi ? e[i].end : hi;
    }
    if (n == 0 || !(hi > lo))
        lo = 0, hi = 1;
    const double left = 70, width = 900, row = 26, top = 40;
    double scale = width / (hi - lo), height = top + row * workers + 50;
    fprintf(out,
            "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%.0f\" height=\"%.0f\" "
            "font-family=\"sans-serif\" font-size=\"11\">\n"
            "<rect width=\"100%%\" height=\"100%%\" fill=\"white\"/>\n"
            "<text x=\"%.0f\" y=\"20\" font-size=\"14\">%s</text>\n",
            left + width + 20, height, left, title ? title : "");
    for (int w = 0; w < workers; w++)
        fprintf(out, "<text x=\"8\" y=\"%.1f\">worker %d</text>\n", top + row * w + 17, w);
    for (int i = 0; i < n; i++) {
        double x = left + (e[i].start - lo) * scale, wd = (e[i].end - e[i].start) * scale;
        double y = top + row * e[i].worker + 2;
        if (e[i].worker < 0 || e[i].worker >= workers)
            continue;
        fprintf(out,
                "<rect x=\"%.2f\" y=\"%.1f\" width=\"%.2f\" height=\"%.1f\" fill=\"%s\" "
                "stroke=\"white\" stroke-width=\"0.5\"><title>%d%s%d</title></rect>\n",
                x, y, wd > 0.5 ? wd : 0.5, row - 4, colour(e[i].action.kind),
                e[i].action.stage, ladle_pipe_kind_name(e[i].action.kind), e[i].action.mb);
        if (wd >= 14 && e[i].action.mb >= 0)
            fprintf(out,
                    "<text x=\"%.2f\" y=\"%.1f\" fill=\"white\" text-anchor=\"middle\">%d</text>\n",
                    x + wd / 2, y + 15, e[i].action.mb);
    }
    double ly = top + row * workers + 20;
    static const int kinds[5] = {LADLE_PIPE_F, LADLE_PIPE_B, LADLE_PIPE_W, LADLE_PIPE_REDUCE,
                                 LADLE_PIPE_STEP};
    static const char *labels[5] = {"forward", "backward (input)", "backward (weights)",
                                    "gradient reduction", "optimizer step"};
    for (int i = 0; i < 5; i++) {
        double x = left + i * 170;
        fprintf(out,
                "<rect x=\"%.0f\" y=\"%.0f\" width=\"12\" height=\"12\" fill=\"%s\"/>"
                "<text x=\"%.0f\" y=\"%.0f\">%s</text>\n",
                x, ly, colour(kinds[i]), x + 16, ly + 10, labels[i]);
    }
    fprintf(out, "<text x=\"%.0f\" y=\"%.0f\" text-anchor=\"end\">%.4g</text>\n", left + width,
            ly + 26, hi - lo);
    fprintf(out, "<text x=\"%.0f\" y=\"%.0f\">0</text>\n</svg>\n", left, ly + 26);
    errno = 0; /* what is buffered is written now, so a full disk is seen here */
    LADLE_CHECK(fflush(out) == 0 && !ferror(out), LADLE_ERR_IO, "writing the SVG failed: %s",
                strerror(errno ? errno : EIO));
fail:
    return st;
}

ladle_status ladle_pipe_write_trace(FILE *out, int workers, int n, const ladle_pipe_event *e,
                                    double time_unit)
{
    ladle_status st = LADLE_OK;
    LADLE_NOT_NULL(out);
    LADLE_CHECK(workers >= 1 && n >= 0 && (n == 0 || e != NULL) && time_unit > 0,
                LADLE_ERR_ARG, "%d workers, %d events, time unit %g", workers, n, time_unit);
    double lo = INFINITY;
    for (int i = 0; i < n; i++)
        lo = e[i].start < lo ? e[i].start : lo;
    fprintf(out, "{\"traceEvents\": [\n");
    for (int w = 0; w < workers; w++)
        fprintf(out,
                "%s{\"name\": \"thread_name\", \"ph\": \"M\", \"pid\": 0, \"tid\": %d, "
                "\"args\": {\"name\": \"worker %d\"}}",
                w ? ",\n" : "", w, w);
    for (int i = 0; i < n; i++) {
        char name[48];
        ladle__pipe_format(name, sizeof name, e[i].action);
        fprintf(out,
                ",\n{\"name\": \"%s\", \"cat\": \"%s\", \"ph\": \"X\", \"pid\": 0, \"tid\": %d, "
                "\"ts\": %.3f, \"dur\": %.3f, \"args\": {\"stage\": %d, \"microbatch\": %d}}",
                name, ladle_pipe_kind_name(e[i].action.kind), e[i].worker,
                (e[i].start - lo) * time_unit, (e[i].end - e[i].start) * time_unit,
                e[i].action.stage, e[i].action.mb);
    }
    fprintf(out, "\n], \"displayTimeUnit\": \"ms\"}\n");
    errno = 0; /* what is buffered is written now, so a full disk is seen here */
    LADLE_CHECK(fflush(out) == 0 && !ferror(out), LADLE_ERR_IO, "writing the trace failed: %s",
                strerror(errno ? errno : EIO));
fail:
    return st;
}
