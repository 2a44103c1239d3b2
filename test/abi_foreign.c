/* Compiled with another MPI's wrapper (its mpi.h and its library) than
 * libladle's, linked to libladle (make check: test/abi.sh). Both partition
 * calls must return LADLE_ERR_MPI with a message naming both MPIs -- the
 * header's check for the MPI_Comm call, the running MPI's version for the
 * MPI_Fint twin -- and nothing may crash. Exits 0 when so. */
#include <stdio.h>
#include <string.h>

#include <ladle.h>

static int refused(ladle_status st, const char *what)
{
    const char *msg = ladle_error_message();
    int ok = st == LADLE_ERR_MPI && strstr(msg, ladle_mpi_library()) != NULL;
    printf("%s: %s: %s\n", what, ladle_status_name(st), msg);
    ladle_error_clear();
    return ok;
}

int main(int argc, char **argv)
{
    int shape[1] = {1}, ok = 1;
    ladle_partition *p = NULL;
    MPI_Init(&argc, &argv);
    ok &= refused(ladle_partition_create(ladle_comm_of(MPI_COMM_WORLD), 1, shape, NULL, &p),
                  "ladle_partition_create");
    ok &=
        refused(ladle_partition_create(ladle_comm_of_fortran(MPI_Comm_c2f(MPI_COMM_WORLD)),
                                       1, shape, NULL, &p),
                "ladle_partition_create_f");
    ok &= p == NULL;
    MPI_Finalize();
    return ok ? 0 : 1;
}
