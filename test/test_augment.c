/* Data augmentation (ladle_dataset_batch with a ladle_batch_desc): a small dataset written
 * here is augmented the same, bit for bit, on every layout of the ranks (each rank fills
 * its tile, the tiles are gathered); the samples equal the definition (pad, crop at the
 * drawn offsets, mirror) evaluated in the test from the pixel formula; an offset of 0 gives
 * the padded image's top-left window and p, p the image itself, by hand; a flip is its own
 * inverse; about half the samples are flipped and every crop offset is drawn; bad options
 * and windows too small for the augmentation are refused. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "harness.h"

#define NS 40 /* samples */
#define H 6
#define W 5

static char dir[64], images[128], labels[128];

/* Pixel (s, r, c) of the dataset: 1 to 250, never 0 (the padding's black),
 * distinct along a row. */
static int pixel(int s, int r, int c) { return 1 + (31 * s + 11 * r + c) % 250; }

static void write_idx(const char *path, int ndim, const uint32_t *dims, const uint8_t *body,
                      size_t bytes)
{
    uint8_t head[16] = {0, 0, 0x08, (uint8_t)ndim};
    for (int d = 0; d < ndim; d++)
        for (int k = 0; k < 4; k++)
            head[4 + 4 * d + k] = (uint8_t)(dims[d] >> (24 - 8 * k));
    FILE *f = fopen(path, "wb");
    fwrite(head, 1, (size_t)(4 + 4 * ndim), f);
    fwrite(body, 1, bytes, f);
    fclose(f);
}

static void setup(void)
{
    uint8_t img[NS * H * W], lab[NS];
    snprintf(dir, sizeof dir, "/tmp/ladle-aug-%d-XXXXXX", lt_rank);
    if (mkdtemp(dir) == NULL)
        dir[0] = '\0';
    for (int s = 0; s < NS; s++) {
        lab[s] = (uint8_t)(s % 3);
        for (int r = 0; r < H; r++)
            for (int c = 0; c < W; c++)
                img[(s * H + r) * W + c] = (uint8_t)pixel(s, r, c);
    }
    uint32_t di[3] = {NS, H, W}, dl[1] = {NS};
    snprintf(images, sizeof images, "%s/img", dir);
    snprintf(labels, sizeof labels, "%s/lab", dir);
    write_idx(images, 3, di, img, sizeof img);
    write_idx(labels, 1, dl, lab, sizeof lab);
}

static void teardown(void)
{
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    if (dir[0] && system(cmd) != 0)
        fprintf(stderr, "could not remove %s\n", dir);
}

/* The window rows r0.. (rows of them) and columns c0.. of every image,
 * pixels / 255 (mean 0, std 1). */
static ladle_dataset *load(int64_t r0, int64_t rows, int64_t c0, int64_t cols)
{
    ladle_dataset_desc d;
    ladle_dataset_desc_init(&d);
    d.row0 = r0, d.rows = rows, d.col0 = c0, d.cols = cols;
    ladle_dataset *ds = NULL;
    LT_OK(ladle_dataset_load(images, labels, &d, &ds));
    return ds;
}

/* ladle_dataset_batch with a's augmentation (NULL: none) and the rest
 * given: one call per place, so each reads as the position it asks for. */
static ladle_status batch_aug(const ladle_dataset *ds, uint64_t seed, int64_t epoch,
                              int64_t step, int64_t batch, int64_t offset, int64_t row_off,
                              int64_t col_off, ladle_tensor *x, ladle_tensor *l,
                              const ladle_batch_desc *a)
{
    ladle_batch_desc d;
    ladle_batch_desc_init(&d, seed, batch);
    if (a != NULL)
        d = *a, d.seed = seed, d.batch = batch;
    d.offset = offset, d.row_off = row_off, d.col_off = col_off;
    return ladle_dataset_batch(ds, &d, epoch, step, x, l);
}

/* ladle_augment_draw of a under another seed. */
static ladle_status draw(const ladle_batch_desc *a, uint64_t seed, int64_t epoch, int64_t s,
                         int64_t *oy, int64_t *ox, int *flip)
{
    ladle_batch_desc d = *a;
    d.seed = seed;
    return ladle_augment_draw(&d, epoch, s, oy, ox, flip);
}

/* The definition: pad p black pixels, cut H x W at (oy, ox), mirror. */
static double reference(int s, int r, int c, int64_t p, int64_t oy, int64_t ox, int flip)
{
    int64_t cc = flip ? W - 1 - c : c;
    int64_t sr = r + oy - p, sc = cc + ox - p;
    int v = sr >= 0 && sr < H && sc >= 0 && sc < W ? pixel(s, (int)sr, (int)sc) : 0;
    return (double)v / 255.0;
}

/* Batch `step` of `n` samples with this rank's tile (rows r0.., h of them;
 * columns c0.., w) filled into a global n x H x W buffer, zeros elsewhere,
 * then summed over the ranks: each element has one writer, so the sum is
 * the tile's value exactly. The dataset keeps rows lr0.. (lrows of them)
 * and every column. */
static void gathered(const ladle_batch_desc *a, uint64_t seed, int64_t epoch, int64_t step,
                     int n, int64_t r0, int64_t h, int64_t c0, int64_t w, int64_t lr0,
                     int64_t lrows, double *out)
{
    ladle_dataset *ds = load(lr0, lrows, 0, 0);
    int64_t xs[4] = {n, 1, h, w};
    ladle_tensor *x = lt_tensor(LADLE_F64, 4, xs);
    LT_OK(batch_aug(ds, seed, epoch, step, n, 0, r0 - lr0, c0, x, NULL, a));
    double *mine = calloc((size_t)n * H * W, sizeof *mine);
    double *box = calloc((size_t)(n * h * w) + 1, sizeof *box);
    LT_OK(ladle_tensor_read(x, box));
    for (int i = 0; i < n; i++)
        for (int64_t r = 0; r < h; r++)
            for (int64_t c = 0; c < w; c++)
                mine[(i * H + r0 + r) * W + c0 + c] = box[(i * h + r) * w + c];
    MPI_Allreduce(mine, out, n * H * W, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
    free(mine), free(box);
    ladle_tensor_destroy(&x);
    ladle_dataset_destroy(&ds);
}

static int64_t split_start(int64_t n, int parts, int i)
{
    return i * (n / parts) + (i < n % parts ? i : n % parts);
}

/* Every layout Ph x Pw of the world's ranks, with whole and tight windows,
 * against one rank's whole image (bit for bit) and the definition. */
START_TEST(same_on_every_layout)
{
    enum { N = 8 };
    static double ref[N * H * W], got[N * H * W];
    ladle_batch_desc a;
    ladle_batch_desc_init(&a, 0, 1);
    a.crop_pad = 2;
    a.flip = 1;
    for (int64_t epoch = 0; epoch < 3; epoch++) {
        uint64_t seed = 11 + (uint64_t)epoch;
        /* rank by rank the whole image alone (no collective but the sum) */
        gathered(&a, seed, epoch, 1, N, 0, lt_rank == 0 ? H : 0, 0, lt_rank == 0 ? W : 0, 0, H,
                 ref);
        double worst = 0;
        for (int i = 0; i < N; i++) {
            int64_t s = 0, oy, ox;
            int flip;
            ladle_dataset *ds = load(0, 0, 0, 0);
            s = ladle_dataset_sample(ds, seed, epoch, N + i);
            ladle_dataset_destroy(&ds);
            LT_OK(draw(&a, seed, epoch, s, &oy, &ox, &flip));
            for (int r = 0; r < H; r++)
                for (int c = 0; c < W; c++)
                    worst = fmax(worst, fabs(ref[(i * H + r) * W + c] -
                                             reference((int)s, r, c, 2, oy, ox, flip)));
        }
        LT_ASSERT(worst <= 1e-15, "epoch %lld: %.3e from the definition", (long long)epoch,
                  worst);
        for (int ph = 1; ph <= lt_size; ph++) {
            if (lt_size % ph != 0 || lt_size / ph > W || ph > H)
                continue;
            int pw = lt_size / ph, pr = lt_rank / pw, pc = lt_rank % pw;
            int64_t r0 = split_start(H, ph, pr), h = split_start(H, ph, pr + 1) - r0;
            int64_t c0 = split_start(W, pw, pc), w = split_start(W, pw, pc + 1) - c0;
            for (int tight = 0; tight < 2; tight++) {
                int64_t lr0 = tight ? (r0 - 2 < 0 ? 0 : r0 - 2) : 0;
                int64_t lr1 = tight ? (r0 + h + 2 > H ? H : r0 + h + 2) : H;
                gathered(&a, seed, epoch, 1, N, r0, h, c0, w, lr0, lr1 - lr0, got);
                LT_ASSERT(memcmp(got, ref, sizeof ref) == 0,
                          "layout %dx%d (window %s) differs from one rank's", ph, pw,
                          tight ? "tight" : "whole");
            }
        }
    }
}
END_TEST

/* Offsets (0, 0): the padded image's top-left window; (p, p): the image. */
START_TEST(offsets_by_hand)
{
    ladle_batch_desc a;
    ladle_batch_desc_init(&a, 0, 1);
    a.crop_pad = 2;
    ladle_dataset *ds = load(0, 0, 0, 0);
    int64_t xs[4] = {1, 1, H, W};
    ladle_tensor *x = lt_tensor(LADLE_F64, 4, xs);
    int found[2] = {0, 0};
    /* seed 0: no shuffle, sample k is position k; look for both draws */
    for (int64_t epoch = 0; epoch < 200 && !(found[0] && found[1]); epoch++)
        for (int64_t s = 0; s < NS; s++) {
            int64_t oy, ox;
            int flip;
            LT_OK(draw(&a, 0, epoch, s, &oy, &ox, &flip));
            int which = oy == 0 && ox == 0 ? 0 : oy == 2 && ox == 2 ? 1 : -1;
            if (which < 0 || found[which])
                continue;
            found[which] = 1;
            LT_OK(batch_aug(ds, 0, epoch, s, 1, 0, 0, 0, x, NULL, &a));
            double worst = 0;
            for (int r = 0; r < H; r++)
                for (int c = 0; c < W; c++) {
                    /* written out: the top-left window has two black rows
                     * and columns, then the image's rows 0.. and columns 0.. */
                    int v = which == 1                 ? pixel((int)s, r, c)
                            : r >= 2 && c >= 2          ? pixel((int)s, r - 2, c - 2)
                                                        : 0;
                    worst = fmax(worst, fabs(lt_get(x, r * W + c) - v / 255.0));
                }
            LT_ASSERT(worst <= 1e-15, "offsets (%lld, %lld): off by %g", (long long)oy,
                      (long long)ox, worst);
        }
    LT_ASSERT(found[0] && found[1], "both draws met");
    ladle_tensor_destroy(&x);
    ladle_dataset_destroy(&ds);
}
END_TEST

/* With flip alone a sample is the image or its mirror; mirroring a flipped
 * one gives the image back. About half are flipped. */
START_TEST(flip_inverse_and_half)
{
    ladle_batch_desc a;
    ladle_batch_desc_init(&a, 0, 1);
    a.flip = 1;
    ladle_dataset *ds = load(0, 0, 0, 0);
    int64_t xs[4] = {NS, 1, H, W};
    ladle_tensor *x = lt_tensor(LADLE_F64, 4, xs), *plain = lt_tensor(LADLE_F64, 4, xs);
    double *v = malloc(sizeof(double) * NS * H * W), *p = malloc(sizeof(double) * NS * H * W);
    int flipped = 0, total = 0, bad = 0, disagree = 0;
    for (int64_t epoch = 0; epoch < 50; epoch++) {
        LT_OK(batch_aug(ds, 5, epoch, 0, NS, 0, 0, 0, x, NULL, &a));
        LT_OK(batch_aug(ds, 5, epoch, 0, NS, 0, 0, 0, plain, NULL, NULL));
        LT_OK(ladle_tensor_read(x, v));
        LT_OK(ladle_tensor_read(plain, p));
        for (int i = 0; i < NS; i++) {
            const double *s = v + i * H * W, *o = p + i * H * W;
            int same = 1, mirrored = 1;
            for (int k = 0; k < H * W; k++) {
                int r = k / W, c = k % W;
                same &= s[k] == o[k];
                mirrored &= s[r * W + (W - 1 - c)] == o[k]; /* flipped back */
            }
            bad += same == mirrored; /* exactly one of them (rows are not symmetric) */
            flipped += mirrored;
            total++;
            int64_t oy, ox;
            int f;
            LT_OK(draw(&a, 5, epoch, ladle_dataset_sample(ds, 5, epoch, i), &oy, &ox, &f));
            disagree += f != mirrored;
        }
    }
    double frac = (double)flipped / total;
    LT_ASSERT(bad == 0 && disagree == 0 && fabs(frac - 0.5) < 0.05,
              "%d neither or both, %d unlike the draw, %d of %d flipped", bad, disagree,
              flipped, total);
    /* every crop offset 0 .. 2p drawn, and about uniformly */
    a.flip = 0;
    a.crop_pad = 3;
    int count[7] = {0};
    for (int64_t s = 0; s < 7000; s++) {
        int64_t oy, ox;
        int f;
        LT_OK(draw(&a, 9, 1, s, &oy, &ox, &f));
        count[oy]++;
        count[ox]++;
    }
    for (int k = 0; k < 7; k++)
        LT_ASSERT(abs(count[k] - 2000) < 200, "offset %d drawn %d times of 14000", k, count[k]);
    free(v), free(p);
    ladle_tensor_destroy(&x), ladle_tensor_destroy(&plain);
    ladle_dataset_destroy(&ds);
}
END_TEST

#define REFUSED(expr, says)                                                                \
    do {                                                                                   \
        ladle_status st_ = (expr);                                                         \
        LT_ASSERT(st_ == LADLE_ERR_ARG && strstr(ladle_error_message(), (says)) != NULL,   \
                  "%s gave %s: %s (wanted '%s')", #expr, ladle_status_name(st_),           \
                  ladle_error_message(), (says));                                          \
        ladle_error_clear();                                                               \
    } while (0)

START_TEST(hostile)
{
    ladle_dataset *ds = load(0, 0, 0, 0), *part = load(2, 3, 0, 0); /* rows 2-4 */
    int64_t xs[4] = {2, 1, H, W}, xs2[4] = {2, 1, 1, W}, oy, ox;
    int flip;
    ladle_tensor *x = lt_tensor(LADLE_F64, 4, xs), *x2 = lt_tensor(LADLE_F64, 4, xs2);
    ladle_batch_desc a;
    ladle_batch_desc_init(&a, 0, 1);
    a.crop_pad = -1;
    REFUSED(batch_aug(ds, 1, 0, 0, 2, 0, 0, 0, x, NULL, &a), "crop_pad -1");
    a.crop_pad = 7;
    REFUSED(batch_aug(ds, 1, 0, 0, 2, 0, 0, 0, x, NULL, &a), "crop_pad 7");
    a.crop_pad = INT64_MAX;
    REFUSED(batch_aug(ds, 1, 0, 0, 2, 0, 0, 0, x, NULL, &a), "9223372036854775807");
    REFUSED(draw(&a, 1, 0, 0, &oy, &ox, &flip), "crop_pad");
    a.crop_pad = 6; /* the larger side: allowed */
    LT_OK(batch_aug(ds, 1, 0, 0, 2, 0, 0, 0, x, NULL, &a));
    a.crop_pad = 0;
    a.flip = 2;
    REFUSED(batch_aug(ds, 1, 0, 0, 2, 0, 0, 0, x, NULL, &a), "flip 2");
    a.flip = -1;
    REFUSED(draw(&a, 1, 0, 0, &oy, &ox, &flip), "flip -1");
    a.flip = 0;
    a.size = 4;
    REFUSED(batch_aug(ds, 1, 0, 0, 2, 0, 0, 0, x, NULL, &a), "size");
    ladle_batch_desc_init(&a, 0, 1);
    REFUSED(draw(&a, 1, 0, -3, &oy, &ox, &flip), "sample -3");
    LT_ASSERT(ladle_augment_draw(NULL, 0, 0, &oy, &ox, &flip) == LADLE_ERR_NULL &&
                  ladle_augment_draw(&a, 0, 0, NULL, &ox, &flip) == LADLE_ERR_NULL,
              "NULL");
    ladle_error_clear();
    /* rows 2-4 loaded: row 3 alone needs rows 1-5 with a pad of 2 */
    a.crop_pad = 2;
    REFUSED(batch_aug(part, 1, 0, 0, 2, 0, 1, 0, x2, NULL, &a), "reads rows 1 to 5");
    a.crop_pad = 1; /* rows 2-4: enough */
    LT_OK(batch_aug(part, 1, 0, 0, 2, 0, 1, 0, x2, NULL, &a));
    /* a window of columns 0-2: its mirror (2-4) is not loaded */
    ladle_dataset *cols = load(0, 0, 0, 3);
    int64_t xs3[4] = {2, 1, H, 2};
    ladle_tensor *x3 = lt_tensor(LADLE_F64, 4, xs3);
    ladle_batch_desc_init(&a, 0, 1);
    LT_OK(batch_aug(cols, 1, 0, 0, 2, 0, 0, 0, x3, NULL, &a));
    a.flip = 1;
    REFUSED(batch_aug(cols, 1, 0, 0, 2, 0, 0, 0, x3, NULL, &a), "reads columns 3 to 4");
    /* positions past any dataset */
    REFUSED(batch_aug(ds, 1, 0, INT64_MAX / 2, 4, 0, 0, 0, x, NULL, &a), "step");
    LT_ASSERT(batch_aug(NULL, 1, 0, 0, 2, 0, 0, 0, x, NULL, &a) == LADLE_ERR_NULL &&
                  ladle_dataset_batch(ds, NULL, 0, 0, x, NULL) == LADLE_ERR_NULL,
              "NULL dataset or descriptor");
    ladle_error_clear();
    ladle_batch_desc zero = {0}; /* never through its _init */
    REFUSED(ladle_dataset_batch(ds, &zero, 0, 0, x, NULL), "descriptor size 0");
    ladle_batch_desc_init(NULL, 1, 2); /* accepts NULL */
    ladle_error_clear();
    ladle_tensor_destroy(&x), ladle_tensor_destroy(&x2), ladle_tensor_destroy(&x3);
    ladle_dataset_destroy(&ds), ladle_dataset_destroy(&part), ladle_dataset_destroy(&cols);
}
END_TEST

/* The names of 0.1: ladle_dataset_batch_ex with ladle_augment_options gives
 * ladle_dataset_batch's batch bit for bit, and NULL options none. */
START_TEST(deprecated_batch_ex)
{
    ladle_dataset *ds = load(0, 0, 0, 0);
    int64_t xs[4] = {4, 1, H - 1, W - 2};
    ladle_tensor *x = lt_tensor(LADLE_F64, 4, xs), *old = lt_tensor(LADLE_F64, 4, xs);
    double *v = malloc(sizeof(double) * 4 * H * W), *o = malloc(sizeof(double) * 4 * H * W);
    ladle_batch_desc d;
    ladle_batch_desc_init(&d, 7, 9);
    d.offset = 3, d.row_off = 1, d.col_off = 2, d.crop_pad = 2, d.flip = 1;
    for (int with = 0; with < 2; with++) {
        LT_DEPRECATED_BEGIN
        ladle_augment_options a;
        ladle_augment_options_init(&a);
        a.crop_pad = 2;
        a.flip = 1;
        LT_OK(ladle_dataset_batch_ex(ds, 7, 2, 3, 9, 3, 1, 2, old, NULL, with ? &a : NULL));
        LT_DEPRECATED_END
        d.crop_pad = with ? 2 : 0, d.flip = with;
        LT_OK(ladle_dataset_batch(ds, &d, 2, 3, x, NULL));
        LT_OK(ladle_tensor_read(x, v));
        LT_OK(ladle_tensor_read(old, o));
        LT_ASSERT(memcmp(v, o, sizeof(double) * 4 * (H - 1) * (W - 2)) == 0,
                  "batch_ex %s augmentation differs from ladle_dataset_batch",
                  with ? "with" : "without");
    }
    free(v), free(o);
    ladle_tensor_destroy(&x), ladle_tensor_destroy(&old);
    ladle_dataset_destroy(&ds);
}
END_TEST

static Suite *augment_suite(void)
{
    TCase *tc = NULL;
    Suite *s = lt_suite("augment", "augment", 0, &tc,
                        LT_TESTS(same_on_every_layout, offsets_by_hand,
                                 flip_inverse_and_half, hostile, deprecated_batch_ex));
    tcase_add_unchecked_fixture(tc, setup, teardown);
    return s;
}

LT_MAIN(augment_suite)
