/*
 * ladle - communicators as every call takes them.
 *
 * A ladle_comm is the one way a communicator crosses ladle's API: a value
 * of one field, the communicator's Fortran handle (MPI_Fint). Every MPI
 * defines that handle as an integer, so C, C++, Fortran, Python (mpi4py's
 * comm.py2f()) and any foreign-function interface pass it alike, and no
 * call needs a twin per language. docs/api.md gives the rule.
 */
#ifndef LADLE_COMM_H
#define LADLE_COMM_H

#include <mpi.h>

#include "core.h"

#ifdef __cplusplus
extern "C" {
#endif

/* A communicator: fortran is MPI_Comm_c2f of it. ladle turns it back with
 * MPI_Comm_f2c and never frees it: the caller keeps its communicator. */
typedef struct ladle_comm {
    MPI_Fint fortran;
} ladle_comm;

/* The ladle_comm of a C communicator. Inline, so the conversion is made by
 * the caller's MPI (ladle refuses an MPI other than its own where it first
 * meets it, in ladle_partition_create). Local. */
static inline ladle_comm ladle_comm_of(MPI_Comm comm)
{
    ladle_comm c;
    c.fortran = MPI_Comm_c2f(comm);
    return c;
}

/* The ladle_comm of a Fortran handle (an mpi_f08 communicator's MPI_VAL,
 * an integer communicator of use mpi, mpi4py's comm.py2f()). Local. */
static inline ladle_comm ladle_comm_of_fortran(MPI_Fint fortran)
{
    ladle_comm c;
    c.fortran = fortran;
    return c;
}

/* The C communicator of c (MPI_COMM_NULL's handle gives MPI_COMM_NULL).
 * Local. */
static inline MPI_Comm ladle_comm_mpi(ladle_comm c) { return MPI_Comm_f2c(c.fortran); }

#ifdef __cplusplus
}
#endif

#endif /* LADLE_COMM_H */
