/* Which MPI ladle was built with, and the refusal of another one. */
#define _GNU_SOURCE /* RTLD_DEFAULT */
#include <dlfcn.h>
#include <stdio.h>
#include <string.h>

#include "src/core/internal.h"

/* The MPI of the library's own build, as its mpi.h names it
 * (LADLE_MPI_HEADER in ladle/partition.h). */
static const char build_mpi[] = LADLE_MPI_HEADER;

const char *ladle_mpi_library(void) { return build_mpi; }

/* Implementations that share one binary interface are one family: MPICH's
 * derivatives (Intel MPI, MVAPICH, Cray MPICH) keep its handles and
 * constants, Open MPI has its own. An unknown name is a family of its own. */
static ladle__mpi_family family_of(const char *name)
{
    static const char *const mpich[] = {"MPICH", "Intel(R) MPI", "Intel MPI", "MVAPICH",
                                        "CRAY MPICH"};
    if (name == NULL)
        return LADLE__MPI_UNKNOWN;
    for (size_t i = 0; i < sizeof mpich / sizeof mpich[0]; i++)
        if (strstr(name, mpich[i]) != NULL)
            return LADLE__MPI_MPICH;
    if (strstr(name, "Open MPI") != NULL)
        return LADLE__MPI_OPENMPI;
    return LADLE__MPI_UNKNOWN;
}

ladle__mpi_family ladle__mpi_family_of(const char *name) { return family_of(name); }

int ladle__mpi_compatible(const char *build, const char *other)
{
    ladle__mpi_family a = family_of(build), b = family_of(other);
    if (a != LADLE__MPI_UNKNOWN || b != LADLE__MPI_UNKNOWN)
        return a == b;
    /* two unknown implementations: the same only if named alike */
    size_t n = strcspn(build, " \t\n");
    return n > 0 && strncmp(build, other, n) == 0;
}

/* The first line of an MPI's own description, without trailing blanks. */
static void first_line(const char *text, char *out, size_t cap)
{
    size_t n = strcspn(text, "\n,");
    while (n > 0 && (text[n - 1] == ' ' || text[n - 1] == '\t'))
        n--;
    if (n >= cap)
        n = cap - 1;
    memcpy(out, text, n);
    out[n] = '\0';
}

/* A symbol only the other family's library defines: present means that
 * library is loaded in this process. */
static const char *foreign_symbol(void)
{
    return family_of(build_mpi) == LADLE__MPI_OPENMPI ? "MPIR_Err_return_comm"
                                                      : "ompi_mpi_comm_world";
}

ladle_status ladle__mpi_abi_check(const char *func, const char *caller_header)
{
    char version[MPI_MAX_LIBRARY_VERSION_STRING] = "", running[128];
    int len = 0;
    if (caller_header != NULL && !ladle__mpi_compatible(build_mpi, caller_header))
        return ladle__raise_plain(
            LADLE_ERR_MPI, func,
            "this program was compiled with the mpi.h of %s but libladle was built with %s; "
            "their communicators and constants differ: build the program with the MPI "
            "libladle uses (its ladle.pc and ladle_mpi_library() name it), or use a libladle "
            "built with %s",
            caller_header, build_mpi, caller_header);
    /* callable before MPI_Init and after MPI_Finalize; whichever library
     * answers is the one ladle's MPI calls reach */
    if (MPI_Get_library_version(version, &len) != MPI_SUCCESS)
        version[0] = '\0';
    first_line(version, running, sizeof running);
    if (running[0] != '\0' && !ladle__mpi_compatible(build_mpi, running))
        return ladle__raise_plain(
            LADLE_ERR_MPI, func,
            "the MPI running in this process is %s but libladle was built with %s; ladle's "
            "MPI calls reach the other library: use a libladle built with the process's MPI "
            "(for Python: the MPI of mpi4py), or run the program with %s",
            running, build_mpi, build_mpi);
    return LADLE_OK;
}

ladle_status ladle__mpi_not_initialised(const char *func)
{
    const char *sym = foreign_symbol();
    if (dlsym(RTLD_DEFAULT, sym) != NULL)
        return ladle__raise_plain(
            LADLE_ERR_MPI, func,
            "%s, which libladle was built with, is not initialised, and this process also has "
            "%s loaded (it defines %s): a program that initialised that MPI cannot use this "
            "libladle; build it with %s (see ladle_mpi_library())",
            build_mpi, family_of(build_mpi) == LADLE__MPI_OPENMPI ? "MPICH" : "Open MPI", sym,
            build_mpi);
    return ladle__raise(LADLE_ERR_STATE, func,
                        "MPI is not initialised: call MPI_Init (or MPI_Init_thread) first");
}

ladle_status ladle__mpi_ready(const char *func, const char *why_not)
{
    int init = 0, fin = 0;
    ladle_status st = ladle__mpi_abi_check(func, NULL);
    if (st != LADLE_OK)
        return st;
    MPI_Finalized(&fin);
    if (fin)
        return ladle__raise(LADLE_ERR_STATE, func, "MPI has been finalised: %s", why_not);
    MPI_Initialized(&init);
    if (!init)
        return ladle__mpi_not_initialised(func);
    return LADLE_OK;
}

ladle_status ladle__comm_f2c(const char *func, MPI_Fint handle, MPI_Comm *comm)
{
    ladle_status st = ladle__mpi_ready(func, "no communicator can be converted");
    if (st != LADLE_OK)
        return st;
    *comm = MPI_Comm_f2c(handle);
    return LADLE_OK;
}
