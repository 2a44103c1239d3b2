/* IDX datasets: a small dataset written here (plain and gzip-compressed)
 * loads to the values computed by hand, and damaged files (bad magic,
 * type or rank, headers that declare more than the file holds or more than
 * fits, torn bodies, trailing bytes, counts that differ, paths that are not
 * files) are refused with LADLE_ERR_IO and a message that says why, before
 * anything large is allocated. Each rank works in its own directory. */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#include "harness.h"

/* A descriptor of the window rows r0.. (rows), columns c0.. (cols), and the
 * normalisation, written out (a compound literal: its size is the struct's). */
#define WINDOW(r0, rows, c0, cols, mean, std)                                              \
    (&(ladle_dataset_desc){sizeof(ladle_dataset_desc), (r0), (rows), (c0), (cols), (mean), \
                           (std)})

static char dir[64];

/* Write an IDX file: type byte, ndim, the dims as written in the header,
 * then `bytes` body bytes (value i % 251 at i, or `body` if given); gzip it
 * when gz. Returns the path (static storage, one per slot). */
static const char *idx(const char *name, int gz, uint8_t type, int ndim,
                       const uint32_t *dims, int64_t bytes, const uint8_t *body)
{
    static char paths[8][128];
    static int slot;
    char *path = paths[slot++ % 8];
    snprintf(path, 128, "%s/%s", dir, name);
    uint8_t head[4 + 4 * 3] = {0, 0, type, (uint8_t)ndim};
    for (int d = 0; d < ndim; d++)
        for (int k = 0; k < 4; k++)
            head[4 + 4 * d + k] = (uint8_t)(dims[d] >> (24 - 8 * k));
    uint8_t *b = malloc((size_t)bytes + 1);
    for (int64_t i = 0; i < bytes; i++)
        b[i] = body ? body[i] : (uint8_t)(i % 251);
    if (gz) {
        gzFile f = gzopen(path, "wb");
        gzwrite(f, head, (unsigned)(4 + 4 * ndim));
        if (bytes)
            gzwrite(f, b, (unsigned)bytes);
        gzclose(f);
    } else {
        FILE *f = fopen(path, "wb");
        fwrite(head, 1, (size_t)(4 + 4 * ndim), f);
        fwrite(b, 1, (size_t)bytes, f);
        fclose(f);
    }
    free(b);
    return path;
}

/* 5 images of 4x3, pixel (s, r, c) = 12 s + 3 r + c; labels 0 2 1 2 0. */
static const uint8_t labels5[5] = {0, 2, 1, 2, 0};

static void good_pair(int gz, const char **images, const char **labels)
{
    uint32_t di[3] = {5, 4, 3}, dl[1] = {5};
    *images = idx(gz ? "img.gz" : "img", gz, 0x08, 3, di, 60, NULL);
    *labels = idx(gz ? "lab.gz" : "lab", gz, 0x08, 1, dl, 5, labels5);
}

static void setup(void)
{
    snprintf(dir, sizeof dir, "/tmp/ladle-data-%d-XXXXXX", lt_rank);
    if (mkdtemp(dir) == NULL)
        dir[0] = '\0';
}

static void teardown(void)
{
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    if (dir[0] && system(cmd) != 0)
        fprintf(stderr, "could not remove %s\n", dir);
}

/* The call fails with LADLE_ERR_IO and a message holding `says`. */
#define REFUSED(expr, says)                                                                \
    do {                                                                                   \
        ladle_status st_ = (expr);                                                         \
        LT_ASSERT(st_ == LADLE_ERR_IO && strstr(ladle_error_message(), (says)) != NULL,    \
                  "%s gave %s: %s (wanted '%s')", #expr, ladle_status_name(st_),           \
                  ladle_error_message(), (says));                                          \
        ladle_error_clear();                                                               \
    } while (0)

START_TEST(good_files_load)
{
    for (int gz = 0; gz < 2; gz++) {
        const char *images, *labels;
        good_pair(gz, &images, &labels);
        ladle_dataset_info info = {0, 0, 0, 0};
        LT_OK(ladle_dataset_probe(images, labels, &info));
        LT_ASSERT(info.size == 5 && info.rows == 4 && info.cols == 3 && info.classes == 3,
                  "probe: %lld %lldx%lld %lld", (long long)info.size, (long long)info.rows,
                  (long long)info.cols, (long long)info.classes);
        /* keep rows 1-3, columns 1-2; read rows 1-2 and column 1 of that window */
        ladle_dataset *ds = NULL;
        ladle_dataset_desc w;
        ladle_dataset_desc_init(&w);
        w.row0 = 1, w.rows = 3, w.col0 = 1, w.cols = 2, w.mean = 0.25, w.std = 0.5;
        LT_OK(ladle_dataset_load(images, labels, &w, &ds));
        int64_t xs[4] = {5, 1, 2, 1}, n = 5;
        /* on the suite's device: decoded on the host, written through it */
        ladle_tensor *x = NULL, *l = NULL;
        LT_OK(ladle_tensor_create(LADLE_F64, lt_device(), 4, xs, &x));
        LT_OK(ladle_tensor_create(LADLE_I64, lt_device(), 1, &n, &l));
        ladle_batch_desc b;
        ladle_batch_desc_init(&b, 0, 5);
        b.row_off = 1, b.col_off = 1;
        LT_OK(ladle_dataset_batch(ds, &b, 0, 0, x, l));
        double worst = 0;
        int labels_ok = 1;
        for (int s = 0; s < 5; s++) {
            labels_ok &= lt_get(l, s) == labels5[s];
            for (int r = 0; r < 2; r++) {
                double pixel = 12 * s + 3 * (2 + r) + 2; /* window row 1+1+r, column 1+1 */
                double want = (pixel / 255.0 - 0.25) / 0.5;
                worst = fmax(worst, fabs(lt_get(x, s * 2 + r) - want));
            }
        }
        LT_ASSERT(worst < 1e-15 && labels_ok, "pixels off by %g, labels %d", worst,
                  labels_ok);
        ladle_tensor_destroy(&x);
        ladle_tensor_destroy(&l);
        ladle_dataset_destroy(&ds);
    }
}
END_TEST

START_TEST(bad_headers)
{
    uint32_t dl[1] = {5}, di[3] = {5, 4, 3};
    const char *labels = idx("lab", 0, 0x08, 1, dl, 5, labels5);
    ladle_dataset *ds = NULL;
    ladle_dataset_info info;
    /* the magic, the type byte and the rank are checked */
    const char *p = idx("magic", 0, 0x08, 3, di, 60, NULL);
    FILE *f = fopen(p, "r+b");
    fputc(1, f);
    fclose(f);
    REFUSED(ladle_dataset_load(p, labels, NULL, &ds), "is not an IDX file");
    REFUSED(ladle_dataset_probe(idx("type", 0, 0x09, 3, di, 60, NULL), labels, &info),
            "is not an IDX file of unsigned bytes with 3 dimensions");
    REFUSED(ladle_dataset_probe(idx("rank", 0, 0x08, 2, di, 20, NULL), labels, &info),
            "is not an IDX file");
    REFUSED(ladle_dataset_probe(idx("head", 0, 0x08, 3, di, 0, NULL), labels, &info),
            "shorter than its header says");
    /* a 1 KB file that declares 100000 images of 1000 x 1000: refused as short,
     * plain or compressed, never as out of memory */
    uint32_t huge[3] = {100000, 1000, 1000};
    for (int gz = 0; gz < 2; gz++) {
        p = idx(gz ? "huge.gz" : "huge", gz, 0x08, 3, huge, 1000, NULL);
        REFUSED(ladle_dataset_load(p, labels, NULL, &ds), "shorter than its header says");
        LT_ASSERT(ds == NULL, "nothing made");
    }
    /* dimensions whose product does not fit in 64 bits */
    uint32_t wide[3] = {0xffffffffu, 0xffffffffu, 0xffffffffu};
    REFUSED(ladle_dataset_probe(idx("wide", 0, 0x08, 3, wide, 16, NULL), labels, &info),
            "too many to hold");
    /* trailing bytes in a plain file; counts that differ */
    REFUSED(ladle_dataset_probe(idx("long", 0, 0x08, 3, di, 61, NULL), labels, &info),
            "trailing bytes");
    uint32_t four[1] = {4};
    REFUSED(ladle_dataset_probe(idx("img", 0, 0x08, 3, di, 60, NULL),
                                idx("lab4", 0, 0x08, 1, four, 4, labels5), &info),
            "holds 5 images");
}
END_TEST

START_TEST(torn_files)
{
    uint32_t di[3] = {5, 4, 3}, dl[1] = {5};
    ladle_dataset *ds = NULL;
    ladle_dataset_info info;
    const char *labels = idx("lab.gz", 1, 0x08, 1, dl, 5, labels5);
    /* a compressed body that ends after 3 of its 5 images */
    const char *images = idx("torn.gz", 1, 0x08, 3, di, 36, NULL);
    REFUSED(ladle_dataset_load(images, labels, NULL, &ds), "ends after 3 of 5 images");
    /* labels that end early, compressed and plain */
    images = idx("img.gz", 1, 0x08, 3, di, 60, NULL);
    REFUSED(ladle_dataset_probe(images, idx("short.gz", 1, 0x08, 1, dl, 3, labels5), &info),
            "ends before its 5 labels");
    REFUSED(ladle_dataset_probe(images, idx("short", 0, 0x08, 1, dl, 3, labels5), &info),
            "shorter than its header says");
}
END_TEST

START_TEST(paths_and_arguments)
{
    const char *images, *labels;
    ladle_dataset *ds = NULL;
    ladle_dataset_info info;
    char missing[128];
    good_pair(0, &images, &labels);
    snprintf(missing, sizeof missing, "%s/none", dir);
    REFUSED(ladle_dataset_load(missing, labels, NULL, &ds), "No such file or directory");
    REFUSED(ladle_dataset_probe(dir, labels, &info), "is not a regular file");
    REFUSED(ladle_dataset_load_dir(missing, "train", NULL, &ds),
            "No such file or directory");
    REFUSED(ladle_dataset_probe_dir(images, "train", &info), "is not a directory");
    LT_FAILS(ladle_dataset_load(images, labels, WINDOW(2, 3, 0, 0, 0, 1), &ds),
             LADLE_ERR_ARG);
    LT_FAILS(ladle_dataset_load(images, labels, WINDOW(0, 0, 0, 4, 0, 1), &ds),
             LADLE_ERR_ARG);
    LT_FAILS(ladle_dataset_load(images, labels, WINDOW(-1, 1, 0, 0, 0, 1), &ds),
             LADLE_ERR_ARG);
    LT_FAILS(ladle_dataset_load(images, labels, WINDOW(0, 0, 0, 0, 0, 0), &ds),
             LADLE_ERR_ARG);
    LT_FAILS(ladle_dataset_load(images, labels, WINDOW(0, 0, 0, 0, NAN, 1), &ds),
             LADLE_ERR_ARG);
    LT_FAILS(ladle_dataset_probe(NULL, labels, &info), LADLE_ERR_NULL);
    LT_ASSERT(ds == NULL, "nothing made");
    /* a directory of plain (not compressed) files is read too */
    uint32_t di[3] = {5, 4, 3}, dl[1] = {5};
    idx("t10k-images-idx3-ubyte", 0, 0x08, 3, di, 60, NULL);
    idx("t10k-labels-idx1-ubyte", 0, 0x08, 1, dl, 5, labels5);
    LT_OK(ladle_dataset_probe_dir(dir, "t10k", &info));
    LT_ASSERT(info.size == 5 && info.classes == 3, "plain files: %lld samples",
              (long long)info.size);
}
END_TEST

START_TEST(empty_dataset)
{
    uint32_t di[3] = {0, 28, 28}, dl[1] = {0};
    ladle_dataset *ds = NULL;
    ladle_dataset_info info = {1, 1, 1, 1};
    const char *images = idx("e-img", 0, 0x08, 3, di, 0, NULL);
    const char *labels = idx("e-lab", 0, 0x08, 1, dl, 0, NULL);
    LT_OK(ladle_dataset_probe(images, labels, &info));
    LT_ASSERT(info.size == 0 && info.classes == 0 && info.rows == 28,
              "empty: %lld, %lld classes", (long long)info.size, (long long)info.classes);
    LT_OK(ladle_dataset_load(images, labels, NULL, &ds));
    LT_ASSERT(ladle_dataset_size(ds) == 0 && ladle_dataset_classes(ds) == 0,
              "empty dataset");
    ladle_dataset_destroy(&ds);
}
END_TEST

static Suite *data_suite(void)
{
    TCase *tc = NULL;
    Suite *s = lt_suite("data", "data", LT_CHECK_TIMEOUT, &tc,
                        LT_TESTS(good_files_load, bad_headers, torn_files,
                                 paths_and_arguments, empty_dataset));
    tcase_add_checked_fixture(tc, setup, teardown);
    return s;
}

LT_MAIN(data_suite)
