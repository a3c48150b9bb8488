#!/bin/sh
# Slurm HealthCheckProgram: slurmd runs it every HealthCheckInterval seconds (and at start) on every node, as
# root, with no PATH, and kills it after 60 s. It is the node's one npudoctor poller on a Slurm cluster: it
# checks the node (--scope node: hardware, driver, firmware, device files, npu-smi, chip health, RoCE ports),
# keeps the report for the prolog and the textfile for node_exporter, and drains the node on a FAIL with
# npudoctor's reason ("npudoctor: PCI002 ...", what `sinfo -R` shows). Exit 2 (could not tell) never drains.
# slurm.conf:
#   HealthCheckProgram=/etc/slurm/healthcheck-npudoctor.sh
#   HealthCheckInterval=300
#   HealthCheckNodeState=IDLE        # heavy checks only on idle nodes (or ANY, CYCLE)
# Variables (set them at the top of this file): NPUDOCTOR, NPUDOCTOR_PROFILE, NPUDOCTOR_TIMEOUT_S (45: well
# inside slurmd's 60 s), NPUDOCTOR_LAST_REPORT, NPUDOCTOR_TEXTFILE, NPUDOCTOR_RESUME (1: resume a node this
# script drained once it is OK again; default: leave it drained for a person), NPUDOCTOR_LOG.
PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin
export PATH
NPUDOCTOR="${NPUDOCTOR:-/opt/npudoctor/bin/npudoctor}"
PROFILE="${NPUDOCTOR_PROFILE:-atlas800t-a2-8x910b}"
TIMEOUT_S="${NPUDOCTOR_TIMEOUT_S:-45}"
LAST_REPORT="${NPUDOCTOR_LAST_REPORT:-/var/lib/npudoctor/last-report.json}"
TEXTFILE="${NPUDOCTOR_TEXTFILE:-/var/lib/node_exporter/textfile_collector/npudoctor.prom}"
SCONTROL="${NPUDOCTOR_SCONTROL:-scontrol}"
NODE="${SLURMD_NODENAME:-$(hostname -s)}"
LOG="${NPUDOCTOR_LOG:-/var/log/npudoctor-healthcheck.log}"

say() {
    echo "$1" >&2
    echo "$(date -u +%Y-%m-%dT%H:%M:%SZ) $1" >> "$LOG" 2>/dev/null
    command -v logger >/dev/null 2>&1 && logger -t npudoctor -- "$1" 2>/dev/null
    return 0
}

if [ ! -x "$NPUDOCTOR" ]; then
    say "npudoctor health check: $NPUDOCTOR not found or not executable: node $NODE NOT checked"
    exit 0
fi
mkdir -p "$(dirname "$LAST_REPORT")"
if [ -d "$(dirname "$TEXTFILE")" ]; then  # node_exporter's folder: written only where it exists
    message=$(timeout "$TIMEOUT_S" "$NPUDOCTOR" check --scope node --profile "$PROFILE" --format npd \
        --save-report "$LAST_REPORT" --textfile "$TEXTFILE" 2>/dev/null)
    status=$?
else
    message=$(timeout "$TIMEOUT_S" "$NPUDOCTOR" check --scope node --profile "$PROFILE" --format npd \
        --save-report "$LAST_REPORT" 2>/dev/null)
    status=$?
fi
case "$status" in
  0) if [ "${NPUDOCTOR_RESUME:-0}" = 1 ] &&
        "$SCONTROL" show node "$NODE" 2>/dev/null | grep -q "Reason=npudoctor:"; then
         say "npudoctor: $NODE is OK again: resuming it"
         "$SCONTROL" update NodeName="$NODE" State=RESUME
     fi
     exit 0 ;;
  1) reason=$(printf 'npudoctor: %s' "${message#NPU node problem: }" | tr -d '\n\r' | cut -c1-200)
     say "$reason"
     "$SCONTROL" update NodeName="$NODE" State=DRAIN Reason="$reason" ||
         say "npudoctor health check: could not drain $NODE"
     exit 0 ;;   # drained by scontrol; a non-zero exit only adds slurmd's own log line
  *) say "npudoctor could not check node $NODE (exit $status): $message"
     exit 0 ;;
esac
