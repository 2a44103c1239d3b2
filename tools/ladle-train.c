/*
 * ladle-train: train LeNet-5 (with or without batch norm) on Fashion-MNIST
 * (or any IDX dataset of 1-channel images) over a data-parallel, spatial
 * and weight-grid layout, printing progress as it goes and the test
 * accuracy after each epoch.
 *
 *   mpiexec -n 4 bin/ladle-train --data-ways 2 --spatial 2x1 --epochs 3
 *   mpiexec -n 4 bin/ladle-train --pipeline zbh1 --microbatches 8
 *
 * See --help and docs/training.md.
 */
#include "train.h"
#include "train_pipe.h"

int main(int argc, char **argv)
{
    opts o;
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &me);
    MPI_Comm_size(MPI_COMM_WORLD, &world);
    int rc = parse(argc, argv, &o);
    if (rc == 0) {
        ladle_set_num_threads(1);
        if (o.pipe_style >= 0)
            pipe_run(&o);
        else
            train_run(&o, NULL, NULL);
    }
    MPI_Finalize();
    return rc == 1 ? 0 : rc;
}
