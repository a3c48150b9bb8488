#!/bin/sh
# Slurm Prolog: check the NPU node before a job starts on it (install: deploy/README.md, "Slurm").
#
# slurmd runs a prolog with an almost empty environment (no PATH, no set_env.sh, no venv), so npudoctor is
# named by its full path (NPUDOCTOR, default /opt/npudoctor/bin/npudoctor) and only the node's checks run
# (--scope node): the job's Python, torch_npu, CANN environment and HCCL variables are the job's, checked in
# the job, never a reason to drain a node.
#   exit 0 from npudoctor: the job starts.
#   exit 1 (a FAIL on the node): the node is drained with npudoctor's reason ("npudoctor: PCI002 ...", what
#          `sinfo -R` shows; Slurm's own reason for a failed prolog would be "Prolog error") and the prolog
#          fails, so the job does not start here and is requeued.
#   exit 2 (npudoctor could not tell: a hung npu-smi, a bad profile): the job starts, the reason goes to the
#          slurmd log; a flaky probe never drains a healthy node.
#   npudoctor missing or not runnable: said every time in NPUDOCTOR_LOG and syslog (slurmd keeps a prolog's
#          output only when it fails); NPUDOCTOR_MISSING=drain drains the node instead (default: run, so a
#          fleet without npudoctor yet keeps working).
# Every line this prolog says also goes to NPUDOCTOR_LOG (default /var/log/npudoctor-prolog.log) and to
# syslog (logger -t npudoctor) when there is one.
# Variables (set them at the top of this file: slurmd passes the prolog no environment of its own):
# NPUDOCTOR, NPUDOCTOR_PROFILE, NPUDOCTOR_TIMEOUT_S, NPUDOCTOR_MISSING, NPUDOCTOR_LOG, NPUDOCTOR_SCONTROL,
# NPUDOCTOR_LAST_REPORT (read the health check's kept report instead of running npu-smi again; older than
# NPUDOCTOR_MAX_AGE_S, default 900: could not tell, the job runs).
PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin
export PATH
NPUDOCTOR="${NPUDOCTOR:-/opt/npudoctor/bin/npudoctor}"
PROFILE="${NPUDOCTOR_PROFILE:-atlas800t-a2-8x910b}"
TIMEOUT_S="${NPUDOCTOR_TIMEOUT_S:-60}"
SCONTROL="${NPUDOCTOR_SCONTROL:-scontrol}"
NODE="${SLURMD_NODENAME:-$(hostname -s)}"
LOG="${NPUDOCTOR_LOG:-/var/log/npudoctor-prolog.log}"

say() {  # stderr (slurmd's log when the prolog fails), the log file, syslog
    echo "$1" >&2
    echo "$(date -u +%Y-%m-%dT%H:%M:%SZ) job ${SLURM_JOB_ID:-?} $1" >> "$LOG" 2>/dev/null
    command -v logger >/dev/null 2>&1 && logger -t npudoctor -- "$1" 2>/dev/null
    return 0
}

drain() {  # Reason= is what `sinfo -R` shows; keep it one line
    reason=$(printf '%s' "$1" | tr -d '\n\r' | cut -c1-200)
    "$SCONTROL" update NodeName="$NODE" State=DRAIN Reason="$reason" >&2 ||
        say "npudoctor prolog: could not drain $NODE: $reason"
}

if [ ! -x "$NPUDOCTOR" ]; then
    say "npudoctor prolog: $NPUDOCTOR not found or not executable: node $NODE NOT checked"
    if [ "${NPUDOCTOR_MISSING:-run}" = drain ]; then
        drain "npudoctor: not installed at $NPUDOCTOR"
        exit 1
    fi
    exit 0
fi

if [ -n "${NPUDOCTOR_LAST_REPORT:-}" ]; then  # the health check is the node's poller: read its report
    message=$(timeout "$TIMEOUT_S" "$NPUDOCTOR" check --last-report "$NPUDOCTOR_LAST_REPORT" \
        --max-age "${NPUDOCTOR_MAX_AGE_S:-900}" --scope node --format npd 2>/dev/null)
    status=$?
else
    message=$(timeout "$TIMEOUT_S" "$NPUDOCTOR" check --scope node --profile "$PROFILE" --format npd 2>/dev/null)
    status=$?
fi
case "$status" in
  0) exit 0 ;;
  1) drain "npudoctor: ${message#NPU node problem: }"
     say "npudoctor: $message"
     exit 1 ;;
  *) say "npudoctor could not check node $NODE (exit $status): $message"
     exit 0 ;;
esac
