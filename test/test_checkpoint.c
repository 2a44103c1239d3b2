/* Checkpoints: written on one layout, loaded on another (or on sequential
 * layers), training continues exactly; torn, truncated, altered and foreign
 * files are refused on every rank; writes that fail (a file size limit, a
 * path through a regular file, a directory, a missing directory, a FIFO)
 * say why on every rank, leave no .tmp behind and the previous checkpoint
 * intact; an optimizer that does not hold the network's parameters is
 * refused; payloads cut into many small chunks arrive whole. */
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include "harness.h"
#include "train/checkpoint_impl.h"

#define N 12
#define S 16

static ladle_tensor *X;
static int64_t labels[N];

static ladle_network *lenet(int D, int Ph, int Pw, int F, int seq, int bn)
{
    ladle_lenet_desc d;
    lt_lenet_desc(&d, N, S, 3);
    d.batchnorm = bn;
    d.sequential = seq;
    d.data_ways = D;
    d.spatial[0] = Ph;
    d.spatial[1] = Pw;
    d.fc_ways = F;
    ladle_network *net = NULL;
    LT_OK(ladle_lenet_create(&d, ladle_comm_of(MPI_COMM_WORLD), &net));
    return net;
}

static ladle_optimizer *adam(ladle_network *net)
{
    ladle_optimizer_desc od;
    ladle_optimizer_desc_init(&od, LADLE_OPT_ADAM, 0.01);
    ladle_optimizer *opt = NULL;
    LT_OK(ladle_optimizer_create(&od, &opt));
    LT_OK(ladle_optimizer_add_network(opt, net));
    return opt;
}

/* steps of training; losses[] gets each step's loss (on the loss's ranks) */
static void train(ladle_network *net, ladle_optimizer *opt, int steps, double *losses)
{
    ladle_op *first = ladle_network_layer(net, 0), *loss = ladle_network_loss_op(net);
    int64_t off[4] = {0}, box[4] = {N, 1, S, S}, loff[2] = {0}, lbox[2] = {N};
    if (ladle_op_x_layout(first)) {
        ladle_layout_box(ladle_op_x_layout(first), LADLE_SELF, off, box);
        ladle_layout_box(ladle_op_x_layout(loss), LADLE_SELF, loff, lbox);
    }
    ladle_tensor *x = lt_tensor(LADLE_F64, 4, box), *t = lt_tensor(LADLE_I64, 1, lbox);
    lt_box_extract(X, off, x);
    for (int64_t i = 0; i < lbox[0]; i++)
        lt_set(t, i, labels[loff[0] + i]);
    for (int s = 0; s < steps; s++) {
        lt_train_step(net, opt, x, t, &losses[s]);
    }
    ladle_tensor_destroy(&x);
    ladle_tensor_destroy(&t);
}

static double param_error(ladle_network *a, ladle_network *ref)
{
    double err = 0;
    for (int i = 0; i < ladle_network_size(a); i++)
        for (int q = 0; q < ladle_op_num_params(ladle_network_layer(a, i)); q++) {
            int64_t off[LADLE_MAX_NDIM];
            ladle_op *l = ladle_network_layer(a, i);
            LT_OK(ladle_op_param_shard(l, q, NULL, NULL, off, NULL));
            err = fmax(err, lt_box_error(ladle_op_param(ladle_network_layer(ref, i), q), off,
                                         ladle_op_param(l, q)));
        }
    return err;
}


/* Save after 3 of 5 steps; resume on the same layout (bitwise the same
 * parameters and losses as the uninterrupted run), on another layout and on
 * sequential layers (the same up to the layouts' summation order). */
START_TEST(resume_on_another_layout)
{
    int a = lt_size >= 4 ? 2 : 1, b = lt_size >= 2 ? 2 : 1;
    double la[5], lb[5];
    ladle_network *na = lenet(a, lt_size >= 4 ? 2 : 1, 1, 1, 0, 1);
    ladle_optimizer *oa = adam(na);
    const char *file = "/tmp/ladle_ckpt_test.bin";
    int64_t meta[2] = {3, 42};
    train(na, oa, 3, la);
    LT_OK(ladle_checkpoint_save(file, ladle_comm_of(MPI_COMM_WORLD), na, oa, 2, meta));
    train(na, oa, 2, la + 3); /* uninterrupted */
    for (int k = 0; k < 3; k++) {
        ladle_network *nb = k == 0   ? lenet(a, lt_size >= 4 ? 2 : 1, 1, 1, 0, 1)
                            : k == 1 ? lenet(1, b, 1, b, 0, 1)
                                     : lenet(1, 1, 1, 1, 1, 1);
        ladle_optimizer *ob = adam(nb);
        int64_t got[4] = {0};
        int nm = 0;
        LT_OK(ladle_checkpoint_load(file, ladle_comm_of(MPI_COMM_WORLD), nb, ob, 4, got,
                                    &nm));
        LT_ASSERT(nm == 2 && got[0] == 3 && got[1] == 42, "the caller's integers: %d %lld %lld",
                  nm, (long long)got[0], (long long)got[1]);
        LT_ASSERT(ladle_optimizer_steps(ob) == 3, "steps %lld", (long long)ladle_optimizer_steps(ob));
        train(nb, ob, 2, lb + 3);
        /* nb's shards against na's: gather-free, both against a sequential
         * copy of the uninterrupted parameters would need one more run, so
         * compare the losses everywhere and the parameters through a third
         * network on sequential layers loaded with na's state */
        double lerr = 0;
        const ladle_layout *la_l = ladle_op_x_layout(ladle_network_loss_op(na));
        const ladle_layout *lb_l = ladle_op_x_layout(ladle_network_loss_op(nb));
        int ina = !la_l || ladle_partition_active(ladle_layout_partition(la_l));
        int inb = !lb_l || ladle_partition_active(ladle_layout_partition(lb_l));
        for (int s = 3; s < 5; s++) {
            double x = ina ? la[s] : 0, y = inb ? lb[s] : 0;
            /* every rank learns both losses */
            MPI_Allreduce(MPI_IN_PLACE, &x, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
            MPI_Allreduce(MPI_IN_PLACE, &y, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
            lerr = fmax(lerr, fabs(x - y) / (1 + fabs(x)));
        }
        const char *end = "/tmp/ladle_ckpt_end.bin", *end2 = "/tmp/ladle_ckpt_end2.bin";
        LT_OK(ladle_checkpoint_save(end, ladle_comm_of(MPI_COMM_WORLD), na, NULL, 0, NULL));
        LT_OK(
            ladle_checkpoint_save(end2, ladle_comm_of(MPI_COMM_WORLD), nb, NULL, 0, NULL));
        ladle_network *ra = lenet(1, 1, 1, 1, 1, 1), *rb = lenet(1, 1, 1, 1, 1, 1);
        LT_OK(ladle_checkpoint_load(end, ladle_comm_of(MPI_COMM_WORLD), ra, NULL, 0, NULL,
                                    NULL));
        LT_OK(ladle_checkpoint_load(end2, ladle_comm_of(MPI_COMM_WORLD), rb, NULL, 0, NULL,
                                    NULL));
        double err = param_error(rb, ra);
        double tol = k == 0 ? 0.0 : 1e-8;
        LT_ASSERT(err <= tol && lerr <= (k == 0 ? 0.0 : 1e-12),
                  "resumed on %s: parameters %.2e, losses %.2e from the uninterrupted run",
                  k == 0 ? "the same layout" : k == 1 ? "another layout" : "sequential layers",
                  err, lerr);
        ladle_network_destroy(&ra), ladle_network_destroy(&rb);
        ladle_optimizer_destroy(&ob);
        ladle_network_destroy(&nb);
        if (lt_rank == 0)
            remove(end), remove(end2);
    }
    ladle_optimizer_destroy(&oa), ladle_network_destroy(&na);
    if (lt_rank == 0)
        remove(file);
}
END_TEST

/* Damage a copy of a good checkpoint and expect every rank to refuse it. */
START_TEST(damaged_files)
{
    ladle_network *net = lenet(1, 1, 1, 1, 1, 0);
    const char *good = "/tmp/ladle_ckpt_good.bin", *bad = "/tmp/ladle_ckpt_bad.bin";
    const int64_t meta[3] = {7, -2, INT64_MAX};
    LT_OK(ladle_checkpoint_save(good, ladle_comm_of(MPI_COMM_WORLD), net, NULL, 3, meta));
    /* the integers alone, whatever network reads them; room for fewer */
    int64_t got[4] = {0, 0, 0, 0};
    int n = 0;
    LT_OK(ladle_checkpoint_read_meta(good, ladle_comm_of(MPI_COMM_WORLD), 4, got, &n));
    LT_ASSERT(n == 3 && got[0] == 7 && got[1] == -2 && got[2] == INT64_MAX && got[3] == 0,
              "read_meta: %d integers %lld %lld %lld", n, (long long)got[0], (long long)got[1],
              (long long)got[2]);
    got[1] = 0;
    LT_OK(ladle_checkpoint_read_meta(good, ladle_comm_of(MPI_COMM_WORLD), 1, got, &n));
    LT_ASSERT(n == 3 && got[1] == 0, "room for one integer: %d, %lld", n, (long long)got[1]);
    LT_FAILS(ladle_checkpoint_read_meta(good, ladle_comm_of(MPI_COMM_WORLD), -1, got, &n),
             LADLE_ERR_ARG);
    LT_FAILS(ladle_checkpoint_read_meta(NULL, ladle_comm_of(MPI_COMM_WORLD), 4, got, &n),
             LADLE_ERR_NULL);
    LT_FAILS(ladle_checkpoint_read_meta("/tmp", ladle_comm_of(MPI_COMM_WORLD), 4, got, &n),
             LADLE_ERR_IO);
    long len = 0;
    char *bytes = NULL;
    if (lt_rank == 0) {
        FILE *f = fopen(good, "rb");
        fseek(f, 0, SEEK_END);
        len = ftell(f);
        fseek(f, 0, SEEK_SET);
        bytes = malloc((size_t)len);
        if (fread(bytes, 1, (size_t)len, f) != (size_t)len)
            len = 0;
        fclose(f);
    }
    for (int kind = 0; kind < 3; kind++) {
        if (lt_rank == 0) {
            FILE *f = fopen(bad, "wb");
            if (kind == 0) /* truncated */
                fwrite(bytes, 1, (size_t)len / 2, f);
            else if (kind == 1) { /* one byte altered in the middle */
                bytes[len / 2] ^= 0x40;
                fwrite(bytes, 1, (size_t)len, f);
                bytes[len / 2] ^= 0x40;
            } else /* not a checkpoint */
                fwrite("hello, this is not a checkpoint at all, clearly", 1, 48, f);
            fclose(f);
        }
        MPI_Barrier(MPI_COMM_WORLD);
        LT_FAILS(ladle_checkpoint_load(bad, ladle_comm_of(MPI_COMM_WORLD), net, NULL, 0,
                                       NULL, NULL),
                 LADLE_ERR_IO);
        LT_FAILS(ladle_checkpoint_read_meta(bad, ladle_comm_of(MPI_COMM_WORLD), 4, got, &n),
                 LADLE_ERR_IO);
    }
    /* another architecture: batch norm where the file has none */
    ladle_network *other = lenet(1, 1, 1, 1, 1, 1);
    LT_FAILS(ladle_checkpoint_load(good, ladle_comm_of(MPI_COMM_WORLD), other, NULL, 0,
                                   NULL, NULL),
             LADLE_ERR_SHAPE);
    LT_FAILS(ladle_checkpoint_load("/tmp/ladle_no_such_file", ladle_comm_of(MPI_COMM_WORLD),
                                   net, NULL, 0, NULL, NULL),
             LADLE_ERR_IO);
    free(bytes);
    ladle_network_destroy(&net);
    ladle_network_destroy(&other);
    if (lt_rank == 0) {
        remove(good);
        remove(bad);
    }
}
END_TEST

/* A path of this run's own under /tmp (rank 0's pid in it), so that runs
 * of the suite at the same time never share a file. */
static void own_path(char *buf, size_t cap, const char *name)
{
    int pid = lt_rank == 0 ? (int)getpid() : 0;
    MPI_Bcast(&pid, 1, MPI_INT, 0, MPI_COMM_WORLD);
    snprintf(buf, cap, "/tmp/ladle_ckpt_%d_%s", pid, name);
}

/* The bytes of a file (rank 0 only; -1 and NULL when it cannot be read). */
static long slurp(const char *path, char **bytes)
{
    *bytes = NULL;
    FILE *f = lt_rank == 0 ? fopen(path, "rb") : NULL;
    long len = -1;
    if (f != NULL && fseek(f, 0, SEEK_END) == 0 && (len = ftell(f)) >= 0 &&
        fseek(f, 0, SEEK_SET) == 0) {
        *bytes = malloc((size_t)len + 1);
        if (*bytes == NULL || fread(*bytes, 1, (size_t)len, f) != (size_t)len)
            len = -1;
    }
    if (f != NULL)
        fclose(f);
    return len;
}

static int exists(const char *path)
{
    struct stat sb;
    return stat(path, &sb) == 0;
}

/* The message, kept before ladle_error_clear. */
static const char *said(char *buf, size_t cap)
{
    snprintf(buf, cap, "%s", ladle_error_message());
    ladle_error_clear();
    return buf;
}

/* A save under a file size limit (on the writing rank) at each of several
 * sizes: nothing written, inside the header, inside the data, at the
 * trailer, inside it. Every rank gets LADLE_ERR_IO with the system's
 * reason; no .tmp stays; the checkpoint saved before is the same bytes and
 * still loads. */
START_TEST(failed_writes)
{
    ladle_network *net = lenet(1, 1, 1, 1, 1, 0);
    ladle_optimizer *opt = adam(net);
    char file[256], tmp[300], msg[1024];
    double losses[1];
    own_path(file, sizeof file, "fault.bin");
    snprintf(tmp, sizeof tmp, "%s.tmp", file);
    int64_t meta[1] = {7};
    LT_OK(ladle_checkpoint_save(file, ladle_comm_of(MPI_COMM_WORLD), net, opt, 1, meta));
    char *before = NULL;
    long len = slurp(file, &before);
    MPI_Bcast(&len, 1, MPI_LONG, 0, MPI_COMM_WORLD);
    LT_ASSERT(len > 1000, "the first save wrote %ld bytes", len);
    train(net, opt, 1, losses); /* a new state: a successful save would change the file */
    long limits[5] = {0, 20, len / 2, len - 24, len - 1};
    for (int k = 0; k < 5; k++) {
        struct rlimit old, lim;
        if (lt_rank == 0) {
            signal(SIGXFSZ, SIG_IGN);
            getrlimit(RLIMIT_FSIZE, &old);
            lim.rlim_cur = (rlim_t)limits[k];
            lim.rlim_max = old.rlim_max;
            setrlimit(RLIMIT_FSIZE, &lim);
        }
        ladle_status st =
            ladle_checkpoint_save(file, ladle_comm_of(MPI_COMM_WORLD), net, opt, 1, meta);
        if (lt_rank == 0)
            setrlimit(RLIMIT_FSIZE, &old);
        said(msg, sizeof msg);
        char *after = NULL;
        long alen = slurp(file, &after);
        int intact =
            lt_rank != 0 || (alen == len && memcmp(before, after, (size_t)len) == 0);
        int stale = lt_rank == 0 && exists(tmp);
        LT_ASSERT(st == LADLE_ERR_IO && strstr(msg, "File too large") &&
                      strstr(msg, "write") && intact && !stale,
                  "limit %ld of %ld bytes: %s (%s), old file %s, %s left", limits[k], len,
                  ladle_status_name(st), msg, intact ? "intact" : "changed",
                  stale ? "a .tmp" : "no .tmp");
        free(after);
        ladle_network *other = lenet(1, 1, 1, 1, 1, 0);
        ladle_optimizer *oo = adam(other);
        int64_t got[1] = {0};
        LT_OK(ladle_checkpoint_load(file, ladle_comm_of(MPI_COMM_WORLD), other, oo, 1, got,
                                    NULL));
        LT_ASSERT(got[0] == 7 && ladle_optimizer_steps(oo) == 0, "the old checkpoint");
        ladle_optimizer_destroy(&oo);
        ladle_network_destroy(&other);
    }
    free(before);
    if (lt_rank == 0)
        remove(file);
    ladle_optimizer_destroy(&opt);
    ladle_network_destroy(&net);
}
END_TEST

/* Paths that cannot be written or read: through a regular file (ENOTDIR),
 * a directory, a directory that does not exist; the pre-flight check says
 * so before any save, and passes a good path without leaving anything. */
START_TEST(bad_paths)
{
    ladle_network *net = lenet(1, 1, 1, 1, 1, 0);
    char plain[256], dir[256], through[300], missing[300], good[256], tmp[300], msg[1024];
    char fifo[256];
    own_path(fifo, sizeof fifo, "fifo");
    own_path(plain, sizeof plain, "plain");
    own_path(dir, sizeof dir, "dir");
    own_path(good, sizeof good, "good.bin");
    snprintf(through, sizeof through, "%s/ckpt.bin", plain);
    snprintf(missing, sizeof missing, "%s_missing/ckpt.bin", dir);
    snprintf(tmp, sizeof tmp, "%s.tmp", good);
    if (lt_rank == 0) {
        FILE *f = fopen(plain, "w");
        if (f)
            fclose(f);
        mkdir(dir, 0700);
        mkfifo(fifo, 0600); /* opening it blocks unless the library takes care */
    }
    MPI_Barrier(MPI_COMM_WORLD);
    struct {
        const char *path, *reason;
    } cases[4] = {{through, "Not a directory"},
                  {dir, "directory"},
                  {missing, "No such file or directory"},
                  {fifo, "not a regular file"}};
    for (int k = 0; k < 4; k++) {
        ladle_status st =
            ladle_checkpoint_check_path(cases[k].path, ladle_comm_of(MPI_COMM_WORLD));
        said(msg, sizeof msg);
        LT_ASSERT(st == LADLE_ERR_IO && strstr(msg, cases[k].reason), "check %s: %s (%s)",
                  cases[k].path, ladle_status_name(st), msg);
        st = ladle_checkpoint_save(cases[k].path, ladle_comm_of(MPI_COMM_WORLD), net, NULL,
                                   0, NULL);
        said(msg, sizeof msg);
        LT_ASSERT(st == LADLE_ERR_IO && strstr(msg, cases[k].reason), "save %s: %s (%s)",
                  cases[k].path, ladle_status_name(st), msg);
        st = ladle_checkpoint_load(cases[k].path, ladle_comm_of(MPI_COMM_WORLD), net, NULL,
                                   0, NULL, NULL);
        said(msg, sizeof msg);
        LT_ASSERT(st == LADLE_ERR_IO && strstr(msg, cases[k].reason) &&
                      !strstr(msg, "out of memory"),
                  "load %s: %s (%s)", cases[k].path, ladle_status_name(st), msg);
    }
    LT_OK(ladle_checkpoint_check_path(good, ladle_comm_of(MPI_COMM_WORLD)));
    LT_ASSERT(lt_rank != 0 || (!exists(good) && !exists(tmp)), "the check left a file");
    LT_FAILS(ladle_checkpoint_check_path(NULL, ladle_comm_of(MPI_COMM_WORLD)),
             LADLE_ERR_NULL);
    if (lt_rank == 0) {
        remove(plain);
        remove(fifo);
        rmdir(dir);
    }
    ladle_network_destroy(&net);
}
END_TEST

/* An optimizer saved or loaded with a network must hold exactly its
 * parameters, in order: none, another network's, or the right ones in
 * another order are LADLE_ERR_ARG on every rank, and nothing is written. */
START_TEST(optimizer_must_match)
{
    ladle_network *net = lenet(1, 1, 1, 1, 1, 0), *other = lenet(1, 1, 1, 1, 1, 0);
    ladle_optimizer_desc od;
    ladle_optimizer_desc_init(&od, LADLE_OPT_ADAM, 0.01);
    ladle_optimizer *empty = NULL, *foreign = adam(other), *reversed = NULL, *mixed = NULL;
    LT_OK(ladle_optimizer_create(&od, &empty));
    LT_OK(ladle_optimizer_create(&od, &reversed));
    for (int i = ladle_network_size(net) - 1; i >= 0; i--)
        LT_OK(ladle_optimizer_add_op(reversed, ladle_network_layer(net, i)));
    /* the right optimizer everywhere but on the last rank */
    LT_OK(ladle_optimizer_create(&od, &mixed));
    int last = lt_rank == lt_size - 1 && lt_size > 1; /* not a collective call */
    ladle_status added = last ? LADLE_OK : ladle_optimizer_add_network(mixed, net);
    LT_ASSERT(added == LADLE_OK, "%s", ladle_error_message());
    char file[256], msg[1024];
    own_path(file, sizeof file, "opt.bin");
    struct {
        ladle_optimizer *opt;
        const char *word;
    } cases[4] = {{empty, "holds 0 parameters"},
                  {foreign, "not the network's"},
                  {reversed, "not the network's"},
                  {mixed, lt_size == 1 ? "" : "parameters"}};
    for (int k = 0; k < 4; k++) {
        if (k == 3 && lt_size == 1)
            continue;
        ladle_status st = ladle_checkpoint_save(file, ladle_comm_of(MPI_COMM_WORLD), net,
                                                cases[k].opt, 0, NULL);
        said(msg, sizeof msg);
        LT_ASSERT(st == LADLE_ERR_ARG && strstr(msg, cases[k].word) &&
                      (lt_rank != 0 || !exists(file)),
                  "save with optimizer %d: %s (%s)", k, ladle_status_name(st), msg);
    }
    LT_OK(ladle_checkpoint_save(file, ladle_comm_of(MPI_COMM_WORLD), net, NULL, 0, NULL));
    for (int k = 0; k < 4; k++) {
        if (k == 3 && lt_size == 1)
            continue;
        ladle_status st = ladle_checkpoint_load(file, ladle_comm_of(MPI_COMM_WORLD), net,
                                                cases[k].opt, 0, NULL, NULL);
        said(msg, sizeof msg);
        LT_ASSERT(st == LADLE_ERR_ARG && strstr(msg, cases[k].word),
                  "load with optimizer %d: %s (%s)", k, ladle_status_name(st), msg);
    }
    if (lt_rank == 0)
        remove(file);
    ladle_optimizer_destroy(&empty), ladle_optimizer_destroy(&foreign);
    ladle_optimizer_destroy(&reversed), ladle_optimizer_destroy(&mixed);
    ladle_network_destroy(&net), ladle_network_destroy(&other);
}
END_TEST

/* Save and load with chunks of 1003 bytes (a few thousand messages, none
 * a whole number of elements): the file is byte for byte the one the
 * public call writes, and loading it into sequential layers and into
 * another layout gives exactly the saved network's parameters and steps. */
START_TEST(chunked_transfers)
{
    int b = lt_size >= 2 ? 2 : 1;
    char big[256], small[256];
    own_path(big, sizeof big, "whole");
    own_path(small, sizeof small, "chunked");
    double l[2];
    ladle_network *na = lenet(1, b, 1, b, 0, 1);
    ladle_optimizer *oa = adam(na);
    train(na, oa, 2, l);
    int64_t meta[1] = {7};
    LT_OK(ladle_checkpoint_save(big, ladle_comm_of(MPI_COMM_WORLD), na, oa, 1, meta));
    LT_OK(ladle__checkpoint_save_chunked(small, MPI_COMM_WORLD, na, oa, 1, meta, 1003));
    int same = 1;
    if (lt_rank == 0) {
        char *x = NULL, *y = NULL;
        long nx = slurp(big, &x), ny = slurp(small, &y);
        same = nx > 100000 && nx == ny && memcmp(x, y, (size_t)nx) == 0;
        free(x), free(y);
    }
    LT_ASSERT(same, "the chunked save wrote other bytes than the whole one");
    for (int k = 0; k < 2; k++) {
        ladle_network *nb = k == 0 ? lenet(1, 1, 1, 1, 1, 1) : lenet(1, b, 1, 1, 0, 1);
        ladle_optimizer *ob = adam(nb);
        int64_t got[1] = {0};
        int nm = 0;
        LT_OK(ladle__checkpoint_load_chunked(small, MPI_COMM_WORLD, nb, ob, 1, got, &nm, 1003));
        LT_ASSERT(nm == 1 && got[0] == 7 && ladle_optimizer_steps(ob) == 2,
                  "integers %d %lld, steps %lld", nm, (long long)got[0],
                  (long long)ladle_optimizer_steps(ob));
        if (k == 0) { /* the saved shards against the loaded global tensors */
            double err = param_error(na, nb);
            LT_ASSERT(err == 0.0, "the chunked load differs from the saved values by %.2e", err);
        } else { /* another layout's shards against a whole-chunk load */
            ladle_network *ref = lenet(1, 1, 1, 1, 1, 1);
            ladle_optimizer *oref = adam(ref);
            LT_OK(ladle_checkpoint_load(big, ladle_comm_of(MPI_COMM_WORLD), ref, oref, 0,
                                        NULL, NULL));
            double err = param_error(nb, ref);
            LT_ASSERT(err == 0.0, "on another layout the load differs by %.2e", err);
            ladle_optimizer_destroy(&oref), ladle_network_destroy(&ref);
        }
        ladle_optimizer_destroy(&ob), ladle_network_destroy(&nb);
    }
    LT_FAILS(ladle__checkpoint_save_chunked(small, MPI_COMM_WORLD, na, oa, 0, NULL, 0),
             LADLE_ERR_ARG);
    LT_FAILS(ladle__checkpoint_load_chunked(small, MPI_COMM_WORLD, na, oa, 0, NULL, NULL,
                                            ((int64_t)1 << 30) + 1),
             LADLE_ERR_ARG);
    ladle_optimizer_destroy(&oa), ladle_network_destroy(&na);
    if (lt_rank == 0)
        remove(big), remove(small);
}
END_TEST

/* The Fortran-handle twins (bindings hold an MPI_Fint) do what the
 * MPI_Comm calls do: a network made through one, saved, its integers read
 * back and loaded into another through the others, the same parameters. */
START_TEST(fortran_handle_twins)
{
    LT_DEPRECATED_BEGIN
    MPI_Fint world = MPI_Comm_c2f(MPI_COMM_WORLD);
    ladle_lenet_desc d;
    lt_lenet_desc(&d, N, S, 5);
    d.data_ways = lt_size >= 2 ? 2 : 1;
    ladle_network *a = NULL, *ref = NULL;
    LT_OK(ladle_lenet_create_f(&d, world, &a));
    LT_OK(ladle_lenet_create(&d, ladle_comm_of(MPI_COMM_WORLD), &ref));
    ladle_network *b = lenet(d.data_ways, 1, 1, 1, 0, 0); /* seed 3: other weights */
    /* (ranks beyond the layout's hold no weights) */
    LT_ASSERT(param_error(a, ref) == 0 && (param_error(b, ref) > 0 || lt_rank >= d.data_ways),
              "the same weights as the C call");
    const char *file = "/tmp/ladle_ckpt_fint.bin";
    const int64_t meta[2] = {11, -4};
    LT_OK(ladle_checkpoint_check_path_f(file, world));
    LT_OK(ladle_checkpoint_save_f(file, world, a, NULL, 2, meta));
    int64_t got[2] = {0, 0};
    int n = 0;
    LT_OK(ladle_checkpoint_read_meta_f(file, world, 2, got, &n));
    LT_ASSERT(n == 2 && got[0] == 11 && got[1] == -4, "read_meta_f: %d", n);
    got[0] = got[1] = 0;
    LT_OK(ladle_checkpoint_load_f(file, world, b, NULL, 2, got, &n));
    LT_ASSERT(n == 2 && got[0] == 11 && param_error(b, ref) == 0, "load_f");
    /* the null handle is refused as MPI_COMM_NULL is */
    LT_FAILS(ladle_checkpoint_check_path_f(file, MPI_Comm_c2f(MPI_COMM_NULL)), LADLE_ERR_ARG);
    if (lt_rank == 0)
        remove(file);
    ladle_network_destroy(&a);
    ladle_network_destroy(&b);
    ladle_network_destroy(&ref);
    LT_DEPRECATED_END
}
END_TEST

static Suite *ck_suite(void)
{
    return lt_suite("checkpoint", "checkpoint", 0, NULL,
                    LT_TESTS(resume_on_another_layout, damaged_files, failed_writes,
                             bad_paths, optimizer_must_match, chunked_transfers,
                             fortran_handle_twins));
}

static Suite *make(void)
{
    X = lt_tensor(LADLE_F64, 4, (int64_t[]){N, 1, S, S});
    ladle_tensor_fill_random(X, 21, 0);
    for (int i = 0; i < N; i++)
        labels[i] = (i * 3 + 2) % 10;
    return ck_suite();
}

LT_MAIN(make)
