#!/usr/bin/env bash
# asrtrain under mpiexec (MPICH, e.g. the `mpich` wheel of the `mpi` extra), on one
# machine or on the hosts listed in HOSTS. Edit the block below, then run it.

# ---- edit these lines ----
ARCHIVE=data/archives/train.h5
VALID=data/archives/dev.h5
EXP=exp/blstm_adpsgd_mpi
STRATEGY=adpsgd                         # ssgd | adpsgd | h-adpsgd
NP=4                                    # learners in all
PER_NODE=4                              # learners per host (H-ADPSGD's super-learner size)
HOSTS=localhost                         # comma-separated host list
EPOCHS=16
BATCH=256
SAVE_EVERY=30                           # minutes between checkpoints in the middle of an epoch
# --------------------------

set -euo pipefail
MASTER_ADDR=${HOSTS%%,*}
group_opt=()   # super-learners (one per host) exist only in H-ADPSGD
if [ "$STRATEGY" = h-adpsgd ]; then group_opt=(--group-size "$PER_NODE"); fi
# MPICH sets PMI_RANK/PMI_SIZE/MPI_LOCALRANKID/MPI_LOCALNRANKS for each learner.
mpiexec -n "$NP" -ppn "$PER_NODE" -hosts "$HOSTS" \
  -genv MASTER_ADDR "$MASTER_ADDR" -genv MASTER_PORT "${MASTER_PORT:-29500}" -genv OMP_NUM_THREADS 1 \
  asrtrain train "$ARCHIVE" "$EXP" --valid "$VALID" --strategy "$STRATEGY" \
    --epochs "$EPOCHS" --batch "$BATCH" --save-every "$SAVE_EVERY" "${group_opt[@]}"
