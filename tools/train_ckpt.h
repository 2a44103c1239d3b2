/*
 * ladle-train's checkpoint directory: --checkpoint DIR keeps one file per
 * epoch, DIR/epoch-NNNNNN.ckpt (the epochs finished), the newest --keep of
 * them; --resume latest starts from the newest of them that verifies. Each
 * file is written to DIR/epoch-NNNNNN.ckpt.tmp and renamed into place once
 * complete (ladle_checkpoint_save), so a name of the first form is only
 * ever a whole file, and a job killed while saving leaves a .tmp that is
 * never taken for a checkpoint. Rank 0 looks at the directory and decides;
 * every rank gets its verdict. Tool code, included by train.h.
 */
#ifndef LADLE_TOOLS_TRAIN_CKPT_H
#define LADLE_TOOLS_TRAIN_CKPT_H

#include <dirent.h>
#include <errno.h>
#include <sys/stat.h>
#include <unistd.h>

#include "train_opts.h"

#define CKPT_PATH_MAX 4096

/* Where checkpoints go and which one a run starts from. */
typedef struct ckpt_plan {
    int dir;                  /* --checkpoint names a directory */
    char from[CKPT_PATH_MAX]; /* the file to resume from; "" to start afresh */
} ckpt_plan;

/* The epoch of a file name of a checkpoint directory: epoch-N.ckpt (tmp 0)
 * or epoch-N.ckpt.tmp (tmp 1), N of 1 to 9 digits; -1 for any other name. */
static int64_t ckpt_epoch_of(const char *name, int tmp)
{
    const char *tail = tmp ? ".ckpt.tmp" : ".ckpt";
    if (strncmp(name, "epoch-", 6) != 0)
        return -1;
    int64_t n = 0;
    int digits = 0;
    const char *p = name + 6;
    for (; *p >= '0' && *p <= '9' && digits < 10; p++, digits++)
        n = 10 * n + (*p - '0');
    return digits >= 1 && digits <= 9 && strcmp(p, tail) == 0 ? n : -1;
}

/* DIR/epoch-NNNNNN.ckpt (with .tmp where tmp) into buf, of CKPT_PATH_MAX
 * bytes: 0, or -1 where it does not fit. DIR's trailing slashes go. */
static int ckpt_file_name(const char *dir, int64_t epoch, int tmp, char *buf)
{
    size_t len = strlen(dir);
    while (len > 1 && dir[len - 1] == '/')
        len--;
    int n = snprintf(buf, CKPT_PATH_MAX, "%.*s%sepoch-%06lld.ckpt%s", (int)len, dir,
                     dir[len - 1] == '/' ? "" : "/", (long long)epoch, tmp ? ".tmp" : "");
    return n > 0 && n < CKPT_PATH_MAX ? 0 : -1;
}

/* Rank 0: is path a directory of checkpoints? A directory, or a name
 * ending in '/' (made here, one level, when it is missing). 1 yes, 0 a
 * file; -1 refused, with why. */
static int ckpt_dir_mode(const char *path, char *why)
{
    struct stat sb;
    size_t len = strlen(path);
    int slash = len > 0 && path[len - 1] == '/';
    if (stat(path, &sb) == 0) {
        if (S_ISDIR(sb.st_mode))
            return 1;
        if (slash)
            return cli_fail(why, "--checkpoint %s: not a directory", path);
        return 0;
    }
    if (errno == ENOTDIR)
        return cli_fail(why, "--checkpoint %s: not a directory (or a part of it is not)", path);
    if (!slash)
        return 0; /* a file to be: ckpt_prepare probes it */
    if (mkdir(path, 0777) != 0)
        return cli_fail(why, "--checkpoint: cannot create the directory %s: %s", path,
                        strerror(errno));
    return 1;
}

/* The combinations of --resume and --keep that need a directory, or a
 * file, once rank 0 has said which --checkpoint names. */
static int ckpt_check_mode(const opts *o, int dir, char *why)
{
    if (o->resume == RESUME_LATEST && !dir)
        return cli_fail(why,
                        "--resume latest needs --checkpoint DIR; %s is a file (a directory "
                        "exists or ends in '/')",
                        o->checkpoint);
    if (given(o, "--keep") && !dir)
        return cli_fail(why, "--keep needs --checkpoint DIR; %s is a file", o->checkpoint);
    if (o->resume == RESUME_BARE && dir)
        return cli_fail(why,
                        "--resume without a value resumes from a file; %s is a directory: "
                        "use --resume latest",
                        o->checkpoint);
    return 0;
}

/* The epochs of the files named epoch-N.ckpt (tmp 0) or epoch-N.ckpt.tmp
 * (tmp 1) in dir, newest first, in *out (the caller frees it); their count,
 * or -1 with why (dir unreadable, or no memory). */
static int ckpt_list(const char *dir, int tmp, int64_t **out, char *why)
{
    DIR *d = opendir(dir);
    if (d == NULL)
        return cli_fail(why, "cannot read the directory %s: %s", dir, strerror(errno));
    int64_t *e = NULL;
    int n = 0, cap = 0;
    for (struct dirent *de; (de = readdir(d)) != NULL;) {
        int64_t k = ckpt_epoch_of(de->d_name, tmp);
        if (k < 0)
            continue;
        if (n == cap) {
            int64_t *grown = realloc(e, (size_t)(cap = 2 * cap + 8) * sizeof *e);
            if (grown == NULL) {
                free(e);
                closedir(d);
                return cli_fail(why, "no memory to list %s", dir);
            }
            e = grown;
        }
        int at = n++; /* insertion: newest first */
        for (; at > 0 && e[at - 1] < k; at--)
            e[at] = e[at - 1];
        e[at] = k;
    }
    closedir(d);
    *out = e;
    return n;
}

/* Rank 0: the newest file of dir that verifies, into from ("" where none);
 * a damaged one is skipped with a line naming it, as is an unfinished write
 * newer than the one taken. 0, or -1 with why. */
static int ckpt_find_latest(const char *dir, char *from, char *why)
{
    int64_t *e = NULL, *t = NULL, meta[LADLE_CHECKPOINT_MAX_META];
    int n = ckpt_list(dir, 0, &e, why), nt = n < 0 ? -1 : ckpt_list(dir, 1, &t, why);
    int64_t taken = -1;
    from[0] = '\0';
    for (int i = 0; i < n && taken < 0; i++) {
        int nmeta = 0;
        if (ckpt_file_name(dir, e[i], 0, from))
            continue;
        if (ladle_checkpoint_read_meta(from, ladle_comm_of(MPI_COMM_SELF),
                                       LADLE_CHECKPOINT_MAX_META, meta, &nmeta) == LADLE_OK)
            taken = e[i];
        else
            fprintf(stderr, "%s: skipping %s: %s\n", tool, from, ladle_error_message());
    }
    if (taken < 0)
        from[0] = '\0';
    for (int i = 0; i < nt && t[i] > taken; i++) {
        char name[CKPT_PATH_MAX];
        if (ckpt_file_name(dir, t[i], 1, name) == 0)
            fprintf(stderr, "%s: skipping %s: a write that never finished\n", tool, name);
    }
    free(e);
    free(t);
    return n < 0 || nt < 0 ? -1 : 0;
}

/* The names that are copied into CKPT_PATH_MAX buffers fit (a longer one
 * would be cut short there and name another file). 0, or 2 with why. */
static int ckpt_check_lengths(const opts *o, char *why)
{
    const char *opt[2] = {"--checkpoint", "--resume"};
    const char *name[2] = {o->checkpoint, o->resume == RESUME_FILE ? o->resume_file : NULL};
    for (int i = 0; i < 2; i++)
        if (name[i] != NULL && strlen(name[i]) >= CKPT_PATH_MAX) {
            cli_fail(why, "%s: the name is %zu bytes long, above %d", opt[i], strlen(name[i]),
                     CKPT_PATH_MAX - 1);
            return 2;
        }
    return 0;
}

/* Rank 0's part of ckpt_prepare: the mode, the checks and, for --resume
 * latest, the file chosen. 0, or 2 with why. */
static int ckpt_decide(const opts *o, ckpt_plan *p, char *why)
{
    char longest[CKPT_PATH_MAX];
    int dir = ckpt_dir_mode(o->checkpoint, why);
    if (dir < 0)
        return 2;
    p->dir = dir;
    if (dir && ckpt_file_name(o->checkpoint, EPOCHS_MAX, 1, longest)) {
        cli_fail(why, "--checkpoint: the directory's name is too long");
        return 2;
    }
    if (ckpt_check_mode(o, dir, why))
        return 2;
    if (o->resume == RESUME_LATEST && ckpt_find_latest(o->checkpoint, p->from, why))
        return 2;
    return 0;
}

/* Where the checkpoint after `epochs` finished epochs goes, into buf. */
static void ckpt_target(const opts *o, const ckpt_plan *p, int64_t epochs, char *buf)
{
    if (!p->dir || ckpt_file_name(o->checkpoint, epochs, 0, buf) != 0)
        snprintf(buf, CKPT_PATH_MAX, "%s", o->checkpoint);
}

/* Before any work (collective): what --checkpoint names, a directory or a
 * file, that it can be written, and the file to resume from (p->from,
 * "" for none). 0, or 2 on every rank with the reason printed. */
static int ckpt_prepare(const opts *o, ckpt_plan *p)
{
    char why[CLI_WHY] = "", probe[CKPT_PATH_MAX];
    int v[2] = {0, 0}; /* the verdict, the mode */
    memset(p, 0, sizeof *p);
    if (me == 0) {
        v[0] = ckpt_check_lengths(o, why);
        if (v[0] == 0 && o->checkpoint)
            v[0] = ckpt_decide(o, p, why);
        v[1] = p->dir;
        if (v[0])
            fprintf(stderr, "%s: %s\n", tool, why);
    }
    MPI_Bcast(v, 2, MPI_INT, 0, MPI_COMM_WORLD);
    if (v[0])
        return v[0];
    p->dir = v[1];
    if (o->checkpoint) {
        /* in a directory, the name of its first file stands for them all
         * (the name fits: ckpt_decide checked the longest) */
        ckpt_target(o, p, 1, probe);
        if (tool_failed(tool,
                        ladle_checkpoint_check_path(probe, ladle_comm_of(MPI_COMM_WORLD)),
                        "--checkpoint"))
            return 2;
    }
    if (o->resume == RESUME_BARE)
        snprintf(p->from, sizeof p->from, "%s", o->checkpoint);
    else if (o->resume == RESUME_FILE)
        snprintf(p->from, sizeof p->from, "%s", o->resume_file);
    MPI_Bcast(p->from, CKPT_PATH_MAX, MPI_CHAR, 0, MPI_COMM_WORLD);
    if (o->resume == RESUME_LATEST && p->from[0] == '\0' && me == 0)
        printf("no checkpoint in %s yet: starting from the beginning\n", o->checkpoint);
    return 0;
}

/* Rank 0, after the file of `epochs` is in place: remove the files older
 * than the newest --keep at or before it, and unfinished writes at or
 * before it. Files of later epochs (a damaged one skipped on resuming) are
 * left to be replaced. A file that cannot be removed is said, not fatal. */
static void ckpt_prune(const opts *o, int64_t epochs)
{
    char why[CLI_WHY], name[CKPT_PATH_MAX];
    for (int tmp = 0; tmp < 2; tmp++) {
        int64_t *e = NULL;
        int n = ckpt_list(o->checkpoint, tmp, &e, why), kept = 0;
        if (n < 0)
            fprintf(stderr, "%s: %s\n", tool, why);
        for (int i = 0; i < n; i++) {
            if (e[i] > epochs || (tmp == 0 && kept++ < o->keep))
                continue;
            if (ckpt_file_name(o->checkpoint, e[i], tmp, name) == 0 && unlink(name) != 0)
                fprintf(stderr, "%s: cannot remove %s: %s\n", tool, name, strerror(errno));
        }
        free(e);
    }
}

#endif /* LADLE_TOOLS_TRAIN_CKPT_H */
