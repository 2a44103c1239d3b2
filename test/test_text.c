/*
 * The character-level text corpus (ladle/text.h): records cut from fortune
 * files and paragraphs, the every-k-th hold-out, the byte vocabulary, the
 * windows of random and evaluation batches, the bigram baseline on a corpus
 * small enough to count by hand, and every refusal. Expected texts and
 * numbers are written out here from the files the test writes.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "harness.h"
#include "ladle/text.h"

static char dir[64];

/* ladle_text_batch of rows offset.. of batch `step` (global batch `batch`)
 * under seed. */
static ladle_status tbatch(ladle_text *t, ladle_text_split s, uint64_t seed, int64_t step,
                           int64_t batch, int64_t offset, ladle_tensor *x, ladle_tensor *y)
{
    ladle_batch_desc d;
    ladle_batch_desc_init(&d, seed, batch);
    d.offset = offset;
    return ladle_text_batch(t, s, &d, step, x, y);
}

static void write_file(const char *name, const char *text, size_t n)
{
    char path[160];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    FILE *f = fopen(path, "wb");
    LT_ASSERT(f != NULL, "cannot write %s", path);
    LT_ASSERT(fwrite(text, 1, n, f) == n, "short write to %s", path);
    fclose(f);
}

static void fresh_dir(void)
{
    snprintf(dir, sizeof dir, "/tmp/ladle-text-%d-XXXXXX", lt_rank);
    LT_ASSERT(mkdtemp(dir) != NULL, "mkdtemp");
}

static void remove_dir(void)
{
    char cmd[96];
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    LT_ASSERT(system(cmd) == 0, "%s", cmd);
}

/* The split's text, decoded through the vocabulary. */
static char *decode(const ladle_text *t, ladle_text_split s)
{
    int64_t n = ladle_text_length(t, s);
    const int64_t *tok = ladle_text_tokens(t, s);
    char *out = calloc((size_t)n + 1, 1);
    for (int64_t i = 0; i < n; i++)
        out[i] = (char)ladle_text_byte(t, tok[i]);
    return out;
}

/* The corpus in dir, every val_every-th record for validation. */
static ladle_text *load(int64_t val_every)
{
    ladle_text_desc o;
    ladle_text_desc_init(&o);
    o.val_every = val_every;
    ladle_text *t = NULL;
    LT_OK(ladle_text_load(dir, &o, &t));
    return t;
}

/* A fresh dir holding one file, f, of the n bytes of text, loaded. */
static ladle_text *single_file(const char *text, size_t n, int64_t val_every)
{
    fresh_dir();
    write_file("f", text, n);
    return load(val_every);
}

/* The corpus destroyed and its dir removed. */
static void done(ladle_text **t)
{
    ladle_text_destroy(t);
    remove_dir();
}

/* Two files, one of each format, and the files a directory read skips. */
static ladle_text *two_files(int64_t val_every)
{
    write_file("b", "one\n%\ntwo\nlines\n%\n%\nthree\n", 26);
    write_file("a", "p1 l1\np1 l2\n\n\np2\n", 17);
    write_file("a.dat", "\0\1\2", 3);
    write_file(".hidden", "never read\n", 11);
    char target[160], link[160];
    snprintf(target, sizeof target, "%s/b", dir);
    snprintf(link, sizeof link, "%s/c", dir);
    unlink(link);
    LT_ASSERT(symlink(target, link) == 0, "symlink");
    return load(val_every);
}

/* Records in file-name order: a's paragraphs "p1 l1\np1 l2\n", "p2\n"; b's
 * fortunes "one\n", "two\nlines\n", "three\n" (the empty one between two
 * "%" lines dropped). Every 2nd held out: records 1 and 3. */
START_TEST(records_and_splits)
{
    fresh_dir();
    ladle_text *t = two_files(2);
    char *train = decode(t, LADLE_TEXT_TRAIN), *val = decode(t, LADLE_TEXT_VAL);
    const char *want_train = "p1 l1\np1 l2\n\none\n%\nthree\n%\n",
               *want_val = "p2\n\ntwo\nlines\n%\n";
    LT_ASSERT(strcmp(train, want_train) == 0, "training text '%s'", train);
    LT_ASSERT(strcmp(val, want_val) == 0, "validation text '%s'", val);
    LT_ASSERT(ladle_text_files(t) == 2, "%d files read (a and b only)",
              ladle_text_files(t));
    LT_ASSERT(ladle_text_records(t, LADLE_TEXT_TRAIN) == 3 &&
                  ladle_text_records(t, LADLE_TEXT_VAL) == 2,
              "records %lld + %lld", (long long)ladle_text_records(t, LADLE_TEXT_TRAIN),
              (long long)ladle_text_records(t, LADLE_TEXT_VAL));
    /* the vocabulary: the distinct bytes of both texts, sorted */
    const char *bytes = "\n %12ehilnoprstw";
    int64_t V = (int64_t)strlen(bytes);
    LT_ASSERT(ladle_text_vocab(t) == V, "vocabulary %lld, expected %lld",
              (long long)ladle_text_vocab(t), (long long)V);
    for (int64_t k = 0; k < V; k++) {
        LT_ASSERT(ladle_text_byte(t, k) == (unsigned char)bytes[k], "id %lld is byte %d",
                  (long long)k, ladle_text_byte(t, k));
        LT_ASSERT(ladle_text_id(t, (unsigned char)bytes[k]) == k, "byte %d", bytes[k]);
    }
    LT_ASSERT(ladle_text_id(t, 'z') == -1 && ladle_text_byte(t, V) == -1 &&
                  ladle_text_byte(t, -1) == -1 && ladle_text_id(t, 256) == -1,
              "outside the vocabulary");
    free(train);
    free(val);
    ladle_text_destroy(&t);
    /* no hold-out: every record trains, validation is empty */
    t = two_files(0);
    train = decode(t, LADLE_TEXT_TRAIN);
    LT_ASSERT(strcmp(train, "p1 l1\np1 l2\n\np2\n\none\n%\ntwo\nlines\n%\nthree\n%\n") == 0,
              "training text '%s'", train);
    LT_ASSERT(ladle_text_length(t, LADLE_TEXT_VAL) == 0 &&
                  ladle_text_windows(t, LADLE_TEXT_VAL, 4) == 0,
              "an empty validation split");
    free(train);
    ladle_text_destroy(&t);
    LT_OK(ladle_text_destroy(&t));
    LT_OK(ladle_text_destroy(NULL));
    LT_ASSERT(ladle_text_vocab(NULL) == 0 &&
                  ladle_text_length(NULL, LADLE_TEXT_TRAIN) == 0 &&
                  ladle_text_tokens(NULL, LADLE_TEXT_TRAIN) == NULL,
              "NULL's answers");
    remove_dir();
}
END_TEST

/* A plain file read as paragraphs, CR LF line ends and a last line without
 * its newline. */
START_TEST(one_file)
{
    fresh_dir();
    write_file("plain.txt", "first para\r\n\r\nsecond\r\nline\n \nthird", 34);
    char path[160];
    snprintf(path, sizeof path, "%s/plain.txt", dir);
    ladle_text_desc o;
    ladle_text_desc_init(&o);
    o.val_every = 3;
    ladle_text *t = NULL;
    LT_OK(ladle_text_load(path, &o, &t));
    char *train = decode(t, LADLE_TEXT_TRAIN), *val = decode(t, LADLE_TEXT_VAL);
    LT_ASSERT(strcmp(train, "first para\r\n\nsecond\r\nline\n\n") == 0, "training '%s'",
              train);
    LT_ASSERT(strcmp(val, "third\n\n") == 0, "validation '%s'", val);
    free(train);
    free(val);
    done(&t);
}
END_TEST

/* Random batches: each row a window of the split and its shift by one, the
 * same global batch however it is cut into rows, every start reached. */
START_TEST(random_windows)
{
    fresh_dir();
    char text[400];
    uint64_t r = 12345; /* random letters: no 6 tokens repeat, so a row finds its start */
    for (int i = 0; i < 399; i++) {
        r = r * 6364136223846793005ull + 1442695040888963407ull;
        text[i] = (i % 40 == 39) ? '\n' : (char)('a' + (r >> 33) % 26);
    }
    text[399] = '\n';
    write_file("t", text, sizeof text);
    ladle_text *t = load(0);
    int64_t len = ladle_text_length(t, LADLE_TEXT_TRAIN);
    LT_ASSERT(len == 401, "a paragraph of 400 bytes and its blank line: %lld",
              (long long)len);
    const int64_t *tok = ladle_text_tokens(t, LADLE_TEXT_TRAIN);
    enum { B = 8, T = 5 };
    ladle_tensor *x = lt_tensor(LADLE_I64, 2, (int64_t[]){B, T});
    ladle_tensor *y = lt_tensor(LADLE_I64, 2, (int64_t[]){B, T});
    ladle_tensor *xh = lt_tensor(LADLE_I64, 2, (int64_t[]){B / 2, T});
    ladle_tensor *yh = lt_tensor(LADLE_I64, 2, (int64_t[]){B / 2, T});
    int64_t xs[B * T], ys[B * T], hx[B * T / 2], hy[B * T / 2];
    char *hit = calloc((size_t)len, 1);
    for (int64_t step = 0; step < 300; step++) {
        LT_OK(tbatch(t, LADLE_TEXT_TRAIN, 42, step, B, 0, x, y));
        LT_OK(ladle_tensor_read(x, xs));
        LT_OK(ladle_tensor_read(y, ys));
        for (int r = 0; r < B; r++) {
            /* the row's start: where its T tokens and the next sit */
            int64_t found = -1;
            for (int64_t p = 0; p + T < len && found < 0; p++)
                if (!memcmp(tok + p, xs + r * T, T * sizeof(int64_t)) &&
                    !memcmp(tok + p + 1, ys + r * T, T * sizeof(int64_t)))
                    found = p;
            LT_ASSERT(found >= 0, "step %lld row %d is no window of the text",
                      (long long)step, r);
            hit[found] = 1;
        }
        /* the second half of the same batch, asked for alone */
        LT_OK(tbatch(t, LADLE_TEXT_TRAIN, 42, step, B, B / 2, xh, yh));
        LT_OK(ladle_tensor_read(xh, hx));
        LT_OK(ladle_tensor_read(yh, hy));
        LT_ASSERT(!memcmp(hx, xs + B * T / 2, sizeof hx) &&
                      !memcmp(hy, ys + B * T / 2, sizeof hy),
                  "step %lld: rows 4..7 alone differ from the whole batch's",
                  (long long)step);
    }
    /* 2400 draws over 396 starts: each is missed with probability 2e-3 */
    int64_t missed = 0;
    for (int64_t p = 0; p + T < len; p++)
        missed += !hit[p];
    LT_ASSERT(missed <= 4, "%lld of %lld starts never drawn", (long long)missed,
              (long long)(len - T));
    /* another seed, another batch; the same seed, the same */
    int64_t again[B * T];
    LT_OK(tbatch(t, LADLE_TEXT_TRAIN, 43, 299, B, 0, x, y));
    LT_OK(ladle_tensor_read(x, again));
    LT_ASSERT(memcmp(again, xs, sizeof xs) != 0, "seeds 42 and 43 drew the same batch");
    LT_OK(tbatch(t, LADLE_TEXT_TRAIN, 42, 299, B, 0, x, y));
    LT_OK(ladle_tensor_read(x, again));
    LT_ASSERT(memcmp(again, xs, sizeof xs) == 0, "seed 42 drew two batches");
    free(hit);
    LT_DESTROY(&x, &y, &xh, &yh);
    done(&t);
}
END_TEST

/* Evaluation windows tile the split: window w is positions wT .. wT+T-1,
 * its targets one on; rows past the last window are x 0, y -1. */
START_TEST(eval_windows)
{
    ladle_text *t = single_file("abcdefghij\n%\nklmnopq\n%\nrs\n%\n", 28, 0);
    /* "abcdefghij\n%\nklmnopq\n%\nrs\n%\n": 28 tokens, 27 targets */
    int64_t len = ladle_text_length(t, LADLE_TEXT_TRAIN);
    LT_ASSERT(len == 28, "length %lld", (long long)len);
    const int64_t *tok = ladle_text_tokens(t, LADLE_TEXT_TRAIN);
    enum { T = 4, N = 3 };
    LT_ASSERT(ladle_text_windows(t, LADLE_TEXT_TRAIN, T) == 6 &&
                  ladle_text_windows(t, LADLE_TEXT_TRAIN, 27) == 1 &&
                  ladle_text_windows(t, LADLE_TEXT_TRAIN, 28) == 0 &&
                  ladle_text_windows(t, LADLE_TEXT_TRAIN, 0) == 0,
              "windows of 4: 6; of 27: 1; of 28: 0");
    ladle_tensor *x = lt_tensor(LADLE_I64, 2, (int64_t[]){N, T});
    ladle_tensor *y = lt_tensor(LADLE_I64, 2, (int64_t[]){N, T});
    int64_t xs[N * T], ys[N * T];
    for (int64_t first = 0; first <= 6; first += N) {
        LT_OK(ladle_text_eval_batch(t, LADLE_TEXT_TRAIN, first, x, y));
        LT_OK(ladle_tensor_read(x, xs));
        LT_OK(ladle_tensor_read(y, ys));
        for (int r = 0; r < N; r++)
            for (int i = 0; i < T; i++) {
                int64_t w = first + r, p = w * T + i;
                int64_t wx = w < 6 ? tok[p] : 0, wy = w < 6 ? tok[p + 1] : -1;
                LT_ASSERT(xs[r * T + i] == wx && ys[r * T + i] == wy,
                          "window %lld position %d: x %lld y %lld", (long long)w, i,
                          (long long)xs[r * T + i], (long long)ys[r * T + i]);
            }
    }
    LT_FAILS(ladle_text_eval_batch(t, LADLE_TEXT_TRAIN, 7, x, y), LADLE_ERR_ARG);
    LT_FAILS(ladle_text_eval_batch(t, LADLE_TEXT_TRAIN, -1, x, y), LADLE_ERR_ARG);
    ladle_tensor_destroy(&x);
    ladle_tensor_destroy(&y);
    done(&t);
}
END_TEST

/* "aab\n%\nab\n%\n", every 2nd record held out: training "aab\n%\n", validation
 * "ab\n%\n". Training pairs aa ab b\n \n% %\n: after a, a and b once each
 * (2 pairs); after b, \n, after \n, %, after %, \n (1 pair each). V = 4
 * (\n % a b). With alpha 1: p(a|a) = p(b|a) = 2/6 and every other seen pair
 * 2/5. Training: 2 of 2/6 and 3 of 2/5 over 5 targets; validation ab b\n
 * \n% %\n: 1 of 2/6 and 3 of 2/5 over 4. With alpha 0.5 an unseen pair,
 * a after b, would be 0.5 / (1 + 2). */
START_TEST(bigram_by_hand)
{
    ladle_text *t = single_file("aab\n%\nab\n%\n", 11, 2);
    LT_ASSERT(ladle_text_vocab(t) == 4, "V %lld", (long long)ladle_text_vocab(t));
    double tr = 0, va = 0;
    LT_OK(ladle_text_bigram(t, 1.0, &tr, &va));
    double want_tr = -(2 * log(2.0 / 6) + 3 * log(2.0 / 5)) / 5;
    double want_va = -(log(2.0 / 6) + 3 * log(2.0 / 5)) / 4;
    LT_ASSERT(fabs(tr - want_tr) < 1e-14 && fabs(va - want_va) < 1e-14,
              "train %.17g (%.17g), validation %.17g (%.17g)", tr, want_tr, va, want_va);
    /* alpha 0.5: p(a|a) = 1.5/4, p(b|a) = 1.5/4, the seen singles 1.5/3 */
    LT_OK(ladle_text_bigram(t, 0.5, NULL, &va));
    want_va = -(log(1.5 / 4) + 3 * log(1.5 / 3)) / 4;
    LT_ASSERT(fabs(va - want_va) < 1e-14, "alpha 0.5: %.17g (%.17g)", va, want_va);
    LT_FAILS(ladle_text_bigram(t, 0.0, &tr, &va), LADLE_ERR_ARG);
    LT_FAILS(ladle_text_bigram(t, NAN, &tr, &va), LADLE_ERR_ARG);
    LT_FAILS(ladle_text_bigram(t, INFINITY, &tr, &va), LADLE_ERR_ARG);
    LT_FAILS(ladle_text_bigram(NULL, 1.0, &tr, &va), LADLE_ERR_NULL);
    done(&t);
}
END_TEST

static void load_fails(const char *path, int64_t val_every, ladle_status want,
                       const char *text)
{
    ladle_text_desc o;
    ladle_text_desc_init(&o);
    o.val_every = val_every;
    ladle_text *t = (ladle_text *)&o; /* set to NULL by a refusal */
    ladle_status st = ladle_text_load(path, &o, &t);
    LT_ASSERT(st == want && t == NULL && strstr(ladle_error_message(), text) != NULL,
              "%s (val_every %lld): %s: %s (expected %s, '%s')", path, (long long)val_every,
              ladle_status_name(st), ladle_error_message(), ladle_status_name(want), text);
}

START_TEST(bad_input)
{
    fresh_dir();
    char path[160], sub[160];
    load_fails("/nonexistent/corpus", 10, LADLE_ERR_IO, "/nonexistent/corpus");
    snprintf(sub, sizeof sub, "%s/empty", dir);
    LT_ASSERT(mkdir(sub, 0700) == 0, "mkdir");
    load_fails(sub, 10, LADLE_ERR_IO, "holds no text file");
    write_file("empty/x.dat", "abc", 3);
    write_file("empty/.x", "abc", 3);
    load_fails(sub, 10, LADLE_ERR_IO, "holds no text file");
    write_file("nul", "text\n%\nmore\0text\n", 17);
    snprintf(path, sizeof path, "%s/nul", dir);
    load_fails(path, 10, LADLE_ERR_IO, "NUL byte at offset 11");
    write_file("blank", " \n\n\t\n%\n%\n", 9);
    snprintf(path, sizeof path, "%s/blank", dir);
    load_fails(path, 10, LADLE_ERR_IO, "no record");
    write_file("three", "a\n%\nb\n%\nc\n", 10);
    snprintf(path, sizeof path, "%s/three", dir);
    load_fails(path, 10, LADLE_ERR_IO, "none for validation");
    load_fails(path, 1, LADLE_ERR_IO, "all held out");
    load_fails(path, -1, LADLE_ERR_ARG, "val_every -1");
    load_fails(path, (1 << 20) + 1, LADLE_ERR_ARG, "val_every");
    ladle_text_desc o;
    ladle_text_desc_init(&o);
    ladle_text *t = NULL;
    LT_FAILS(ladle_text_load(NULL, &o, &t), LADLE_ERR_NULL);
    LT_FAILS(ladle_text_load(path, &o, NULL), LADLE_ERR_NULL);
    o.size = 0;
    LT_FAILS(ladle_text_load(path, &o, &t), LADLE_ERR_ARG);
    ladle_text_desc_init(NULL);
    /* batches of windows of 4: "a\n%\nb\n%\n" trains (8 tokens), "c\n%\n"
     * validates (4 tokens, one short of a window and its target) */
    o.size = sizeof o;
    o.val_every = 3;
    LT_OK(ladle_text_load(path, &o, &t));
    ladle_tensor *x = lt_tensor(LADLE_I64, 2, (int64_t[]){2, 4});
    ladle_tensor *y = lt_tensor(LADLE_I64, 2, (int64_t[]){2, 4});
    ladle_tensor *y4 = lt_tensor(LADLE_I64, 2, (int64_t[]){2, 3});
    ladle_tensor *f = lt_tensor(LADLE_F64, 2, (int64_t[]){2, 4});
    ladle_tensor *x1 = lt_tensor(LADLE_I64, 1, (int64_t[]){6});
    LT_OK(tbatch(t, LADLE_TEXT_TRAIN, 1, 0, 2, 0, x, y));
    LT_FAILS(tbatch(t, LADLE_TEXT_VAL, 1, 0, 2, 0, x, y), LADLE_ERR_ARG);
    LT_FAILS(tbatch(t, (ladle_text_split)2, 1, 0, 2, 0, x, y), LADLE_ERR_ARG);
    LT_FAILS(tbatch(t, LADLE_TEXT_TRAIN, 1, -1, 2, 0, x, y), LADLE_ERR_ARG);
    LT_FAILS(tbatch(t, LADLE_TEXT_TRAIN, 1, 0, 0, 0, x, y), LADLE_ERR_ARG);
    LT_FAILS(tbatch(t, LADLE_TEXT_TRAIN, 1, 0, 3, 2, x, y), LADLE_ERR_ARG);
    LT_FAILS(tbatch(t, LADLE_TEXT_TRAIN, 1, 0, 2, -1, x, y), LADLE_ERR_ARG);
    LT_FAILS(tbatch(t, LADLE_TEXT_TRAIN, 1, 0, 2, 0, f, y), LADLE_ERR_DTYPE);
    LT_FAILS(tbatch(t, LADLE_TEXT_TRAIN, 1, 0, 2, 0, x, y4), LADLE_ERR_SHAPE);
    LT_FAILS(tbatch(t, LADLE_TEXT_TRAIN, 1, 0, 2, 0, x1, x1), LADLE_ERR_SHAPE);
    LT_FAILS(tbatch(NULL, LADLE_TEXT_TRAIN, 1, 0, 2, 0, x, y), LADLE_ERR_NULL);
    LT_FAILS(tbatch(t, LADLE_TEXT_TRAIN, 1, 0, 2, 0, x, NULL), LADLE_ERR_NULL);
    LT_FAILS(ladle_text_batch(t, LADLE_TEXT_TRAIN, NULL, 0, x, y), LADLE_ERR_NULL);
    ladle_batch_desc bd = {0}; /* never through its _init */
    LT_FAILS(ladle_text_batch(t, LADLE_TEXT_TRAIN, &bd, 0, x, y), LADLE_ERR_ARG);
    ladle_batch_desc_init(&bd, 1, 2);
    LT_OK(ladle_text_batch(t, LADLE_TEXT_TRAIN, &bd, 0, x, y));
    bd.crop_pad = 1; /* an image field: refused, named */
    LT_ASSERT(ladle_text_batch(t, LADLE_TEXT_TRAIN, &bd, 0, x, y) == LADLE_ERR_ARG &&
                  strstr(ladle_error_message(), "crop_pad 1") != NULL,
              "%s", ladle_error_message());
    ladle_error_clear();
    /* the name of 0.1: ladle_text_options_init sets the same defaults */
    LT_DEPRECATED_BEGIN
    ladle_text_options old;
    ladle_text_options_init(&old);
    LT_DEPRECATED_END
    ladle_text_desc now;
    ladle_text_desc_init(&now);
    LT_ASSERT(old.size == now.size && old.val_every == now.val_every, "text_options_init");
    LT_FAILS(ladle_text_eval_batch(t, LADLE_TEXT_TRAIN, 0, f, y), LADLE_ERR_DTYPE);
    LT_FAILS(ladle_text_eval_batch(NULL, LADLE_TEXT_TRAIN, 0, x, y), LADLE_ERR_NULL);
    LT_DESTROY(&x, &y, &y4, &f, &x1);
    done(&t);
}
END_TEST

/* Debian's English fortunes, where the package is installed: every file
 * read, a tenth of the records (rounded down) held out, a printable
 * vocabulary. */
START_TEST(fortunes_package)
{
    struct stat sb;
    if (stat(LADLE_FORTUNES_DIR "/cookie", &sb) != 0)
        return; /* the package is not installed here */
    ladle_text *t = NULL;
    LT_OK(ladle_text_load(LADLE_FORTUNES_DIR, NULL, &t));
    int64_t tr = ladle_text_records(t, LADLE_TEXT_TRAIN),
            va = ladle_text_records(t, LADLE_TEXT_VAL);
    LT_ASSERT(va == (tr + va) / 10, "%lld of %lld records held out", (long long)va,
              (long long)(tr + va));
    LT_ASSERT(tr + va > 10000 && ladle_text_length(t, LADLE_TEXT_TRAIN) > 1000000,
              "%lld records, %lld training tokens", (long long)(tr + va),
              (long long)ladle_text_length(t, LADLE_TEXT_TRAIN));
    LT_ASSERT(ladle_text_vocab(t) > 60 && ladle_text_vocab(t) < 256 &&
                  ladle_text_id(t, 'e') >= 0 && ladle_text_id(t, '%') >= 0,
              "vocabulary %lld", (long long)ladle_text_vocab(t));
    double btr = 0, bva = 0;
    LT_OK(ladle_text_bigram(t, 1.0, &btr, &bva));
    /* a bigram model of English text: between 2 and 3 nats a character */
    LT_ASSERT(btr > 2.0 && btr < 3.0 && bva > btr && bva < 3.0, "bigram %.3f / %.3f", btr,
              bva);
    ladle_text_destroy(&t);
}
END_TEST

LT_SUITE("text", "text", 120, records_and_splits, one_file, random_windows, eval_windows,
         bigram_by_hand, bad_input, fortunes_package)
