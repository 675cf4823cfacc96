#!/usr/bin/env bash
# `make demo`: bring the lab up (if it is not up already), show the rotation plan for the
# Dragonfly password, run it, and show every shop service's readyz afterwards.
# The lab is left running; `rotate lab down --dir DIR` stops it.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
LAB_DIR=${1:-.rotate-lab}
case $LAB_DIR in /*) ;; *) LAB_DIR=$ROOT/$LAB_DIR ;; esac
ROTATE=$ROOT/.venv/bin/rotate
SHOP=(user product inventory cart order payment shipping review search notification)

if [[ -t 1 && -z ${NO_COLOR:-} ]]; then B=$'\033[1m' N=$'\033[0m'; else B= N=; fi
step() { printf '\n%s==> %s%s\n' "$B" "$*" "$N"; }

step "rotate lab up --dir $LAB_DIR"
started=$EPOCHREALTIME
"$ROTATE" lab up --dir "$LAB_DIR"
awk -v a="$started" -v b="$EPOCHREALTIME" 'BEGIN { printf "lab ready in %.1fs\n", b - a }'

# shellcheck disable=SC1091
. "$LAB_DIR/env"

step "rotate dragonfly   (the plan: nothing changes)"
"$ROTATE" dragonfly

step "rotate dragonfly --confirm"
"$ROTATE" dragonfly --confirm

step "readyz of every shop service"
printf '%-14s %s\n' SERVICE READYZ
failed=0
for svc in "${SHOP[@]}"; do
  if out=$(kubectl get --raw "/api/v1/namespaces/shop/services/$svc:http/proxy/readyz" 2>&1); then
    printf '%-14s %s\n' "$svc" "200 ${out:0:40}"
  else
    printf '%-14s %s\n' "$svc" "FAIL ${out:0:60}"
    failed=1
  fi
done

cat <<EOF

The lab is still running. Try:
  . $LAB_DIR/env && kubectl get deploy -A && $ROTATE runs
Stop it with:
  $ROTATE lab down --dir $LAB_DIR
EOF
exit $failed
