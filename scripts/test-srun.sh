#!/usr/bin/env bash
# The MPI tests (mpi_tests: topo's cluster view, probe, the CLI under a launcher, the worker
# groups) again under Slurm's `srun --mpi=pmix`, on a one-node Slurm this script starts and
# stops itself (as root: it installs Slurm and munge from Debian, and runs their daemons). Its
# configuration and state live in a temporary directory (SLURM_CONF points there); the
# system's /etc/slurm is not touched. Run after scripts/test.sh has built the release preset.
#   scripts/test-srun.sh
set -euo pipefail
cd "$(dirname "$0")/.."
[[ -x build/tests/mpi_tests ]] || { echo "test-srun: build first (scripts/test.sh)" >&2; exit 2; }
if ! command -v slurmctld > /dev/null || ! command -v slurmd > /dev/null || ! command -v munged > /dev/null; then
  export DEBIAN_FRONTEND=noninteractive
  apt-get update
  apt-get install -y slurmd slurmctld slurm-client munge
fi

state=$(mktemp -d /tmp/commtool-slurm.XXXXXX)
host=$(hostname -s)
mkdir -p "$state/ctld" "$state/d"
cat > "$state/slurm.conf" <<CONF
ClusterName=commtool-test
SlurmctldHost=$host
SlurmctldPort=16817
SlurmdPort=16818
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SwitchType=switch/none
MpiDefault=none
SchedulerType=sched/builtin
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU
ReturnToService=2
SlurmdParameters=config_overrides
StateSaveLocation=$state/ctld
SlurmdSpoolDir=$state/d
SlurmctldPidFile=$state/slurmctld.pid
SlurmdPidFile=$state/slurmd.pid
SlurmctldLogFile=$state/slurmctld.log
SlurmdLogFile=$state/slurmd.log
NodeName=$host CPUs=8 State=UNKNOWN
PartitionName=test Nodes=ALL Default=YES MaxTime=10 State=UP OverSubscribe=FORCE
CONF
export SLURM_CONF=$state/slurm.conf

started_munge=0
stop() {
  [[ -f $state/slurmd.pid ]] && kill "$(cat "$state/slurmd.pid")" 2> /dev/null || true
  [[ -f $state/slurmctld.pid ]] && kill "$(cat "$state/slurmctld.pid")" 2> /dev/null || true
  if ((started_munge)); then pkill -x munged || true; fi
  sleep 1
  rm -rf "$state"
}
trap stop EXIT

if ! munge -n > /dev/null 2>&1; then
  mkdir -p /run/munge && chown munge:munge /run/munge
  su -s /bin/sh munge -c munged
  started_munge=1
fi
slurmctld
slurmd
# The node comes up within seconds; a minute is the bound.
for _ in $(seq 60); do
  sinfo -h -o %t 2> /dev/null | grep -qx idle && break
  sleep 1
done
sinfo -h -o %t | grep -qx idle || { echo "test-srun: the Slurm node did not come up" >&2; cat "$state"/*.log >&2; exit 1; }
srun --version
COMMTOOL_TEST_LAUNCHER="srun --mpi=pmix --overcommit -n {n}" \
  OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 \
  OMPI_MCA_btl_vader_single_copy_mechanism=none \
  timeout 300 build/tests/mpi_tests
