#!/bin/sh
# A fleet sweep on Slurm: npudoctor on every idle node of a partition, one task per node, BATCH nodes per
# srun (so 500 nodes never wait on one allocation), one JSON report per node in OUTDIR, then `npudoctor fleet`
# (failing checks per node, version drift).
#   deploy/slurm/sweep-npudoctor.sh OUTDIR [PARTITION] [BATCH]
# NPUDOCTOR: npudoctor's path on the nodes (default /opt/npudoctor/bin/npudoctor); NPUDOCTOR_PROFILE;
# NPUDOCTOR_SRUN_ARGS: more srun options (--account, --time, --qos).
set -u
OUT="${1:?usage: sweep-npudoctor.sh OUTDIR [PARTITION] [BATCH]}"
PARTITION="${2:-}"
BATCH="${3:-64}"
NPUDOCTOR="${NPUDOCTOR:-/opt/npudoctor/bin/npudoctor}"
PROFILE="${NPUDOCTOR_PROFILE:-atlas800t-a2-8x910b}"
mkdir -p "$OUT" || exit 2
nodes=$(sinfo -h -N -t idle -o %N ${PARTITION:+-p "$PARTITION"} | sort -u)
[ -n "$nodes" ] || { echo "sweep: no idle node${PARTITION:+ in $PARTITION}" >&2; exit 2; }
total=$(printf '%s\n' "$nodes" | wc -l)
echo "sweep: $total idle node(s), $BATCH per srun, reports in $OUT" >&2
printf '%s\n' "$nodes" | xargs -n "$BATCH" | while read -r batch; do
    list=$(printf '%s' "$batch" | tr ' ' ',')
    count=$(printf '%s\n' $batch | wc -l)
    # shellcheck disable=SC2086
    srun -N "$count" --nodelist="$list" --ntasks-per-node=1 ${PARTITION:+-p "$PARTITION"} ${NPUDOCTOR_SRUN_ARGS:-} \
        sh -c '"$0" check --scope node --profile "$1" --format json > "$2/$(hostname -s).json"' \
        "$NPUDOCTOR" "$PROFILE" "$OUT" ||
        echo "sweep: srun on $list ended with $? (a node with a FAIL exits 1; its report is in $OUT)" >&2
done
exec "$NPUDOCTOR" fleet "$OUT"
