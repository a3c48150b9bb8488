#!/bin/sh
# Slurm Epilog: after each job, (1) the log doctor scans the job's CANN plogs (the job user's ~/ascend/log) and
# keeps its findings in NPUDOCTOR_JOBS_DIR/job-<id>.json for the user and the operator, and (2) the node is
# checked again (--scope node): a FAIL drains it with npudoctor's reason before the next job lands there.
# slurm.conf: Epilog=/etc/slurm/epilog.d/*   (install -m 0755 this file as /etc/slurm/epilog.d/npudoctor.sh)
# Exit 0 always: the node is drained by scontrol with npudoctor's reason, not by a failed epilog
# ("Epilog error"). Variables: NPUDOCTOR, NPUDOCTOR_PROFILE, NPUDOCTOR_TIMEOUT_S, NPUDOCTOR_JOBS_DIR,
# NPUDOCTOR_LOG, NPUDOCTOR_SCONTROL.
PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin
export PATH
NPUDOCTOR="${NPUDOCTOR:-/opt/npudoctor/bin/npudoctor}"
PROFILE="${NPUDOCTOR_PROFILE:-atlas800t-a2-8x910b}"
TIMEOUT_S="${NPUDOCTOR_TIMEOUT_S:-60}"
JOBS_DIR="${NPUDOCTOR_JOBS_DIR:-/var/log/npudoctor/jobs}"
SCONTROL="${NPUDOCTOR_SCONTROL:-scontrol}"
NODE="${SLURMD_NODENAME:-$(hostname -s)}"
LOG="${NPUDOCTOR_LOG:-/var/log/npudoctor-epilog.log}"
JOB="${SLURM_JOB_ID:-unknown}"

say() {
    echo "$1" >&2
    echo "$(date -u +%Y-%m-%dT%H:%M:%SZ) job $JOB $1" >> "$LOG" 2>/dev/null
    command -v logger >/dev/null 2>&1 && logger -t npudoctor -- "$1" 2>/dev/null
    return 0
}

if [ ! -x "$NPUDOCTOR" ]; then
    say "npudoctor epilog: $NPUDOCTOR not found or not executable: node $NODE NOT checked"
    exit 0
fi
home=$(getent passwd "${SLURM_JOB_USER:-}" 2>/dev/null | cut -d: -f6)
plogs="${NPUDOCTOR_PLOGS:-$home/ascend/log}"
if [ -n "$home$NPUDOCTOR_PLOGS" ] && [ -d "$plogs" ] && mkdir -p "$JOBS_DIR" 2>/dev/null; then
    # --node: each node's document names its node, so that the job's documents merge into one diagnosis
    # (npudoctor logs scan */job-<id>.json, issue 27)
    timeout "$TIMEOUT_S" "$NPUDOCTOR" logs scan "$plogs" --node "$NODE" --format json > "$JOBS_DIR/job-$JOB.json" \
        2>/dev/null
    [ $? -eq 1 ] && say "npudoctor: job $JOB's logs have errors: $JOBS_DIR/job-$JOB.json"
fi
message=$(timeout "$TIMEOUT_S" "$NPUDOCTOR" check --scope node --profile "$PROFILE" --format npd 2>/dev/null)
status=$?
if [ "$status" = 1 ]; then
    reason=$(printf 'npudoctor: %s' "${message#NPU node problem: }" | tr -d '\n\r' | cut -c1-200)
    say "$reason"
    "$SCONTROL" update NodeName="$NODE" State=DRAIN Reason="$reason" || say "npudoctor epilog: could not drain $NODE"
elif [ "$status" != 0 ]; then
    say "npudoctor could not check node $NODE (exit $status): $message"
fi
exit 0
