#!/bin/sh
# Slurm EpilogSlurmctld: release the reservation accelnet-prolog.sh made
# for the job (none is fine: the job may have run on one node, or started
# without one).
set -eu
: "${SLURM_JOB_ID:?}"
exec accelnetctl intents delete --name "slurm-$SLURM_JOB_ID" --missing-ok
