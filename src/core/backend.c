/* Backend lookup by device. */
#include "src/core/backend.h"

const ladle_backend *ladle__backend(ladle_device device)
{
    switch (device) {
    case LADLE_CPU:
        return &ladle__cpu_backend;
    case LADLE_CUDA:
        return NULL; /* the CUDA backend arrives with `make CUDA=1` */
    }
    return NULL;
}
