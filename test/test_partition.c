/* Partitions and layouts. */
#include <string.h>

#include "harness.h"
#include "src/core/internal.h"

START_TEST(row_major_coordinates_and_ranks_as_given)
{
    LT_NEED_RANKS(6);
    /* partition rank r is ranks[r]; coordinates are row-major */
    int shape[2] = {2, 3}, ranks[6] = {5, 3, 1, 0, 2, 4};
    ladle_partition *p = lt_partition_ranks(2, shape, ranks);
    int expect_rank = -1;
    for (int r = 0; r < 6; r++)
        if (ranks[r] == lt_rank)
            expect_rank = r;
    LT_ASSERT(ladle_partition_rank(p) == expect_rank, "rank %d", ladle_partition_rank(p));
    LT_ASSERT(ladle_partition_size(p) == 6 && ladle_partition_ndim(p) == 2, "size");
    const int *c = ladle_partition_coords(p);
    LT_ASSERT(c != NULL && c[0] == expect_rank / 3 && c[1] == expect_rank % 3, "coords");
    LT_ASSERT(ladle_partition_parent_rank(p, 0) == 5 &&
                  ladle_partition_parent_rank(p, 5) == 4,
              "parent ranks");
    int q[2] = {1, 2}, r = -1;
    LT_OK(ladle_partition_rank_of(p, q, &r));
    LT_ASSERT(r == 5, "rank_of (1,2) = %d", r);
    LT_OK(ladle_partition_coords_of(p, 4, q));
    LT_ASSERT(q[0] == 1 && q[1] == 1, "coords_of 4");
    /* neighbours are not periodic */
    LT_ASSERT(ladle_partition_neighbor(p, 0, 0, LADLE_DIR_LOWER) == -1, "no left of 0 in dim 0");
    LT_ASSERT(ladle_partition_neighbor(p, 0, 0, LADLE_DIR_HIGHER) == 3, "below 0 is 3");
    LT_ASSERT(ladle_partition_neighbor(p, 4, 1, LADLE_DIR_HIGHER) == 5 &&
                  ladle_partition_neighbor(p, 5, 1, LADLE_DIR_HIGHER) == -1,
              "right");
    /* the private communicator orders members by partition rank */
    MPI_Comm comm = ladle_comm_mpi(ladle_partition_comm(p));
    int cr = -1, cs = 0, cmp = 0;
    if (comm != MPI_COMM_NULL) {
        MPI_Comm_rank(comm, &cr);
        MPI_Comm_size(comm, &cs);
        MPI_Comm_compare(comm, MPI_COMM_WORLD, &cmp);
    }
    LT_ASSERT(cr == expect_rank && cs == (expect_rank >= 0 ? 6 : 0), "comm rank %d", cr);
    LT_ASSERT(comm == MPI_COMM_NULL || cmp != MPI_IDENT, "never the caller's communicator");
    ladle_partition_destroy(&p);
    LT_ASSERT(p == NULL, "destroy nulls");
}
END_TEST

START_TEST(inactive_ranks_know_the_grid)
{
    int shape[1] = {1};
    ladle_partition *p = lt_partition(1, shape, lt_size - 1);
    int member = lt_rank == lt_size - 1;
    LT_ASSERT(ladle_partition_active(p) == member, "active");
    LT_ASSERT(ladle_partition_size(p) == 1 && ladle_partition_shape(p)[0] == 1, "shape");
    LT_ASSERT(member ||
                  (ladle_partition_rank(p) == -1 && ladle_partition_coords(p) == NULL &&
                   ladle_comm_mpi(ladle_partition_comm(p)) == MPI_COMM_NULL),
              "inactive");
    ladle_partition_destroy(&p);
}
END_TEST

START_TEST(zero_dimensional_partition)
{
    ladle_partition *p = lt_partition_ranks(0, NULL, NULL);
    LT_ASSERT(ladle_partition_size(p) == 1 && ladle_partition_active(p) == (lt_rank == 0),
              "one rank");
    ladle_partition_destroy(&p);
}
END_TEST

START_TEST(subset_sub_and_union)
{
    LT_NEED_RANKS(4);
    int shape[2] = {2, 2};
    ladle_partition *p = lt_partition(2, shape, 0), *sub = NULL, *row = NULL, *u = NULL;
    /* subset: partition ranks 3 and 1 of p as a 2-grid */
    int one[1] = {2}, ranks[2] = {3, 1};
    LT_OK(ladle_partition_create_subset(p, 1, one, ranks, &sub));
    LT_ASSERT(ladle_partition_parent_rank(sub, 0) == 3 &&
                  ladle_partition_parent_rank(sub, 1) == 1,
              "subset members");
    LT_ASSERT(ladle_partition_rank(sub) == (lt_rank == 3   ? 0
                                            : lt_rank == 1 ? 1
                                                           : -1),
              "subset rank %d", ladle_partition_rank(sub));
    /* sub-grid keeping dimension 1: the row through this rank */
    int remain[2] = {0, 1};
    LT_OK(ladle_partition_create_sub(p, remain, &row));
    int ok = ladle_partition_ndim(row) == 1 && ladle_partition_shape(row)[0] == 2;
    if (lt_rank < 4) {
        int row0 = (lt_rank / 2) * 2;
        ok = ok && ladle_partition_parent_rank(row, 0) == row0 &&
             ladle_partition_parent_rank(row, 1) == row0 + 1 &&
             ladle_partition_rank(row) == lt_rank % 2;
        int cs = 0;
        MPI_Comm_size(ladle_comm_mpi(ladle_partition_comm(row)), &cs);
        ok = ok && cs == 2;
    } else {
        ok = ok && !ladle_partition_active(row);
    }
    LT_ASSERT(ok, "sub-grid");
    /* union: sub's members first, then p's others in p's order */
    LT_OK(ladle_partition_create_union(sub, p, &u));
    const int want[4] = {3, 1, 0, 2};
    int same = ladle_partition_size(u) == 4;
    for (int r = 0; same && r < 4; r++)
        same = ladle_partition_parent_rank(u, r) == want[r];
    LT_ASSERT(same, "union order");
    LT_DESTROY_PARTS(&u, &row, &sub, &p);
}
END_TEST

START_TEST(partition_bad_input)
{
    ladle_partition *p = NULL;
    int big[2] = {lt_size + 1, 1}, zero[2] = {2, 0}, one[1] = {1}, two[1] = {2};
    int dup[2] = {0, 0}, neg[1] = {-1};
    LT_FAILS(ladle_partition_create(ladle_comm_of(MPI_COMM_WORLD), 2, big, NULL, &p),
             LADLE_ERR_PARTITION);
    LT_FAILS(ladle_partition_create(ladle_comm_of(MPI_COMM_WORLD), 2, zero, NULL, &p),
             LADLE_ERR_ARG);
    LT_FAILS(ladle_partition_create(ladle_comm_of(MPI_COMM_WORLD), 1, one, neg, &p),
             LADLE_ERR_PARTITION);
    LT_FAILS(ladle_partition_create(ladle_comm_of(MPI_COMM_WORLD), -1, one, NULL, &p),
             LADLE_ERR_ARG);
    LT_FAILS(ladle_partition_create(ladle_comm_of(MPI_COMM_WORLD), 1, NULL, NULL, &p),
             LADLE_ERR_NULL);
    LT_FAILS(ladle_partition_create(ladle_comm_of(MPI_COMM_WORLD), 1, one, NULL, NULL),
             LADLE_ERR_NULL);
    LT_FAILS(ladle_partition_create(ladle_comm_of(MPI_COMM_NULL), 1, one, NULL, &p),
             LADLE_ERR_ARG);
    if (lt_size >= 2)
        LT_FAILS(ladle_partition_create(ladle_comm_of(MPI_COMM_WORLD), 1, two, dup, &p),
                 LADLE_ERR_PARTITION);
    LT_ASSERT(p == NULL, "no partition on failure");
    if (lt_size >= 2) {
        /* ranks that disagree fail together instead of hanging */
        int mine[1] = {lt_rank == 0 ? 1 : 2};
        ladle_status st =
            ladle_partition_create(ladle_comm_of(MPI_COMM_WORLD), 1, mine, NULL, &p);
        LT_ASSERT(st == LADLE_ERR_ARG, "disagreement: %s", ladle_status_name(st));
        ladle_error_clear();
    }
}
END_TEST

START_TEST(balanced_layout_matches_distdl)
{
    /* 10 over 4: sizes 3,3,2,2 and starts 0,3,6,8; 77 over 3: 26,26,25;
     * 55 over 4: 14,14,14,13; 2 over 3: 1,1,0 */
    LT_NEED_RANKS(4);
    const struct {
        int64_t n;
        int parts;
        int64_t size[4], start[4];
    } cases[] = {
        {10, 4, {3, 3, 2, 2}, {0, 3, 6, 8}},
        {77, 3, {26, 26, 25}, {0, 26, 52}},
        {55, 4, {14, 14, 14, 13}, {0, 14, 28, 42}},
        {2, 3, {1, 1, 0}, {0, 1, 2}},
    };
    for (int k = 0; k < 4; k++) {
        int shape[1] = {cases[k].parts};
        ladle_partition *p = lt_partition(1, shape, 0);
        ladle_layout *l = NULL;
        LT_OK(ladle_layout_create_balanced(p, 1, &cases[k].n, &l));
        int ok = ladle_layout_is_decomposition(l);
        for (int i = 0; i < cases[k].parts; i++) {
            int64_t off, sh;
            LT_OK(ladle_layout_box(l, i, &off, &sh));
            ok &= off == cases[k].start[i] && sh == cases[k].size[i];
        }
        int64_t off, sh;
        LT_OK(ladle_layout_box(l, LADLE_SELF, &off, &sh));
        if (lt_rank >= cases[k].parts)
            ok &= off == 0 && sh == 0;
        LT_ASSERT(ok, "case %d", k);
        ladle_layout_destroy(&l);
        ladle_partition_destroy(&p);
    }
}
END_TEST

START_TEST(split_block_and_overlap)
{
    LT_NEED_RANKS(3);
    int shape[2] = {3, 1};
    ladle_partition *p = lt_partition(2, shape, 0);
    int64_t global[2] = {77, 5}, s0[3] = {27, 25, 25}, s1[1] = {5};
    const int64_t *sizes[2] = {s0, s1};
    ladle_layout *a = NULL, *b = NULL, *blk = NULL;
    LT_OK(ladle_layout_create_split(p, 2, global, sizes, &a));
    LT_OK(ladle_layout_create_balanced(p, 2, global, &b));
    int64_t off[2], sh[2], v = 0;
    LT_OK(ladle_layout_box(a, 1, off, sh));
    LT_ASSERT(off[0] == 27 && sh[0] == 25 && off[1] == 0 && sh[1] == 5, "split box");
    /* unbalanced rank 0 [0,27) against balanced rank 1 [26,52) meet in [26,27) */
    LT_OK(ladle_layout_overlap(a, 0, b, 1, off, sh, &v));
    LT_ASSERT(v == 5 && off[0] == 26 && sh[0] == 1, "overlap");
    LT_OK(ladle_layout_overlap(a, 2, b, 0, off, sh, &v));
    LT_ASSERT(v == 0, "disjoint");
    LT_OK(ladle_layout_create_block(p, 3, (int64_t[]){1, 7, 5}, &blk));
    LT_ASSERT(ladle_layout_is_block(blk) && !ladle_layout_is_decomposition(blk) &&
                  ladle_layout_local_volume(blk, 2) == 35,
              "block");
    ladle_layout_destroy(&blk);
    /* bad split tables and shapes */
    int64_t bad0[3] = {27, 25, 24};
    const int64_t *bad[2] = {bad0, s1};
    LT_FAILS(ladle_layout_create_split(p, 2, global, bad, &blk), LADLE_ERR_SHAPE);
    LT_FAILS(ladle_layout_create_balanced(p, 3, (int64_t[]){1, 2, 3}, &blk),
             LADLE_ERR_SHAPE);
    LT_FAILS(ladle_layout_create_balanced(p, 2, (int64_t[]){-1, 2}, &blk), LADLE_ERR_SHAPE);
    LT_FAILS(ladle_layout_box(a, 7, off, sh), LADLE_ERR_ARG);
    LT_ASSERT(blk == NULL, "no layout on failure");
    /* a layout keeps its partition alive */
    ladle_partition_destroy(&p);
    LT_OK(ladle_layout_box(a, LADLE_SELF, off, sh));
    ladle_layout_destroy(&a);
    ladle_layout_destroy(&b);
}
END_TEST

/* The Fortran-handle twins (for bindings: ctypes, mpi4py, Julia, Fortran)
 * give the same partition as the MPI_Comm calls. */
START_TEST(fortran_handle_twins)
{
    int shape[2] = {1, lt_size}, ranks[64];
    if (lt_size > 64)
        return;
    for (int r = 0; r < lt_size; r++)
        ranks[r] = lt_size - 1 - r; /* reversed, to see the list honoured */
    ladle_partition *p = NULL, *q = NULL;
    LT_OK(ladle_partition_create(ladle_comm_of(MPI_COMM_WORLD), 2, shape, ranks, &p));
    LT_OK(ladle_partition_create(ladle_comm_of_fortran(MPI_Comm_c2f(MPI_COMM_WORLD)), 2,
                                 shape, ranks, &q));
    LT_ASSERT(ladle_partition_rank(p) == ladle_partition_rank(q) &&
                  ladle_partition_size(p) == ladle_partition_size(q) &&
                  ladle_partition_ndim(q) == 2 && ladle_partition_shape(q)[1] == lt_size &&
                  ladle_partition_rank(q) == lt_size - 1 - lt_rank,
              "rank %d of %d", ladle_partition_rank(q), ladle_partition_size(q));
    /* the handle of the private communicator names the same one as the
     * deprecated Fortran accessor's */
    LT_DEPRECATED_BEGIN
    ladle_partition *old = NULL;
    LT_OK(ladle_partition_create_f(MPI_Comm_c2f(MPI_COMM_WORLD), 2, shape, ranks, &old));
    LT_ASSERT(ladle_partition_rank(old) == ladle_partition_rank(q) &&
                  ladle_partition_size(old) == ladle_partition_size(q),
              "the deprecated _f call gives the same partition");
    ladle_partition_destroy(&old);
    MPI_Fint f = ladle_partition_comm_f(q);
    LT_ASSERT(f == ladle_partition_comm(q).fortran, "comm_f is comm's handle");
    LT_ASSERT(ladle_partition_comm_f(NULL) == MPI_Comm_c2f(MPI_COMM_NULL), "NULL gives null");
    LT_DEPRECATED_END
    int cmp = MPI_UNEQUAL, size = 0;
    MPI_Comm_compare(MPI_Comm_f2c(f), ladle_comm_mpi(ladle_partition_comm(q)), &cmp);
    LT_ASSERT(cmp == MPI_IDENT, "comm_f names another communicator (%d)", cmp);
    MPI_Comm_size(ladle_comm_mpi(ladle_partition_comm(q)), &size);
    LT_ASSERT(size == lt_size, "the private communicator has %d ranks", size);
    LT_ASSERT(ladle_comm_mpi(ladle_partition_comm(NULL)) == MPI_COMM_NULL,
              "NULL gives null");
    /* an inactive rank's handle is the null communicator's */
    int one[1] = {1};
    ladle_partition *last = NULL;
    LT_OK(ladle_partition_create(ladle_comm_of_fortran(MPI_Comm_c2f(MPI_COMM_WORLD)), 1,
                                 one, (int[]){lt_size - 1}, &last));
    LT_ASSERT(ladle_partition_active(last) ||
                  ladle_partition_comm(last).fortran == MPI_Comm_c2f(MPI_COMM_NULL),
              "inactive comm_f");
    /* the null handle is refused as MPI_COMM_NULL is */
    ladle_partition *bad = NULL;
    LT_FAILS(ladle_partition_create(ladle_comm_of_fortran(MPI_Comm_c2f(MPI_COMM_NULL)), 2,
                                    shape, NULL, &bad),
             LADLE_ERR_ARG);
    LT_ASSERT(bad == NULL, "no object on failure");
    LT_DESTROY_PARTS(&last, &q, &p);
}
END_TEST

/* Which MPI ladle was built with, and the refusal of another family. */
START_TEST(mpi_identity_and_refusal)
{
    const char *lib = ladle_mpi_library();
    LT_ASSERT(lib != NULL && strcmp(lib, LADLE_MPI_HEADER) == 0,
              "ladle_mpi_library() '%s', this test's mpi.h '%s'", lib, LADLE_MPI_HEADER);
    /* the running MPI is the build's */
    char version[MPI_MAX_LIBRARY_VERSION_STRING];
    int len = 0;
    MPI_Get_library_version(version, &len);
    LT_ASSERT(ladle__mpi_compatible(lib, version), "'%s' against '%s'", lib, version);

    /* the comparison: families, not versions; derivatives of MPICH share
     * its interface; unknown names only match themselves */
    struct {
        const char *build, *other;
        int same;
    } cases[] = {
        {"MPICH 4.0.2", "MPICH Version:      4.0.2\nMPICH Release date: ...", 1},
        {"MPICH 4.0.2", "MPICH Version:\t3.4.1", 1},
        {"MPICH 4.0.2", "Intel(R) MPI Library 2021.6 for Linux* OS", 1},
        {"MPICH 4.0.2", "MVAPICH2 Version      :\t2.3.7", 1},
        {"MPICH 4.0.2", "Open MPI v4.1.4, package: Debian OpenMPI", 0},
        {"MPICH 4.0.2", "Open MPI 4.1.4", 0},
        {"Open MPI 4.1.4", "Open MPI v5.0.3, package: Open MPI", 1},
        {"Open MPI 4.1.4", "MPICH Version:      4.0.2", 0},
        {"Open MPI 4.1.4", "unknown MPI 3.1", 0},
        {"unknown MPI 3.1", "unknown MPI 3.1", 1},
        {"unknown MPI 3.1", "Open MPI 4.1.4", 0},
        {"FooMPI 1.0", "BarMPI 1.0", 0},
    };
    int bad = -1;
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
        if (ladle__mpi_compatible(cases[i].build, cases[i].other) != cases[i].same)
            bad = (int)i;
    LT_ASSERT(bad < 0, "case %d: '%s' against '%s'", bad, bad >= 0 ? cases[bad].build : "",
              bad >= 0 ? cases[bad].other : "");
    LT_ASSERT(ladle__mpi_family_of("Open MPI v4.1.4") == LADLE__MPI_OPENMPI &&
                  ladle__mpi_family_of("MPICH 4.0.2") == LADLE__MPI_MPICH &&
                  ladle__mpi_family_of(NULL) == LADLE__MPI_UNKNOWN,
              "families");

    /* a caller compiled with another family's mpi.h is refused on every
     * rank, before its communicator is looked at, naming both */
    const char *other = ladle__mpi_family_of(lib) == LADLE__MPI_OPENMPI ? "MPICH 4.0.2"
                                                                          : "Open MPI 4.1.4";
    int shape[1] = {1};
    ladle_partition *p = NULL;
    ladle_status st = ladle_partition_create_mpi(other, ladle_comm_of(MPI_COMM_WORLD), 1,
                                                 shape, NULL, &p);
    const char *msg = ladle_error_message();
    LT_ASSERT(st == LADLE_ERR_MPI && p == NULL && strstr(msg, other) != NULL &&
                  strstr(msg, lib) != NULL && strstr(msg, "ladle_partition_create") != NULL,
              "%s: %s", ladle_status_name(st), msg);
    ladle_error_clear();
    /* the caller's own family is accepted, and so is an unknown caller */
    LT_OK(ladle_partition_create_mpi(LADLE_MPI_HEADER, ladle_comm_of(MPI_COMM_WORLD), 1,
                                     shape, NULL, &p));
    ladle_partition_destroy(&p);
    LT_OK(ladle_partition_create_mpi(NULL, ladle_comm_of(MPI_COMM_WORLD), 1, shape, NULL,
                                     &p));
    ladle_partition_destroy(&p);
}
END_TEST

LT_SUITE("partition", "partition", LT_CHECK_TIMEOUT,
         row_major_coordinates_and_ranks_as_given, inactive_ranks_know_the_grid,
         zero_dimensional_partition, subset_sub_and_union, partition_bad_input,
         balanced_layout_matches_distdl, split_block_and_overlap, fortran_handle_twins,
         mpi_identity_and_refusal)
