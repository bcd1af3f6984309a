#!/bin/sh
# Slurm PrologSlurmctld: reserve a job's fabric before it starts.
#
# One accelnet intent per job, named slurm-$SLURM_JOB_ID: a ring-allreduce
# over the fabric hosts (RDMA NICs) of the job's nodes, without UDP ports
# (--sampled: the NICs choose them; the flows sampling finds between ring
# neighbours are pinned on the reserved paths). accelnet-epilog.sh
# releases it.
#
# slurm.conf:  PrologSlurmctld=/etc/slurm/accelnet-prolog.sh
#              EpilogSlurmctld=/etc/slurm/accelnet-epilog.sh
# Environment (e.g. in the script's wrapper or /etc/default/accelnet-slurm):
#   ACCELNET_SERVER, ACCELNET_TOKEN  the API and a tenant token
#   ACCELNET_HOSTS_FILE   lines "NODE HOST[,HOST…]": each node's fabric hosts
#                         (default /etc/accelnet/slurm-hosts)
#   ACCELNET_GBPS_PER_GPU each NIC's share of the ring (default 100)
#   ACCELNET_REQUIRED     1 (default): a job whose fabric does not fit is not
#                         started (Slurm requeues it); 0: it starts on ECMP
set -eu
: "${SLURM_JOB_ID:?}" "${SLURM_JOB_NODELIST:?}"
hosts_file=${ACCELNET_HOSTS_FILE:-/etc/accelnet/slurm-hosts}
hosts=""
nodes=0
for node in $(scontrol show hostnames "$SLURM_JOB_NODELIST"); do
	nodes=$((nodes + 1))
	h=$(awk -v n="$node" '$1 == n { print $2 }' "$hosts_file")
	if [ -z "$h" ]; then
		echo "accelnet: node $node has no fabric hosts in $hosts_file" >&2
		exit 1
	fi
	hosts="$hosts${hosts:+,}$h"
done
if [ "$nodes" -lt 2 ]; then
	exit 0 # one node: its GPUs talk over NVLink, not the fabric
fi
if accelnetctl intents create --name "slurm-$SLURM_JOB_ID" --idempotency-key "slurm-$SLURM_JOB_ID" \
	--collective ring-allreduce --endpoints "$hosts" --gbps-per-gpu "${ACCELNET_GBPS_PER_GPU:-100}" --sampled; then
	exit 0
fi
if [ "${ACCELNET_REQUIRED:-1}" = 0 ]; then
	echo "accelnet: job $SLURM_JOB_ID starts without a reservation" >&2
	exit 0
fi
exit 1
