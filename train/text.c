/* Character-level text corpora (see ladle/text.h). */
#include <dirent.h>
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "src/core/backend.h"
#include "train/grow.h"

struct ladle_text {
    int64_t vocab;
    int16_t byte_of[256]; /* id -> byte */
    int16_t id_of[256];   /* byte -> id, -1 when absent */
    int64_t *tok[2];      /* the splits' token ids */
    int64_t len[2], records[2];
    int files;
    /* host rows a batch is decoded into before ladle_tensor_write: a cache
     * grown to the largest batch asked for, kept from call to call */
    int64_t *stage;
    size_t stage_cap;
};

void ladle_text_desc_init(ladle_text_desc *d)
{
    if (!LADLE_DESC_START(d))
        return;
    d->val_every = 10;
}

void ladle_text_options_init(ladle_text_options *o) { ladle_text_desc_init(o); }

/* Is the line [s, s + n) (without its newline) blank? */
static int blank(const char *s, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (s[i] != ' ' && s[i] != '\t' && s[i] != '\r')
            return 0;
    return 1;
}

typedef struct cutter {
    ladle__bytes *out[2];
    int64_t val_every, record, kept[2];
} cutter;

/* Close the record [s, s + n) (whole lines, the last maybe without its
 * newline): blank records are dropped. */
static int emit(cutter *c, const char *s, size_t n, const char *sep)
{
    size_t k = 0;
    while (k < n && (s[k] == ' ' || s[k] == '\t' || s[k] == '\r' || s[k] == '\n'))
        k++;
    if (k == n)
        return 1;
    int which = c->val_every > 0 && c->record % c->val_every == c->val_every - 1;
    ladle__bytes *b = c->out[which];
    c->record++;
    c->kept[which]++;
    return ladle__bytes_put(b, s, n) &&
           (n == 0 || s[n - 1] == '\n' || ladle__bytes_put(b, "\n", 1)) &&
           ladle__bytes_put(b, sep, strlen(sep));
}

/* Cut one file's text into records (fortune format or paragraphs). */
static int cut(cutter *c, const char *s, size_t n)
{
    int fortune = 0;
    for (size_t i = 0; i < n; i++)
        if (s[i] == '%' && (i == 0 || s[i - 1] == '\n') &&
            (i + 1 == n || s[i + 1] == '\n' ||
             (s[i + 1] == '\r' && (i + 2 == n || s[i + 2] == '\n')))) {
            fortune = 1;
            break;
        }
    size_t start = 0, i = 0;
    while (i < n) {
        size_t e = i;
        while (e < n && s[e] != '\n')
            e++;
        size_t next = e < n ? e + 1 : e;
        size_t len = e - i;
        if (len > 0 && s[i + len - 1] == '\r')
            len--;
        int boundary = fortune ? (len == 1 && s[i] == '%') : blank(s + i, len);
        if (boundary) {
            if (!emit(c, s + start, i - start, fortune ? "%\n" : "\n"))
                return 0;
            start = next;
        }
        i = next;
    }
    return emit(c, s + start, n - start, fortune ? "%\n" : "\n");
}

static int skipped(const char *name)
{
    size_t n = strlen(name);
    return name[0] == '.' || (n >= 4 && strcmp(name + n - 4, ".dat") == 0) ||
           (n >= 3 && strcmp(name + n - 3, ".u8") == 0);
}

static int by_name(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* path as a corpus of one file: *names a list of its one path. */
static ladle_status single_file(const char *path, char ***names, int *count,
                                const char *func)
{
    char **v = ladle__calloc(1, sizeof *v);
    if (v == NULL || (v[0] = ladle__calloc(strlen(path) + 1, 1)) == NULL) {
        ladle__free(v);
        return ladle__raise(LADLE_ERR_ALLOC, func, "no memory for a path");
    }
    strcpy(v[0], path);
    *names = v;
    *count = 1;
    return LADLE_OK;
}

/* The corpus files of path: itself, or a directory's files sorted. */
static ladle_status list_files(const char *path, char ***names, int *count,
                               const char *func)
{
    ladle_status st = LADLE_OK;
    struct stat sb;
    char err[128];
    DIR *d = NULL;
    char **v = NULL;
    int n = 0, cap = 0;
    if (stat(path, &sb) != 0)
        return ladle__raise(LADLE_ERR_IO, func, "the corpus %s: %s", path,
                            ladle__strerror(errno, err, sizeof err));
    if (!S_ISDIR(sb.st_mode))
        return single_file(path, names, count, func);
    d = opendir(path);
    if (d == NULL)
        return ladle__raise(LADLE_ERR_IO, func, "the corpus directory %s: %s", path,
                            ladle__strerror(errno, err, sizeof err));
    for (struct dirent *e; (e = readdir(d)) != NULL;) {
        if (skipped(e->d_name))
            continue;
        size_t len = strlen(path) + strlen(e->d_name) + 2;
        char *full = ladle__calloc(len, 1);
        LADLE_CHECK(full != NULL, LADLE_ERR_ALLOC, "no memory for a path");
        snprintf(full, len, "%s/%s", path, e->d_name);
        if (lstat(full, &sb) != 0 || !S_ISREG(sb.st_mode)) {
            ladle__free(full);
            continue;
        }
        char **nv = ladle__grow_int(v, n, n + 1, &cap, sizeof *v, 64);
        if (nv == NULL) {
            ladle__free(full);
            LADLE_CHECK(0, LADLE_ERR_ALLOC, "no memory for %d paths", n + 1);
        }
        v = nv;
        v[n++] = full;
    }
    LADLE_CHECK(n > 0, LADLE_ERR_IO,
                "the corpus directory %s holds no text file (regular files, not hidden, "
                "not .dat or .u8)",
                path);
    qsort(v, (size_t)n, sizeof *v, by_name);
    closedir(d);
    *names = v;
    *count = n;
    return LADLE_OK;
fail:
    if (d)
        closedir(d);
    for (int k = 0; k < n; k++)
        ladle__free(v[k]);
    ladle__free(v);
    return st;
}

/* Read the count files names in order, each a text file (no NUL byte),
 * and cut them into records through c, at most LADLE_TEXT_MAX_BYTES in
 * all. Errors are raised in the name of func, the public entry point. */
static ladle_status read_records(char **names, int count, cutter *c, const char *func)
{
    ladle_status st = LADLE_OK;
    char *data = NULL;
    int64_t total = 0;
    for (int f = 0; f < count; f++) {
        size_t size = 0;
        LADLE_CALL(ladle__read_file(func, names[f], LADLE_TEXT_MAX_BYTES - total, &data,
                                    &size));
        total += (int64_t)size;
        const char *nul = memchr(data, '\0', size);
        if (nul != NULL) {
            st = ladle__raise(LADLE_ERR_IO, func,
                              "%s holds a NUL byte at offset %lld: not a text file", names[f],
                              (long long)(nul - data));
            goto fail;
        }
        if (!cut(c, data, size)) {
            st = ladle__raise(LADLE_ERR_ALLOC, func, "no memory for the corpus");
            goto fail;
        }
        ladle__free(data);
        data = NULL;
    }
fail:
    ladle__free(data);
    return st;
}

/* The records cut from the corpus path: some, some kept for training and,
 * where every val_every-th is held out, some for validation. Raised in
 * the name of func. */
static ladle_status check_records(const cutter *c, const char *path, int64_t val_every,
                                  const char *func)
{
    if (c->record <= 0)
        return ladle__raise(LADLE_ERR_IO, func,
                            "the corpus %s holds no record (only blank text)", path);
    if (c->kept[0] <= 0)
        return ladle__raise(LADLE_ERR_IO, func,
                            "the corpus %s has %lld record%s, all held out for validation",
                            path, (long long)c->record, c->record > 1 ? "s" : "");
    if (val_every != 0 && c->kept[1] <= 0)
        return ladle__raise(
            LADLE_ERR_IO, func,
            "the corpus %s has %lld record%s: holding out every %lld-th leaves none for "
            "validation",
            path, (long long)c->record, c->record > 1 ? "s" : "", (long long)val_every);
    return LADLE_OK;
}

/* The vocabulary of x: the bytes seen in either split, numbered in byte
 * order. */
static void build_vocab(ladle_text *x, const ladle__bytes buf[2])
{
    int seen[256] = {0};
    for (int s = 0; s < 2; s++)
        for (size_t i = 0; i < buf[s].size; i++)
            seen[(unsigned char)buf[s].data[i]] = 1;
    for (int b = 0; b < 256; b++) {
        x->id_of[b] = -1;
        if (seen[b]) {
            x->id_of[b] = (int16_t)x->vocab;
            x->byte_of[x->vocab++] = (int16_t)b;
        }
    }
}

/* Each split's bytes as token ids under x's vocabulary. Raised in the name
 * of func. */
static ladle_status tokenize(ladle_text *x, const ladle__bytes buf[2], const int64_t kept[2],
                             const char *func)
{
    for (int s = 0; s < 2; s++) {
        x->len[s] = (int64_t)buf[s].size;
        x->records[s] = kept[s];
        x->tok[s] = ladle__calloc(buf[s].size ? buf[s].size : 1, sizeof(int64_t));
        if (x->tok[s] == NULL)
            return ladle__raise(LADLE_ERR_ALLOC, func, "no memory for %zu tokens",
                                buf[s].size);
        for (size_t i = 0; i < buf[s].size; i++)
            x->tok[s][i] = x->id_of[(unsigned char)buf[s].data[i]];
    }
    return LADLE_OK;
}

ladle_status ladle_text_load(const char *path, const ladle_text_desc *o, ladle_text **t)
{
    ladle_status st = LADLE_OK;
    ladle_text_desc def;
    char **names = NULL;
    int count = 0;
    ladle__bytes buf[2] = {{0}, {0}};
    ladle_text *x = NULL;
    LADLE_NOT_NULL(path);
    LADLE_NOT_NULL(t);
    *t = NULL;
    if (o == NULL) {
        ladle_text_desc_init(&def);
        o = &def;
    }
    LADLE_CHECK_SIZE(o);
    LADLE_CHECK(o->val_every >= 0 && o->val_every <= (1 << 20), LADLE_ERR_ARG,
                "val_every %lld is outside 0 .. 2^20", (long long)o->val_every);
    LADLE_CALL(list_files(path, &names, &count, __func__));
    cutter c = {{&buf[0], &buf[1]}, o->val_every, 0, {0, 0}};
    LADLE_CALL(read_records(names, count, &c, __func__));
    LADLE_CALL(check_records(&c, path, o->val_every, __func__));
    x = ladle__calloc(1, sizeof *x);
    LADLE_CHECK(x != NULL, LADLE_ERR_ALLOC, "no memory for a corpus");
    x->files = count;
    build_vocab(x, buf);
    LADLE_CALL(tokenize(x, buf, c.kept, __func__));
    *t = x;
    x = NULL;
fail:
    ladle_text_destroy(&x);
    for (int s = 0; s < 2; s++)
        ladle__free(buf[s].data);
    for (int k = 0; k < count; k++)
        ladle__free(names[k]);
    ladle__free(names);
    return st;
}

ladle_status ladle_text_destroy(ladle_text **t)
{
    if (t == NULL || *t == NULL)
        return LADLE_OK;
    ladle__free((*t)->tok[0]);
    ladle__free((*t)->tok[1]);
    ladle__free((*t)->stage);
    ladle__free(*t);
    *t = NULL;
    return LADLE_OK;
}

int64_t ladle_text_vocab(const ladle_text *t) { return t ? t->vocab : 0; }
int ladle_text_files(const ladle_text *t) { return t ? t->files : 0; }

int ladle_text_byte(const ladle_text *t, int64_t id)
{
    return t && id >= 0 && id < t->vocab ? t->byte_of[id] : -1;
}

int64_t ladle_text_id(const ladle_text *t, int b)
{
    return t && b >= 0 && b < 256 ? t->id_of[b] : -1;
}

static int split_ok(ladle_text_split s)
{
    return s == LADLE_TEXT_TRAIN || s == LADLE_TEXT_VAL;
}

int64_t ladle_text_length(const ladle_text *t, ladle_text_split s)
{
    return t && split_ok(s) ? t->len[s] : 0;
}

int64_t ladle_text_records(const ladle_text *t, ladle_text_split s)
{
    return t && split_ok(s) ? t->records[s] : 0;
}

const int64_t *ladle_text_tokens(const ladle_text *t, ladle_text_split s)
{
    return t && split_ok(s) ? t->tok[s] : NULL;
}

int64_t ladle_text_windows(const ladle_text *t, ladle_text_split s, int64_t T)
{
    if (t == NULL || !split_ok(s) || T < 1 || t->len[s] < 2)
        return 0;
    return (t->len[s] - 1) / T;
}

/* x and y: i64, n x T, contiguous, the same shape; the stage holds 2 n T. */
static ladle_status rows_check(ladle_text *t, ladle_text_split s, const ladle_tensor *x,
                               const ladle_tensor *y, int64_t *n, int64_t *T,
                               const char *func)
{
    if (t == NULL || x == NULL || y == NULL)
        return ladle__raise(LADLE_ERR_NULL, func, "%s is NULL",
                            t == NULL   ? "t"
                            : x == NULL ? "x"
                                        : "y");
    if (!split_ok(s))
        return ladle__raise(LADLE_ERR_ARG, func,
                            "split %d is neither training nor validation", (int)s);
    if (x->dtype != LADLE_I64 || y->dtype != LADLE_I64)
        return ladle__raise(LADLE_ERR_DTYPE, func, "x and y must be i64, not %s and %s",
                            ladle_dtype_name(x->dtype), ladle_dtype_name(y->dtype));
    if (x->ndim != 2 || y->ndim != 2 || x->shape[0] != y->shape[0] ||
        x->shape[1] != y->shape[1] || !ladle_tensor_is_contiguous(x) ||
        !ladle_tensor_is_contiguous(y))
        return ladle__raise(LADLE_ERR_SHAPE, func,
                            "x and y must be contiguous n x T tensors of one shape");
    *n = x->shape[0];
    *T = x->shape[1];
    size_t need = (size_t)(*n * *T + *n); /* the rows, then the starts */
    if (need > t->stage_cap) {
        int64_t *p = ladle__realloc(t->stage, need * sizeof(int64_t));
        if (p == NULL)
            return ladle__raise(LADLE_ERR_ALLOC, func, "no memory for %lld x %lld tokens",
                                (long long)*n, (long long)*T);
        t->stage = p;
        t->stage_cap = need;
    }
    return LADLE_OK;
}

/* The rows of x, then of y, through the stage: row k from position
 * starts[k] of split s (x) or one on (y); a negative start gives x 0, y -1.
 * starts lies in the stage after its n T rows. */
static ladle_status write_rows(ladle_text *t, ladle_tensor *x, ladle_tensor *y,
                               const int64_t *starts, int64_t n, int64_t T,
                               ladle_text_split s)
{
    ladle_status st = LADLE_OK;
    const int64_t *tok = t->tok[s];
    for (int pass = 0; pass < 2; pass++) {
        for (int64_t k = 0; k < n; k++) {
            int64_t *r = t->stage + k * T;
            if (starts[k] < 0)
                for (int64_t i = 0; i < T; i++)
                    r[i] = pass ? -1 : 0;
            else
                memcpy(r, tok + starts[k] + pass, (size_t)T * sizeof *r);
        }
        LADLE_CALL(ladle_tensor_write(pass ? y : x, t->stage));
    }
fail:
    return st;
}

ladle_status ladle_text_batch(ladle_text *t, ladle_text_split s, const ladle_batch_desc *d,
                              int64_t step, ladle_tensor *x, ladle_tensor *y)
{
    ladle_status st = LADLE_OK;
    int64_t n = 0, T = 0;
    LADLE_NOT_NULL(d);
    LADLE_CHECK_SIZE(d);
    LADLE_CHECK(d->row_off == 0 && d->col_off == 0 && d->crop_pad == 0 && d->flip == 0,
                LADLE_ERR_ARG,
                "row_off %lld, col_off %lld, crop_pad %lld, flip %d: a text batch has no "
                "image fields (they must be 0)",
                (long long)d->row_off, (long long)d->col_off, (long long)d->crop_pad,
                d->flip);
    uint64_t seed = d->seed;
    int64_t batch = d->batch, offset = d->offset;
    LADLE_CALL(rows_check(t, s, x, y, &n, &T, __func__));
    LADLE_CHECK(step >= 0 && offset >= 0 && batch >= 1, LADLE_ERR_ARG,
                "step %lld, batch %lld, offset %lld: a negative position or an empty batch",
                (long long)step, (long long)batch, (long long)offset);
    LADLE_CHECK(offset <= batch - n, LADLE_ERR_ARG,
                "rows %lld .. %lld are past the batch of %lld", (long long)offset,
                (long long)(offset + n - 1), (long long)batch);
    LADLE_CHECK(t->len[s] >= T + 1, LADLE_ERR_ARG,
                "the %s split has %lld tokens, fewer than a window of %lld and its target",
                s ? "validation" : "training", (long long)t->len[s], (long long)T);
    int64_t span = t->len[s] - T, *starts = t->stage + n * T;
    for (int64_t k = 0; k < n; k++) {
        double u =
            0.5 *
            (ladle__random_uniform(seed, (uint64_t)step, (uint64_t)(offset + k)) + 1.0);
        int64_t p = (int64_t)(u * (double)span);
        starts[k] = p < span ? p : span - 1;
    }
    st = write_rows(t, x, y, starts, n, T, s);
fail:
    return st;
}

ladle_status ladle_text_eval_batch(ladle_text *t, ladle_text_split s, int64_t first,
                                   ladle_tensor *x, ladle_tensor *y)
{
    ladle_status st = LADLE_OK;
    int64_t n = 0, T = 0;
    LADLE_CALL(rows_check(t, s, x, y, &n, &T, __func__));
    int64_t w = ladle_text_windows(t, s, T);
    LADLE_CHECK(first >= 0 && first <= w, LADLE_ERR_ARG,
                "window %lld is outside the %lld windows of %lld tokens", (long long)first,
                (long long)w, (long long)T);
    int64_t *starts = t->stage + n * T;
    for (int64_t k = 0; k < n; k++)
        starts[k] = first + k < w ? (first + k) * T : -1;
    st = write_rows(t, x, y, starts, n, T, s);
fail:
    return st;
}

ladle_status ladle_text_bigram(const ladle_text *t, double alpha, double *train_nll,
                               double *val_nll)
{
    ladle_status st = LADLE_OK;
    double *count = NULL, *row = NULL;
    LADLE_NOT_NULL(t);
    LADLE_CHECK(alpha > 0 && isfinite(alpha), LADLE_ERR_ARG,
                "alpha %g must be positive and finite", alpha);
    int64_t V = t->vocab;
    count = ladle__calloc((size_t)(V * V), sizeof *count);
    row = ladle__calloc((size_t)V, sizeof *row);
    LADLE_CHECK(count != NULL && row != NULL, LADLE_ERR_ALLOC,
                "no memory for %lld^2 counts", (long long)V);
    const int64_t *a = t->tok[LADLE_TEXT_TRAIN];
    for (int64_t i = 1; i < t->len[LADLE_TEXT_TRAIN]; i++) {
        count[a[i - 1] * V + a[i]] += 1;
        row[a[i - 1]] += 1;
    }
    double *out[2] = {train_nll, val_nll};
    for (int s = 0; s < 2; s++) {
        if (out[s] == NULL)
            continue;
        const int64_t *v = t->tok[s];
        double sum = 0;
        for (int64_t i = 1; i < t->len[s]; i++)
            sum -= log((count[v[i - 1] * V + v[i]] + alpha) /
                       (row[v[i - 1]] + alpha * (double)V));
        *out[s] = t->len[s] > 1 ? sum / (double)(t->len[s] - 1) : 0.0;
    }
fail:
    ladle__free(count);
    ladle__free(row);
    return st;
}
