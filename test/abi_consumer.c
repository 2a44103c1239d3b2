/* A program of ladle's users, built against an installed ladle (make check:
 * test/abi.sh, through pkg-config and through CMake): one partition of the
 * world, through the MPI_Comm call and its MPI_Fint twin, and the MPI
 * libladle was built with. Exits 0 when every call succeeded. */
#include <stdio.h>
#include <string.h>

#include <ladle.h>

int main(int argc, char **argv)
{
    int size = 0, rank = 0, ok = 1;
    MPI_Init(&argc, &argv);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    int shape[1] = {size};
    ladle_partition *p = NULL, *q = NULL;
    if (ladle_partition_create(ladle_comm_of(MPI_COMM_WORLD), 1, shape, NULL, &p) !=
            LADLE_OK ||
        ladle_partition_create(ladle_comm_of_fortran(MPI_Comm_c2f(MPI_COMM_WORLD)), 1,
                               shape, NULL, &q) != LADLE_OK) {
        fprintf(stderr, "rank %d: %s\n", rank, ladle_error_message());
        ok = 0;
    }
    ok = ok && ladle_partition_rank(p) == rank && ladle_partition_rank(q) == rank &&
         strcmp(ladle_mpi_library(), LADLE_MPI_HEADER) == 0 &&
         ladle_version_number() == LADLE_VERSION_NUMBER;
    int all = 0;
    MPI_Allreduce(&ok, &all, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
    if (rank == 0)
        printf("ladle %s on %s, %d ranks: %s\n", ladle_version(), ladle_mpi_library(), size,
               all ? "ok" : "FAILED");
    ladle_partition_destroy(&q);
    ladle_partition_destroy(&p);
    MPI_Finalize();
    return all ? 0 : 1;
}
