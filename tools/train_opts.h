/*
 * The options of ladle-train and ladle-bn-study: one table says each
 * option's kind, range and the modes it applies to; parse() reads argv
 * through tools/cli.h's checked parsers and refuses unknown options,
 * malformed or out-of-range values, and options the chosen mode would
 * ignore. Tool code, included by the two programs.
 */
#ifndef LADLE_TOOLS_TRAIN_OPTS_H
#define LADLE_TOOLS_TRAIN_OPTS_H

#include <limits.h>
#include <stddef.h>

#include "tool.h"

#define EPOCHS_MAX 1000000
#define BATCH_MAX ((int64_t)1 << 30)
#define PIPE_MAX_REPLICAS 64
#define CROP_PAD_MAX 1024
#define CROP_PAD_DEFAULT 2 /* --augment's crop: 2 of 28 pixels, as for Fashion-MNIST */

typedef struct opts {
    const char *data;
    int epochs, steps, progress, bn, bn_group, D, Ph, Pw, F, C, adam, constant_lr, quiet;
    int model; /* MODEL_* */
    int stop_after; /* leave after this many epochs (an interruption), 0: never */
    int augment, crop_pad, flip; /* data augmentation (crop_pad: -1 until decided) */
    int64_t batch;
    int64_t test_limit; /* score on the first test_limit test images; 0: all */
    double lr, momentum, weight_decay;
    int bn_sync_index, dtype_index, device_index; /* choices, mapped below */
    ladle_bn_sync bn_sync;
    uint64_t seed;
    ladle_dtype dtype;
    ladle_device device;
    const char *checkpoint; /* a file, or a directory of epoch files (train_ckpt.h) */
    int resume;              /* RESUME_* */
    const char *resume_file; /* --resume FILE */
    int keep;                /* --keep: the epoch files a directory keeps */
    const char *summary; /* a file for one machine-readable line at the end */
    int64_t spatial[2];
    /* pipeline mode (pipe_style -1: off) */
    const char *pipeline;
    int pipe_style, pipe_stages, pipe_chunks, pipe_nrep, microbatches;
    int64_t pipe_rep[PIPE_MAX_REPLICAS];
    const char *timeline;
    int silent; /* not an option: train_run prints only failures (the study's runs) */
    unsigned char given[40]; /* given[i]: option i of the table was on the line */
} opts;

/* The modes an option applies to. */
#define M_LAYOUT 1u /* ladle-train over a data x spatial x fc layout */
#define M_PIPE 2u   /* ladle-train --pipeline */
#define M_STUDY 4u  /* ladle-bn-study */
#define M_TRAIN (M_LAYOUT | M_PIPE)
#define M_ALL (M_LAYOUT | M_PIPE | M_STUDY)

/* Kinds: f flag (sets 1), i int, l int64, u uint64, r real, t text, c
 * choice (an int index), s shape AxB (two int64), L list of int64, o a
 * flag with an optional value (the next word, unless it starts with '-'). */
typedef struct optdef {
    const char *name;
    char kind;
    unsigned modes;
    size_t at;     /* offsetof(opts, field) */
    double lo, hi; /* hi == -1: the number of ranks */
    unsigned open; /* CLI_OPEN_* of a real's range */
    const char *const *choices;
} optdef;

/* The models: LeNet-5 is a chain; the ResNets are graphs (ladle/models.h;
 * resnet8 is the test kind widened to 16, a small model for quick runs). */
enum { MODEL_LENET, MODEL_RESNET20, MODEL_RESNET18, MODEL_RESNET8, N_MODELS };
static const char *const model_names[] = {"lenet", "resnet20", "resnet18", "resnet8", NULL};
static const char *const model_titles[] = {"LeNet-5", "ResNet-20", "ResNet-18", "ResNet-8"};

static const char *const bn_sync_names[] = {"global", "local", "group", NULL};
static const char *const dtype_names[] = {"f32", "f64", NULL};
static const char *const device_names[] = {"cpu", "cuda", "guarded", NULL};
static const ladle_device device_of[] = {LADLE_CPU, LADLE_CUDA, LADLE_GUARDED};

#define O(field) offsetof(opts, field)
#define RANKS (-1.0)
/* clang-format off */
static const optdef optdefs[] = {
    {"--data",          't', M_ALL,    O(data),          0, 0, 0, NULL},
    {"--epochs",        'i', M_ALL,    O(epochs),        1, EPOCHS_MAX, 0, NULL},
    {"--steps",         'i', M_ALL,    O(steps),         1, INT_MAX, 0, NULL},
    {"--batch",         'l', M_ALL,    O(batch),         1, (double)BATCH_MAX, 0, NULL},
    {"--lr",            'r', M_ALL,    O(lr),            0, HUGE_VAL, CLI_OPEN_LO | CLI_OPEN_HI, NULL},
    {"--momentum",      'r', M_ALL,    O(momentum),      0, 1, CLI_OPEN_HI, NULL},
    {"--weight-decay",  'r', M_ALL,    O(weight_decay),  0, HUGE_VAL, CLI_OPEN_HI, NULL},
    {"--adam",          'f', M_ALL,    O(adam),          0, 0, 0, NULL},
    {"--constant-lr",   'f', M_ALL,    O(constant_lr),   0, 0, 0, NULL},
    {"--seed",          'u', M_ALL,    O(seed),          0, 0, 0, NULL},
    {"--dtype",         'c', M_ALL,    O(dtype_index),   0, 0, 0, dtype_names},
    {"--device",        'c', M_TRAIN,  O(device_index),  0, 0, 0, device_names},
    {"--model",         'c', M_LAYOUT | M_STUDY, O(model), 0, 0, 0, model_names},
    {"--bn",            'f', M_ALL,    O(bn),            0, 0, 0, NULL},
    {"--quiet",         'f', M_ALL,    O(quiet),         0, 0, 0, NULL},
    {"--test-limit",    'l', M_ALL,    O(test_limit),    1, (double)BATCH_MAX, 0, NULL},
    {"--progress",      'i', M_TRAIN,  O(progress),      1, INT_MAX, 0, NULL},
    {"--data-ways",     'i', M_LAYOUT, O(D),             1, RANKS, 0, NULL},
    {"--spatial",       's', M_LAYOUT, O(spatial),       1, RANKS, 0, NULL},
    {"--fc-ways",       'i', M_LAYOUT, O(F),             1, RANKS, 0, NULL},
    {"--channel-ways",  'i', M_LAYOUT, O(C),             1, RANKS, 0, NULL},
    {"--bn-sync",       'c', M_LAYOUT, O(bn_sync_index), 0, 0, 0, bn_sync_names},
    {"--bn-group",      'i', M_LAYOUT, O(bn_group),      1, RANKS, 0, NULL},
    {"--checkpoint",    't', M_LAYOUT, O(checkpoint),    0, 0, 0, NULL},
    {"--resume",        'o', M_LAYOUT, O(resume),        0, 0, 0, NULL},
    {"--keep",          'i', M_LAYOUT, O(keep),          1, INT_MAX, 0, NULL},
    {"--stop-after",    'i', M_LAYOUT, O(stop_after),    1, EPOCHS_MAX, 0, NULL},
    {"--summary",       't', M_LAYOUT, O(summary),       0, 0, 0, NULL},
    {"--augment",       'f', M_LAYOUT, O(augment),       0, 0, 0, NULL},
    {"--crop-pad",      'i', M_LAYOUT, O(crop_pad),      0, CROP_PAD_MAX, 0, NULL},
    {"--flip",          'f', M_LAYOUT, O(flip),          0, 0, 0, NULL},
    {"--pipeline",      't', M_PIPE,   O(pipeline),      0, 0, 0, NULL},
    {"--stages",        'i', M_PIPE,   O(pipe_stages),   1, LADLE_PIPE_MAX_STAGES, 0, NULL},
    {"--chunks",        'i', M_PIPE,   O(pipe_chunks),   1, 8, 0, NULL},
    {"--replicas",      'L', M_PIPE,   O(pipe_rep),      1, RANKS, 0, NULL},
    {"--microbatches",  'i', M_PIPE,   O(microbatches),  1, (double)BATCH_MAX, 0, NULL},
    {"--timeline",      't', M_PIPE,   O(timeline),      0, 0, 0, NULL},
};
/* clang-format on */
#undef O
#define N_OPTDEFS ((int)(sizeof optdefs / sizeof optdefs[0]))

/* What --resume asks for: nothing; the bare flag (the file --checkpoint
 * names); "latest" (the newest complete file of --checkpoint's directory);
 * a file of its own. */
enum { RESUME_NO, RESUME_BARE, RESUME_LATEST, RESUME_FILE };
#define KEEP_DEFAULT 2

static int me, world;
static const char *tool = "ladle-train"; /* the name messages start with */

static int bad(const char *why)
{
    if (me == 0)
        fprintf(stderr, "%s: %s (see --help)\n", tool, why);
    return 2;
}

static void defaults(opts *o)
{
    memset(o, 0, sizeof *o);
    o->data = LADLE_FASHION_MNIST_DIR;
    o->epochs = 3;
    o->batch = 64;
    o->lr = 0.03;
    o->momentum = 0.9;
    o->D = o->Ph = o->Pw = o->F = o->C = 1;
    o->spatial[0] = o->spatial[1] = 1;
    o->bn_group = 2;
    o->seed = 1;
    o->pipe_style = -1;
    o->pipe_chunks = 2;
    o->microbatches = 4;
    o->crop_pad = -1;
    o->keep = KEEP_DEFAULT;
}

/* --resume, bare or with its value v (NULL: bare). */
static void set_resume(const char *v, opts *o)
{
    o->resume = v == NULL                  ? RESUME_BARE
                : strcmp(v, "latest") == 0 ? RESUME_LATEST
                                           : RESUME_FILE;
    o->resume_file = o->resume == RESUME_FILE ? v : NULL;
}

/* Store argument v of option d into o. */
static int set_option(const optdef *d, const char *v, opts *o, char *why)
{
    char *at = (char *)o + d->at;
    double hi = d->hi == RANKS ? (double)world : d->hi;
    int n = 0;
    int64_t sh[LADLE_MAX_NDIM];
    switch (d->kind) {
    case 'i':
        return cli_int32(d->name, v, (int)d->lo, (int)hi, (int *)at, why);
    case 'l':
        return cli_int(d->name, v, (int64_t)d->lo, (int64_t)hi, (int64_t *)at, why);
    case 'u':
        return cli_u64(d->name, v, (uint64_t *)at, why);
    case 'r':
        return cli_real(d->name, v, d->lo, hi, d->open, (double *)at, why);
    case 'c':
        return cli_choice(d->name, v, d->choices, (int *)at, why);
    case 't':
        if (*v == '\0')
            return cli_fail(why, "%s needs a non-empty value", d->name);
        *(const char **)at = v;
        return 0;
    case 's':
        if (cli_shape(d->name, v, (int64_t)d->lo, (int64_t)hi, 2, &n, sh, why))
            return -1;
        if (n != 2)
            return cli_fail(why, "%s: '%s' needs two extents, such as 2x1", d->name, v);
        memcpy(at, sh, 2 * sizeof(int64_t));
        return 0;
    case 'L':
        if (cli_ints(d->name, v, (int64_t)d->lo, (int64_t)hi, (int64_t *)at,
                     PIPE_MAX_REPLICAS, &o->pipe_nrep, why))
            return -1;
        return 0;
    }
    return cli_fail(why, "%s: unknown kind", d->name);
}

static int given(const opts *o, const char *name)
{
    for (int i = 0; i < N_OPTDEFS; i++)
        if (strcmp(optdefs[i].name, name) == 0)
            return o->given[i];
    return 0;
}

/* The ranks a layout takes: D Ph Pw, or C^2 Ph Pw with channel ways (the
 * weight grid of a channel-split convolution; see docs/training.md). Each
 * factor is at most the number of ranks, so the product fits an int64. */
static int64_t layout_ranks64(const opts *o)
{
    int64_t tiles = o->spatial[0] * o->spatial[1];
    return o->C > 1 ? (int64_t)o->C * o->C * tiles : (int64_t)o->D * tiles;
}

static int layout_ranks(const opts *o) { return (int)layout_ranks64(o); }

/* --resume and --keep against --checkpoint (whether it names a file or a
 * directory is rank 0's to say, later: train_ckpt.h). */
static int check_checkpoint_options(const opts *o, char *why)
{
    if (o->resume == RESUME_BARE && o->checkpoint == NULL)
        return cli_fail(why, "--resume needs --checkpoint PATH (or --resume FILE)");
    if (o->resume == RESUME_LATEST && o->checkpoint == NULL)
        return cli_fail(why, "--resume latest needs --checkpoint DIR");
    if (given(o, "--keep") && o->checkpoint == NULL)
        return cli_fail(why, "--keep needs --checkpoint DIR");
    return 0;
}

/* Options that only make sense together, and the layout against the ranks. */
static int check_combinations(opts *o, unsigned mode, char *why)
{
    static const char *mode_name[] = {"", "a layout run", "--pipeline", "",
                                      "ladle-bn-study"};
    for (int i = 0; i < N_OPTDEFS; i++) {
        if (!o->given[i] || (optdefs[i].modes & mode))
            continue;
        if (mode == M_LAYOUT && optdefs[i].modes == M_PIPE)
            return cli_fail(why, "%s needs --pipeline", optdefs[i].name);
        return cli_fail(why, "%s does not apply to %s", optdefs[i].name, mode_name[mode]);
    }
    if (check_checkpoint_options(o, why))
        return -1;
    if (o->stop_after && o->stop_after >= o->epochs)
        return cli_fail(why,
                        "--stop-after %d must come before the last epoch (--epochs %d)",
                        o->stop_after, o->epochs);
    if (o->model != MODEL_LENET) {
        if (given(o, "--fc-ways"))
            return cli_fail(why, "--fc-ways splits LeNet-5's linear layers; a ResNet splits "
                                 "its channels (--channel-ways)");
        if (o->C > 1 && o->D > 1)
            return cli_fail(why, "--channel-ways does not mix with --data-ways");
        o->bn = 1; /* a ResNet's batch norms are part of it */
    } else if (given(o, "--channel-ways"))
        return cli_fail(why, "--channel-ways needs a ResNet (--model resnet20, ...)");
    if ((given(o, "--bn-sync") || given(o, "--bn-group")) && !o->bn)
        return cli_fail(why, "--bn-sync and --bn-group need --bn");
    if (given(o, "--bn-group") && o->bn_sync != LADLE_BN_SYNC_GROUP)
        return cli_fail(why, "--bn-group needs --bn-sync group");
    if (o->adam && given(o, "--momentum"))
        return cli_fail(why, "--momentum is SGD's; Adam keeps its own moments");
    if (mode == M_PIPE) {
        if (o->pipe_style < 0)
            return cli_fail(why,
                            "--pipeline: '%s' is not one of gpipe, 1f1b, zbh1, "
                            "interleaved, hybrid",
                            o->pipeline);
        if (given(o, "--chunks") && o->pipe_style != LADLE_PIPE_INTERLEAVED)
            return cli_fail(why, "--chunks needs --pipeline interleaved");
        if (given(o, "--replicas") && o->pipe_style != LADLE_PIPE_HYBRID)
            return cli_fail(why, "--replicas needs --pipeline hybrid");
        if (o->batch % o->microbatches != 0)
            return cli_fail(why, "a batch of %lld does not split into %d microbatches",
                            (long long)o->batch, o->microbatches);
        return 0;
    }
    int64_t ranks = layout_ranks64(o);
    if (mode == M_LAYOUT && ranks > world)
        return cli_fail(why, "the layout %d x %lldx%lld%s needs %lld ranks; there are %d",
                        o->C > 1 ? o->C : o->D, (long long)o->spatial[0],
                        (long long)o->spatial[1], o->C > 1 ? " (channels x spatial)" : "",
                        (long long)ranks, world);
    if (o->F > o->spatial[0] * o->spatial[1])
        return cli_fail(why, "--fc-ways %d is more than the %lld tiles of a batch block",
                        o->F, (long long)(o->spatial[0] * o->spatial[1]));
    if (o->batch < o->D)
        return cli_fail(why, "a batch of %lld cannot be split %d ways", (long long)o->batch,
                        o->D);
    return 0;
}

/* Read the option argv[*i] and its value, if it takes one (*i moves past
 * it): 0, or -1 with why. */
static int read_option(int argc, char **argv, int *i, opts *o, char *why)
{
    const char *a = argv[*i];
    int k = 0;
    while (k < N_OPTDEFS && strcmp(a, optdefs[k].name) != 0)
        k++;
    if (k == N_OPTDEFS)
        return cli_fail(why, "%s '%s'",
                        a[0] == '-' ? "unknown option" : "unexpected argument", a);
    const optdef *d = &optdefs[k];
    o->given[k] = 1;
    if (d->kind == 'f') {
        *(int *)((char *)o + d->at) = 1;
        return 0;
    }
    if (d->kind == 'o') { /* only --resume has an optional value */
        int has_value = *i + 1 < argc && argv[*i + 1][0] != '-';
        if (has_value && argv[*i + 1][0] == '\0')
            return cli_fail(why, "--resume needs a non-empty FILE, 'latest', or no value");
        set_resume(has_value ? argv[++*i] : NULL, o);
        return 0;
    }
    if (*i + 1 >= argc)
        return cli_fail(why, "%s needs a value", a);
    return set_option(d, argv[++*i], o, why);
}

/* Parse argv for a mode (M_LAYOUT for ladle-train, which becomes M_PIPE
 * with --pipeline; M_STUDY for ladle-bn-study). 0: go on; -1: --help or
 * --version answered; 2: refused, with the reason printed on rank 0. */
static int parse(int argc, char **argv, opts *o, unsigned mode, const char *name,
                 void (*help)(void))
{
    char why[CLI_WHY];
    tool = name;
    defaults(o);
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
            if (me == 0)
                help();
            return -1;
        }
        if (!strcmp(a, "--version")) {
            if (me == 0)
                cli_version(tool);
            return -1;
        }
        if (read_option(argc, argv, &i, o, why))
            return bad(why);
    }
    static const ladle_bn_sync syncs[] = {LADLE_BN_SYNC_GLOBAL, LADLE_BN_SYNC_LOCAL,
                                          LADLE_BN_SYNC_GROUP};
    o->bn_sync = syncs[o->bn_sync_index];
    o->dtype = o->dtype_index ? LADLE_F64 : LADLE_F32;
    o->device = device_of[o->device_index];
    /* --augment: a crop of CROP_PAD_DEFAULT and flips, unless --crop-pad
     * says otherwise; --crop-pad and --flip alone do only their part */
    if (o->crop_pad < 0)
        o->crop_pad = o->augment ? CROP_PAD_DEFAULT : 0;
    o->flip |= o->augment;
    o->Ph = (int)o->spatial[0];
    o->Pw = (int)o->spatial[1];
    if (o->pipeline) {
        ladle_pipe_style style = LADLE_PIPE_GPIPE;
        o->pipe_style = ladle_pipe_style_parse(o->pipeline, &style) == LADLE_OK ? (int)style : -1;
        if (mode == M_LAYOUT)
            mode = M_PIPE;
    }
    if (check_combinations(o, mode, why))
        return bad(why);
    return 0;
}

#endif /* LADLE_TOOLS_TRAIN_OPTS_H */
