#!/bin/sh
# Slurm prolog: check the NPU node before a job starts on it. Install as a Prolog script (see deploy/README.md).
# Exit 0: the job starts. Exit 1 (npudoctor found a FAIL): Slurm drains the node with this reason and requeues
# the job elsewhere. Exit 2 (npudoctor could not tell: bad profile, a hung npu-smi): the job starts, the
# reason goes to the slurmd log; a flaky probe must not drain a healthy node.
PROFILE="${NPUDOCTOR_PROFILE:-atlas800t-a2-8x910b}"

message=$(timeout 120 npudoctor check --profile "$PROFILE" --format npd)
status=$?
case "$status" in
  0) exit 0 ;;
  1) echo "npudoctor: $message" >&2
     exit 1 ;;
  *) echo "npudoctor could not check this node (exit $status): $message" >&2
     exit 0 ;;
esac
