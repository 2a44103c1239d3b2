/*
 * The CPU backend's slots, one file per kernel family, gathered into the
 * table by cpu.c. They are the reference every other backend is tested
 * against, and the guarded test device runs them behind its fence. Never
 * included outside src/backends/.
 */
#ifndef LADLE_BACKEND_CPU_H
#define LADLE_BACKEND_CPU_H

#include "src/core/backend.h"

extern const ladle_backend_table ladle__cpu_table;

/* The kernels, ladle__cpu_<slot>, declared for every entry of the slot list
 * (src/core/backend_slots.h); the CPU defines those its table fills (cpu.c),
 * one file per family, named in the family's comment in the list. */
#define LADLE_SLOT(name, params, args, devptrs) ladle_status ladle__cpu_##name params;
#include "src/core/backend_slots.h"
#undef LADLE_SLOT

#endif /* LADLE_BACKEND_CPU_H */
