/*
 * ladle-gpt: train a small character-level GPT (ladle_gpt_create) on a
 * text corpus (ladle/text.h; Debian's fortunes by default), report the
 * validation loss in nats per character against the bigram baseline of
 * the same split, and print a sample of generated text.
 *
 *   bin/ladle-gpt [--steps 2000] [--layers 4] [--width 128] [--heads 4]
 *                 [--context 128] [--batch 32] ...        (--help)
 *
 * On R ranks it trains data parallel (ladle_gpt_create_on: the batch split
 * R ways, the weights replicated, their gradients summed during the
 * backward), taking the same steps as one rank up to rounding.
 * docs/transformers.md describes the job and its results.
 * Exit status: 0 done, 1 a failure at run time, 2 bad options.
 */
#include <math.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "ladle.h"
#include "tool.h"

#define TOOL "ladle-gpt"

typedef struct gpt_opts {
    const char *corpus, *checkpoint, *summary, *device_name, *recompute_name;
    ladle_device device;
    int64_t val_every, layers, width, heads, context, batch, steps, warmup, eval_every;
    int64_t eval_limit, stop_after, sample, tensor_ways;
    double lr, min_lr, weight_decay, dropout, temperature;
    uint64_t seed;
    int f64, f32_tiles, resume, quiet, recompute;
} gpt_opts;

static void usage(void)
{
    printf(
        "usage: ladle-gpt [options]\n"
        "  --corpus PATH        text file or directory (default %s)\n"
        "  --val-every K        hold out every K-th record for validation (10)\n"
        "  --layers L           transformer blocks (4)\n"
        "  --width E            embedding width (128)\n"
        "  --heads H            attention heads, dividing E (4)\n"
        "  --context T          tokens per window (128)\n"
        "  --batch N            windows per step, over all ranks (32; R / S must divide "
        "it)\n"
        "  --tensor-ways S      heads, MLP and sequence split S ways (1): R / S data ways\n"
        "  --steps S            training steps (2000)\n"
        "  --lr R               AdamW's peak rate (1e-3), --min-lr (1e-4): cosine decay\n"
        "  --warmup W           steps of linear warm-up (100)\n"
        "  --weight-decay D     AdamW's decoupled decay (0.1)\n"
        "  --dropout P          after the attention and the MLP (0)\n"
        "  --eval-every K       validation every K steps and at the end (500)\n"
        "  --eval-limit W       score only the first W validation windows (all)\n"
        "  --seed S             weights and batches (1)\n"
        "  --f64                train in double precision\n"
        "  --device D           cpu, cuda or guarded: where the model lives (cpu); cuda:\n"
        "                       each rank on a GPU (LADLE_CUDA_DEVICE, else node-local "
        "rank)\n"
        "  --recompute M        none, block or selective: activations the backward\n"
        "                       recomputes instead of keeping (none)\n"
        "  --f32-tiles          attention's tile products in f32 (f32 only; faster, "
        "within\n"
        "                       f32 rounding; default: in double)\n"
        "  --checkpoint FILE    save at every evaluation and at the end\n"
        "  --resume             continue from --checkpoint\n"
        "  --stop-after S       stop (and save) after step S, as an interruption\n"
        "  --sample C           characters to generate at the end (300; 0: none)\n"
        "  --temperature X      of the sampling (0.8)\n"
        "  --summary FILE       one line of results\n"
        "  --quiet              no progress lines\n"
        "  --help, --version    this text; the version and the MPI it was built with\n",
        LADLE_FORTUNES_DIR);
}

/* An option: a flag ('f', sets an int), a path ('s'), a whole number in
 * [lo, hi] ('i'), a real in [lo, hi] under cli_real's flags ('r') or the
 * seed ('u'); at gpt_opts' offset off. */
typedef struct gpt_opt {
    const char *name;
    char kind;
    size_t off;
    double lo, hi;
    unsigned flags;
} gpt_opt;

#define GO(field) offsetof(gpt_opts, field)
#define BIG ((double)((int64_t)1 << 40))
/* clang-format off */
static const gpt_opt gpt_options[] = {
    {"--f64",          'f', GO(f64),          0, 0, 0},
    {"--f32-tiles",    'f', GO(f32_tiles),    0, 0, 0},
    {"--resume",       'f', GO(resume),       0, 0, 0},
    {"--quiet",        'f', GO(quiet),        0, 0, 0},
    {"--corpus",       's', GO(corpus),       0, 0, 0},
    {"--checkpoint",   's', GO(checkpoint),   0, 0, 0},
    {"--summary",      's', GO(summary),      0, 0, 0},
    {"--device",       's', GO(device_name),  0, 0, 0},
    {"--recompute",    's', GO(recompute_name), 0, 0, 0},
    {"--val-every",    'i', GO(val_every),    1, 1 << 20, 0},
    {"--layers",       'i', GO(layers),       1, 256, 0},
    {"--width",        'i', GO(width),        1, 1 << 16, 0},
    {"--heads",        'i', GO(heads),        1, 1 << 16, 0},
    {"--context",      'i', GO(context),      1, 1 << 16, 0},
    {"--batch",        'i', GO(batch),        1, 1 << 16, 0},
    {"--steps",        'i', GO(steps),        1, BIG, 0},
    {"--warmup",       'i', GO(warmup),       0, BIG, 0},
    {"--eval-every",   'i', GO(eval_every),   1, BIG, 0},
    {"--eval-limit",   'i', GO(eval_limit),   1, BIG, 0},
    {"--stop-after",   'i', GO(stop_after),   1, BIG, 0},
    {"--sample",       'i', GO(sample),       0, 1 << 20, 0},
    {"--lr",           'r', GO(lr),           0, 10, CLI_OPEN_LO},
    {"--min-lr",       'r', GO(min_lr),       0, 10, 0},
    {"--weight-decay", 'r', GO(weight_decay), 0, 10, 0},
    {"--dropout",      'r', GO(dropout),      0, 1, CLI_OPEN_HI},
    {"--temperature",  'r', GO(temperature),  0, 100, CLI_OPEN_LO},
    {"--seed",         'u', GO(seed),         0, 0, 0},
    {"--tensor-ways",  'i', GO(tensor_ways),  1, 4096, 0},
};
/* clang-format on */
#undef BIG
#undef GO

/* argv[*i], one option (and its value, *i moved past it) into o: 0, or 1
 * with the reason in why. */
static int parse_option(int argc, char **argv, int *i, gpt_opts *o, char *why)
{
    const char *a = argv[*i];
    const gpt_opt *opt = NULL;
    for (size_t k = 0; k < sizeof gpt_options / sizeof gpt_options[0] && !opt; k++)
        opt = strcmp(a, gpt_options[k].name) == 0 ? &gpt_options[k] : NULL;
    if (opt == NULL) {
        if (strncmp(a, "--", 2) == 0)
            return cli_fail(why, "unknown option %s", a) != 0;
        return cli_fail(why, "unexpected argument '%s'", a) != 0;
    }
    char *field = (char *)o + opt->off;
    if (opt->kind == 'f') {
        *(int *)field = 1;
        return 0;
    }
    if (*i + 1 >= argc || argv[*i + 1][0] == '\0')
        return cli_fail(why, "%s needs a value", a) != 0;
    const char *v = argv[++*i];
    switch (opt->kind) {
    case 's':
        *(const char **)field = v;
        return 0;
    case 'i':
        return cli_int(a, v, (int64_t)opt->lo, (int64_t)opt->hi, (int64_t *)field, why) !=
               0;
    case 'r':
        return cli_real(a, v, opt->lo, opt->hi, opt->flags, (double *)field, why) != 0;
    default: /* 'u', --seed */
        return cli_u64(a, v, (uint64_t *)field, why) != 0;
    }
}

/* What the options say together: 0, or 1 with the reason in why. */
static int check_options(gpt_opts *o, char *why)
{
    static const char *const names[] = {"cpu", "cuda", "guarded"};
    static const ladle_device devices[] = {LADLE_CPU, LADLE_CUDA, LADLE_GUARDED};
    int known = 0;
    for (int k = 0; k < 3 && !known; k++)
        if ((known = strcmp(o->device_name, names[k]) == 0))
            o->device = devices[k];
    if (!known)
        return cli_fail(why, "--device: '%s' is not one of cpu, cuda, guarded",
                        o->device_name) != 0;
    int count = 0;
    ladle_status have = ladle_device_count(o->device, &count);
    if (have != LADLE_OK || count < 1)
        return cli_fail(why, "--device %s: %s", o->device_name,
                        have != LADLE_OK ? "this ladle was built without that backend"
                                         : "no such device is visible") != 0;
    static const char *const modes[] = {"none", "block", "selective"};
    for (o->recompute = 0; o->recompute < 3; o->recompute++)
        if (strcmp(o->recompute_name, modes[o->recompute]) == 0)
            break;
    if (o->recompute == 3)
        return cli_fail(why, "--recompute: '%s' is not one of none, block, selective",
                        o->recompute_name) != 0;
    if (o->width % o->heads != 0)
        return cli_fail(why, "--heads %lld must divide --width %lld", (long long)o->heads,
                        (long long)o->width) != 0;
    if (o->resume && o->checkpoint == NULL)
        return cli_fail(why, "--resume needs --checkpoint") != 0;
    if (o->stop_after >= 0 && o->checkpoint == NULL)
        return cli_fail(why, "--stop-after needs --checkpoint (to continue from)") != 0;
    if (o->min_lr > o->lr)
        return cli_fail(why, "--min-lr %g is above --lr %g", o->min_lr, o->lr) != 0;
    if (o->f32_tiles && o->f64)
        return cli_fail(why,
                        "--f32-tiles is for f32 models: with --f64 the tiles are double") !=
               0;
    return 0;
}

/* 0, 1 for --help (printed), or 2 for bad options (rank 0 says why). */
static int options(int argc, char **argv, gpt_opts *o)
{
    char why[CLI_WHY];
    memset(o, 0, sizeof *o);
    o->corpus = LADLE_FORTUNES_DIR;
    o->device_name = "cpu";
    o->recompute_name = "none";
    o->val_every = 10;
    o->layers = 4, o->width = 128, o->heads = 4, o->context = 128, o->batch = 32;
    o->steps = 2000, o->warmup = 100, o->eval_every = 500, o->sample = 300;
    o->lr = 1e-3, o->min_lr = 1e-4, o->weight_decay = 0.1, o->temperature = 0.8;
    o->seed = 1;
    o->stop_after = -1;
    o->tensor_ways = 1;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--help")) {
            if (tool_rank() == 0)
                usage();
            return 1;
        }
        if (!strcmp(argv[i], "--version")) {
            if (tool_rank() == 0)
                cli_version(TOOL);
            return 1;
        }
        if (parse_option(argc, argv, &i, o, why))
            goto refuse;
    }
    if (check_options(o, why))
        goto refuse;
    return 0;
refuse:
    if (tool_rank() == 0)
        fprintf(stderr, TOOL ": %s (see --help)\n", why);
    return 2;
}

/* A training run: the corpus, the model, its optimizer and schedule, this
 * rank's batch (windows whole in wx and wy, its block of positions in ids
 * and tgt2, tgt the targets flat), the checkpoint's meta (the next step,
 * then what the run is, checked on resume), and how far it got. */
typedef struct gpt_run {
    ladle_text *t;
    ladle_gpt_desc d;
    ladle_graph *g;
    ladle_optimizer *opt;
    ladle_tensor *ids, *tgt2, *tgt, *wx, *wy;
    ladle_tensor *dids,
        *dtgt; /* ids and tgt on the model's device (ids and tgt on the CPU) */
    ladle_lr_schedule sched;
    ladle_batch_desc bd;
    int S;
    int64_t nparams, meta[8], step;
    double bigram_val, val, last, train_time;
    int64_t done_steps;
} gpt_run;

/* Columns i Ts .. (i + 1) Ts - 1 of the N x T windows in x and y (host
 * tensors) into this rank's N x Ts ids and targets: its sequence block. */
static void take_block(const ladle_tensor *x, const ladle_tensor *y, int i,
                       ladle_tensor *ids, ladle_tensor *tgt)
{
    int64_t N = ladle_tensor_shape(x)[0], T = ladle_tensor_shape(x)[1];
    int64_t ts = ladle_tensor_shape(ids)[1];
    const int64_t *xs = ladle_tensor_data((ladle_tensor *)x),
                  *ys = ladle_tensor_data((ladle_tensor *)y);
    int64_t *xd = ladle_tensor_data(ids), *yd = ladle_tensor_data(tgt);
    for (int64_t n = 0; n < N; n++)
        for (int64_t t = 0; t < ts; t++) {
            xd[n * ts + t] = xs[n * T + i * ts + t];
            yd[n * ts + t] = ys[n * T + i * ts + t];
        }
}

/* This rank's block of the windows in r->wx and r->wy (host) into r->ids
 * and r->tgt2, and onto the model's device: *ids and *tgt, the tensors to
 * call the graph with. */
static ladle_status stage_block(gpt_run *r, const ladle_tensor **ids,
                                const ladle_tensor **tgt)
{
    take_block(r->wx, r->wy, tool_rank() % r->S, r->ids, r->tgt2);
    *ids = r->dids ? r->dids : r->ids;
    *tgt = r->dtgt ? r->dtgt : r->tgt;
    ladle_status st = LADLE_OK;
    if (r->dids && (st = ladle_tensor_copy(r->dids, r->ids)) == LADLE_OK)
        st = ladle_tensor_copy(r->dtgt, r->tgt);
    return st;
}

/* The validation loss, nats per token, over the first `limit` windows (all
 * when 0): each global batch's mean over its scored targets, weighted by
 * their number. Rank b S + i scores windows b N .. of each batch of D N,
 * at positions i Ts .. (its block; x and y hold the windows whole). */
static ladle_status evaluate(gpt_run *r, int64_t limit, double *nll)
{
    ladle_graph *g = r->g;
    ladle_text *t = r->t;
    ladle_tensor *x = r->wx, *y = r->wy;
    int S = r->S;
    ladle_status st = LADLE_OK;
    int rank = 0, ranks = 1;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &ranks);
    int D = ranks / S, b = rank / S, i = rank % S;
    int64_t N = ladle_tensor_shape(x)[0], T = ladle_tensor_shape(x)[1], ts = T / S;
    int64_t w = ladle_text_windows(t, LADLE_TEXT_VAL, T);
    if (limit > 0 && limit < w)
        w = limit;
    double sum = 0;
    int64_t count = 0;
    const ladle_tensor *xs[1] = {NULL}, *ts_[1] = {NULL};
    int64_t *yv = ladle_tensor_data(y);
    if ((st = ladle_graph_set_training(g, 0)) != LADLE_OK)
        return st;
    for (int64_t batch = 0; batch < w; batch += N * D) {
        double loss = 0;
        int64_t first = batch + b * N, scored = 0;
        if ((st = ladle_text_eval_batch(t, LADLE_TEXT_VAL, first, x, y)) != LADLE_OK)
            break;
        for (int64_t k = 0; k < N * T; k++) {
            if (first + k / T >= w) /* windows past the limit count for nothing */
                yv[k] = -1;
            int64_t pos = k % T;
            scored += yv[k] >= 0 && pos >= i * ts && pos < (i + 1) * ts;
        }
        if ((st = stage_block(r, &xs[0], &ts_[0])) != LADLE_OK)
            break;
        /* the loss is the mean over every rank's scored targets */
        if (MPI_Allreduce(MPI_IN_PLACE, &scored, 1, MPI_INT64_T, MPI_SUM, MPI_COMM_WORLD) !=
            MPI_SUCCESS) {
            st = LADLE_ERR_MPI;
            break;
        }
        if ((st = ladle_graph_forward(g, 1, xs, NULL)) != LADLE_OK ||
            (st = ladle_graph_loss(g, 1, ts_, &loss)) != LADLE_OK)
            break;
        sum += loss * (double)scored;
        count += scored;
    }
    ladle_status st2 = ladle_graph_set_training(g, 1);
    if (st == LADLE_OK)
        st = st2;
    *nll = count ? sum / (double)count : NAN;
    return st;
}

/* A splitmix64 draw in [0, 1) for sampling. */
static double uniform01(uint64_t *s)
{
    uint64_t z = (*s += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    z ^= z >> 31;
    return (double)(z >> 11) * 0x1.0p-53;
}

/* A batch-1 copy *s of g's weights (from the checkpoint at path when g's
 * are shards), for sampling. Local. */
static ladle_status sampler_create(const ladle_gpt_desc *desc, ladle_graph *g,
                                   const char *path, ladle_graph **s)
{
    ladle_status st = LADLE_OK;
    ladle_gpt_desc d1 = *desc;
    d1.batch = 1;
    d1.dropout = 0;
    d1.data_ways = 1;
    d1.tensor_ways = 1;
    d1.device = LADLE_CPU; /* generated on the host, from a copy of the weights */
    if ((st = ladle_gpt_create(&d1, ladle_comm_of(MPI_COMM_SELF), s)) != LADLE_OK)
        return st;
    if (path)
        st = ladle_checkpoint_load_graph(path, ladle_comm_of(MPI_COMM_SELF), *s, NULL, 0,
                                         NULL, NULL);
    for (int i = 0; !path && i < ladle_graph_num_params(g) && st == LADLE_OK; i++) {
        ladle_tensor *a = NULL, *b = NULL;
        if ((st = ladle_graph_param(g, i, NULL, &a, NULL)) == LADLE_OK &&
            (st = ladle_graph_param(*s, i, NULL, &b, NULL)) == LADLE_OK)
            st = ladle_tensor_copy(b, a);
    }
    return st;
}

/* A token drawn from the V logits of row at the temperature (p: V
 * scratch values). */
static int64_t pick_token(const double *row, int64_t V, double temperature, double *p,
                          uint64_t *rng)
{
    double top = row[0], z = 0;
    for (int64_t v = 1; v < V; v++)
        top = fmax(top, row[v]);
    for (int64_t v = 0; v < V; v++)
        z += (p[v] = exp((row[v] - top) / temperature));
    double u = uniform01(rng) * z;
    for (int64_t v = 0; v < V; v++)
        if ((u -= p[v]) < 0)
            return v;
    return V - 1;
}

/* Generate n characters with a batch-1 copy of g's weights (from the
 * checkpoint at path when g's are shards), starting after a newline, and
 * print them. Local. */
static ladle_status sample(const ladle_gpt_desc *desc, ladle_graph *g, const char *path,
                           ladle_text *t, const gpt_opts *o)
{
    ladle_graph *s = NULL;
    ladle_tensor *ids = NULL;
    int64_t T = desc->context, V = desc->vocab, *ctx = NULL, len = 0;
    double *logits = NULL, *p = NULL;
    float *logits32 = NULL;
    char *text = NULL;
    ladle_status st = sampler_create(desc, g, path, &s);
    if (s == NULL)
        return st;
    ctx = calloc((size_t)T, sizeof *ctx);
    logits = calloc((size_t)(T * V), sizeof *logits);
    logits32 = calloc((size_t)(T * V), sizeof *logits32);
    p = calloc((size_t)V, sizeof *p);
    text = calloc((size_t)o->sample + 1, 1);
    if (st == LADLE_OK && (!ctx || !logits || !logits32 || !p || !text))
        st = LADLE_ERR_ALLOC;
    if (st == LADLE_OK)
        st = ladle_tensor_create(LADLE_I64, LADLE_CPU, 2, (int64_t[]){1, T}, &ids);
    if (st == LADLE_OK)
        st = ladle_graph_set_training(s, 0);
    int64_t nl = ladle_text_id(t, '\n');
    ctx[len++] = nl >= 0 ? nl : 0;
    uint64_t rng = o->seed * 7919 + 17;
    for (int64_t c = 0; c < o->sample && st == LADLE_OK; c++) {
        const ladle_tensor *xs[1] = {ids}, *ys[1] = {NULL};
        if ((st = ladle_tensor_write(ids, ctx)) != LADLE_OK ||
            (st = ladle_graph_forward(s, 1, xs, ys)) != LADLE_OK)
            break;
        if (desc->dtype == LADLE_F32) {
            if ((st = ladle_tensor_read(ys[0], logits32)) != LADLE_OK)
                break;
            for (int64_t k = 0; k < T * V; k++)
                logits[k] = logits32[k];
        } else if ((st = ladle_tensor_read(ys[0], logits)) != LADLE_OK)
            break;
        int64_t pick = pick_token(logits + (len - 1) * V, V, o->temperature, p, &rng);
        text[c] = (char)ladle_text_byte(t, pick);
        if (len == T) { /* slide the window */
            memmove(ctx, ctx + 1, (size_t)(T - 1) * sizeof *ctx);
            len--;
        }
        ctx[len++] = pick;
    }
    if (st == LADLE_OK)
        printf("sample (temperature %g):\n%s\n", o->temperature, text);
    free(ctx);
    free(logits);
    free(logits32);
    free(p);
    free(text);
    ladle_tensor_destroy(&ids);
    ladle_graph_destroy(&s);
    return st;
}

/* The ranks R, the tensor ways S and the options must fit together: 0, or
 * 2 with rank 0's reason printed. */
static int check_layout(const gpt_opts *o, int world)
{
    int S = (int)o->tensor_ways, D = world / S;
    const char *layout_bad = NULL;
    char layout_why[400];
    if (world % S != 0)
        layout_bad = "cannot split the ranks";
    else if (o->batch % D != 0)
        layout_bad = "cannot split the batch";
    else if (o->context % S != 0 || o->heads < S)
        layout_bad = "cannot split the context and the heads";
    if (layout_bad == NULL)
        return 0;
    snprintf(layout_why, sizeof layout_why,
             "--batch %lld, --context %lld and --heads %lld over %d ranks with "
             "--tensor-ways %d: %s (the data ways R / S must divide the batch, S the "
             "ranks and the context, and S be at most the heads)",
             (long long)o->batch, (long long)o->context, (long long)o->heads, world, S,
             layout_bad);
    if (tool_rank() == 0)
        fprintf(stderr, TOOL ": %s\n", layout_why);
    return 2;
}

/* The corpus (the status returned) and its bigram baseline (the status in
 * *bigram), with a line about them. */
static ladle_status load_corpus(const gpt_opts *o, gpt_run *r, ladle_status *bigram)
{
    ladle_text_desc to;
    ladle_text_desc_init(&to);
    to.val_every = o->val_every;
    ladle_status st = ladle_text_load(o->corpus, &to, &r->t);
    if (st != LADLE_OK)
        return st;
    double bigram_train = 0;
    *bigram = ladle_text_bigram(r->t, 1.0, &bigram_train, &r->bigram_val);
    if (!o->quiet)
        printf(
            "corpus %s: %d files, %lld + %lld records, %lld + %lld characters "
            "(training + validation), vocabulary %lld\n"
            "bigram baseline (add-one): %.4f nats/char on training, %.4f on validation\n",
            o->corpus, ladle_text_files(r->t),
            (long long)ladle_text_records(r->t, LADLE_TEXT_TRAIN),
            (long long)ladle_text_records(r->t, LADLE_TEXT_VAL),
            (long long)ladle_text_length(r->t, LADLE_TEXT_TRAIN),
            (long long)ladle_text_length(r->t, LADLE_TEXT_VAL),
            (long long)ladle_text_vocab(r->t), bigram_train, r->bigram_val);
    return LADLE_OK;
}

/* The model the options describe over D data and S tensor ways. */
static ladle_status create_model(const gpt_opts *o, int D, gpt_run *r)
{
    ladle_gpt_desc *d = &r->d;
    ladle_gpt_desc_init(d);
    d->vocab = ladle_text_vocab(r->t);
    d->context = o->context;
    d->batch = o->batch;
    d->layers = (int)o->layers;
    d->width = o->width;
    d->heads = o->heads;
    d->dropout = o->dropout;
    d->dtype = o->f64 ? LADLE_F64 : LADLE_F32;
    d->device = o->device;
    d->seed = o->seed;
    d->data_ways = D;
    d->tensor_ways = r->S;
    d->attn_f32_tiles = o->f32_tiles;
    d->recompute = o->recompute;
    return ladle_gpt_create(d, ladle_comm_of(MPI_COMM_WORLD), &r->g);
}

/* The global parameters (a tensor-parallel rank holds shards). */
static int64_t count_params(ladle_graph *g)
{
    int64_t nparams = 0;
    for (int l = 0; l < ladle_graph_num_layers(g); l++) {
        ladle_op *op = ladle_graph_layer(g, l);
        for (int k = 0; k < ladle_op_num_params(op); k++) {
            int nd = 0;
            int64_t gs[LADLE_MAX_NDIM], n = 1;
            ladle_op_param_shard(op, k, &nd, gs, NULL, NULL);
            for (int q = 0; q < nd; q++)
                n *= gs[q];
            nparams += n;
        }
    }
    return nparams;
}

/* AdamW and its schedule, and this rank's batch: rank b S + i takes
 * windows b N .. (b + 1) N - 1 of each batch, whole in wx and wy, and
 * positions i Ts .. of them in ids and tgt2. */
static ladle_status prepare_training(const gpt_opts *o, int D, gpt_run *r)
{
    ladle_status st = LADLE_OK;
    ladle_optimizer_desc od;
    ladle_optimizer_desc_init(&od, LADLE_OPT_ADAMW, o->lr);
    od.beta2 = 0.99;
    od.weight_decay = o->weight_decay;
    ladle_lr_schedule_init(&r->sched, LADLE_LR_COSINE, o->lr);
    r->sched.warmup_steps = o->warmup;
    r->sched.warmup_start = 0.0;
    r->sched.total_steps = o->steps > o->warmup ? o->steps - o->warmup : 1;
    r->sched.min_lr = o->min_lr;
    int64_t N = o->batch / D, T = o->context, Ts = T / r->S,
            offset = (int64_t)(tool_rank() / r->S) * N;
    /* the corpus's windows under the seed, this rank's rows */
    ladle_batch_desc_init(&r->bd, o->seed, o->batch);
    r->bd.offset = offset;
    if ((st = ladle_optimizer_create(&od, &r->opt)) == LADLE_OK &&
        (st = ladle_optimizer_add_graph(r->opt, r->g)) == LADLE_OK &&
        (st = ladle_tensor_create(LADLE_I64, LADLE_CPU, 2, (int64_t[]){N, T}, &r->wx)) ==
            LADLE_OK &&
        (st = ladle_tensor_create(LADLE_I64, LADLE_CPU, 2, (int64_t[]){N, T}, &r->wy)) ==
            LADLE_OK &&
        (st = ladle_tensor_create(LADLE_I64, LADLE_CPU, 2, (int64_t[]){N, Ts}, &r->ids)) ==
            LADLE_OK &&
        (st = ladle_tensor_create(LADLE_I64, LADLE_CPU, 2, (int64_t[]){N, Ts}, &r->tgt2)) ==
            LADLE_OK)
        st = ladle_tensor_wrap(LADLE_I64, LADLE_CPU, 1, (int64_t[]){N * Ts}, NULL,
                               ladle_tensor_data(r->tgt2), &r->tgt);
    if (st == LADLE_OK && o->device != LADLE_CPU &&
        (st = ladle_tensor_create(LADLE_I64, o->device, 2, (int64_t[]){N, Ts}, &r->dids)) ==
            LADLE_OK)
        st = ladle_tensor_create(LADLE_I64, o->device, 1, (int64_t[]){N * Ts}, &r->dtgt);
    int64_t meta[8] = {0,         (int64_t)o->seed, r->d.vocab, o->context,
                       o->layers, o->width,         o->heads,   o->steps};
    memcpy(r->meta, meta, sizeof meta);
    return st;
}

/* --resume: the checkpoint's weights and optimizer state, and its step,
 * if it was written by a run like this one. */
static ladle_status resume(const gpt_opts *o, gpt_run *r)
{
    int64_t got[8];
    int n = 0;
    ladle_status st = ladle_checkpoint_load_graph(
        o->checkpoint, ladle_comm_of(MPI_COMM_WORLD), r->g, r->opt, 8, got, &n);
    if (st == LADLE_OK && (n != 8 || memcmp(got + 1, r->meta + 1, 7 * sizeof *got) != 0)) {
        fprintf(stderr,
                TOOL ": %s was written by another run (seed, vocabulary, context, "
                     "layers, width, heads or steps differ)\n",
                o->checkpoint);
        st = LADLE_ERR_ARG;
    } else if (st == LADLE_OK)
        r->step = got[0];
    return st;
}

/* The model and the run (rank 0, not quiet). */
static void announce(const gpt_opts *o, const gpt_run *r, int world)
{
    if (!o->quiet)
        printf(
            "GPT: %d layers, width %lld, %lld heads, context %lld, batch %lld (%d data-"
            "parallel rank%s), %lld parameters, %s on %s; AdamW lr %g (cosine to %g, %lld "
            "warm-up steps), %lld steps%s\n",
            r->d.layers, (long long)r->d.width, (long long)r->d.heads,
            (long long)o->context, (long long)o->batch, world, world > 1 ? "s" : "",
            (long long)r->nparams, o->f64 ? "f64" : "f32", o->device_name, o->lr, o->min_lr,
            (long long)o->warmup, (long long)o->steps, o->resume ? " (resumed)" : "");
    fflush(stdout);
}

/* One step of training on the global batch of step r->step: its loss. */
static ladle_status train_step(gpt_run *r, double *loss)
{
    const ladle_tensor *xs[1] = {NULL}, *ts[1] = {NULL};
    ladle_status st =
        ladle_text_batch(r->t, LADLE_TEXT_TRAIN, &r->bd, r->step, r->wx, r->wy);
    if (st == LADLE_OK)
        st = stage_block(r, &xs[0], &ts[0]);
    if (st || (st = ladle_graph_zero_grad(r->g)) ||
        (st = ladle_graph_forward(r->g, 1, xs, NULL)) ||
        (st = ladle_graph_loss(r->g, 1, ts, loss)) ||
        (st = ladle_graph_backward(r->g, 1)) ||
        (st = ladle_optimizer_set_lr(r->opt, ladle_lr_at(&r->sched, r->step))) ||
        (st = ladle_optimizer_step(r->opt)))
        return st;
    return LADLE_OK;
}

/* The steps from r->step to --steps (or --stop-after), each evaluation
 * with its line and checkpoint: the status; r->step the next step. */
static ladle_status train(const gpt_opts *o, gpt_run *r)
{
    ladle_status st = LADLE_OK;
    double train_sum = 0;
    int64_t train_n = 0, T = o->context;
    for (; r->step < o->steps; r->step++) {
        double t0 = MPI_Wtime(), loss = 0;
        if ((st = train_step(r, &loss)) != LADLE_OK)
            break;
        r->train_time += MPI_Wtime() - t0;
        r->done_steps++;
        train_sum += loss;
        train_n++;
        r->last = loss;
        int64_t step = r->step;
        int stop = o->stop_after >= 0 && step + 1 >= o->stop_after;
        if ((step + 1) % o->eval_every == 0 || step + 1 == o->steps || stop) {
            if ((st = evaluate(r, o->eval_limit, &r->val)) != LADLE_OK)
                break;
            if (!o->quiet)
                printf("step %lld: train loss %.4f, validation %.4f nats/char (%.3f of the "
                       "bigram's), %.0f tokens/s\n",
                       (long long)(step + 1), train_sum / (double)train_n, r->val,
                       r->val / r->bigram_val,
                       (double)(r->done_steps * o->batch * T) / r->train_time);
            fflush(stdout);
            train_sum = 0;
            train_n = 0;
            if (o->checkpoint) {
                r->meta[0] = step + 1;
                if ((st = ladle_checkpoint_save_graph(o->checkpoint,
                                                      ladle_comm_of(MPI_COMM_WORLD), r->g,
                                                      r->opt, 8, r->meta)) != LADLE_OK)
                    break;
            }
        }
        if (stop) {
            r->step++;
            break;
        }
    }
    return st;
}

/* The last line, and the --summary line (rank 0): 0, or 1 on every rank
 * where the summary could not be written. */
static int report(const gpt_opts *o, const gpt_run *r)
{
    int rc = 0;
    /* every rank steps together: the global batch's tokens per second */
    double tps = r->train_time > 0
                     ? (double)(r->done_steps * o->batch * o->context) / r->train_time
                     : 0;
    double val = r->val, bigram_val = r->bigram_val;
    if (!o->quiet)
        printf("done: validation %.4f nats/char, bigram %.4f, ratio %.3f; %.0f tokens/s\n",
               val, bigram_val, val / bigram_val, tps);
    if (o->summary && tool_rank() == 0) {
        FILE *f = fopen(o->summary, "w");
        if (f == NULL || fprintf(f,
                                 "steps %lld val_loss %.6f bigram %.6f ratio %.4f "
                                 "tokens_per_s %.1f last_loss %.6f params %lld\n",
                                 (long long)r->step, val, bigram_val, val / bigram_val, tps,
                                 r->last, (long long)r->nparams) < 0) {
            fprintf(stderr, TOOL ": cannot write %s\n", o->summary);
            rc = 1;
        }
        if (f && fclose(f) != 0)
            rc = 1;
    }
    MPI_Bcast(&rc, 1, MPI_INT, 0, MPI_COMM_WORLD); /* the summary is rank 0's */
    return rc;
}

/* The sample at the end, printed by rank 0: the status on every rank.
 * Tensor parallel, the weights are shards: a checkpoint gathers them. */
static ladle_status sample_at_end(const gpt_opts *o, gpt_run *r)
{
    ladle_status st = LADLE_OK;
    int root = tool_rank() == 0;
    char tmp[64] = "";
    const char *path = NULL;
    if (r->S > 1) {
        if (root) {
            snprintf(tmp, sizeof tmp, "/tmp/ladle-gpt-sample-XXXXXX");
            int fd = mkstemp(tmp);
            if (fd < 0)
                tmp[0] = '\0';
            else
                close(fd);
        }
        MPI_Bcast(tmp, sizeof tmp, MPI_CHAR, 0, MPI_COMM_WORLD);
        st = tmp[0] ? ladle_checkpoint_save_graph(tmp, ladle_comm_of(MPI_COMM_WORLD), r->g,
                                                  NULL, 0, NULL)
                    : LADLE_ERR_IO;
        path = tmp;
    }
    if (st == LADLE_OK)
        st = root ? sample(&r->d, r->g, path, r->t, o) : LADLE_OK;
    if (root && tmp[0])
        remove(tmp);
    return st;
}

static void run_free(gpt_run *r)
{
    ladle_tensor **tensors[] = {&r->tgt, &r->tgt2, &r->wx,  &r->wy,
                                &r->ids, &r->dids, &r->dtgt};
    for (size_t i = 0; i < sizeof tensors / sizeof tensors[0]; i++)
        ladle_tensor_destroy(tensors[i]);
    ladle_optimizer_destroy(&r->opt);
    ladle_graph_destroy(&r->g);
    ladle_text_destroy(&r->t);
}

/* parse, check the layout, load, build, train, report, sample */
int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    gpt_opts o;
    int rc = options(argc, argv, &o), world = 1;
    if (rc)
        return tool_exit(rc == 1 ? 0 : rc);
    MPI_Comm_size(MPI_COMM_WORLD, &world);
    if ((rc = check_layout(&o, world)) != 0)
        return tool_exit(rc);
    int S = (int)o.tensor_ways, D = world / S;
    if (tool_rank() != 0)
        o.quiet = 1; /* rank 0 reports */
    const char *outs[2] = {o.checkpoint, o.summary},
               *names[2] = {"--checkpoint", "--summary"};
    if (tool_outputs_ok(TOOL, 2, names, outs))
        return tool_exit(2);
    gpt_run r = {.S = S, .val = NAN, .last = NAN};
    ladle_memory_tracker *mem = tool_memory_start();
    ladle_status st = LADLE_OK;
    if (tool_failed(TOOL, load_corpus(&o, &r, &st), "the corpus")) {
        tool_memory_end(&mem);
        return tool_exit(1);
    }
    if (st == LADLE_OK)
        st = create_model(&o, D, &r);
    if (tool_failed(TOOL, st, "the model")) {
        ladle_text_destroy(&r.t);
        tool_memory_end(&mem);
        return tool_exit(1);
    }
    r.nparams = count_params(r.g);
    st = prepare_training(&o, D, &r);
    if (st == LADLE_OK && o.resume)
        st = resume(&o, &r);
    if (tool_failed(TOOL, st, "setting up")) {
        rc = 1;
        goto done;
    }
    announce(&o, &r, world);
    if (tool_failed(TOOL, train(&o, &r), "training")) {
        rc = 1;
        goto done;
    }
    rc = report(&o, &r);
    tool_memory_line(mem, o.quiet);
    if (rc == 0 && o.sample > 0 && r.step >= o.steps &&
        tool_failed(TOOL, sample_at_end(&o, &r), "sampling"))
        rc = 1;
done:
    run_free(&r);
    tool_memory_end(&mem);
    return tool_exit(rc);
}
