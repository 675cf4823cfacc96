#!/usr/bin/env bash
# The Dragonfly password rotation as an operator does it WITHOUT rotate: the wiki runbook,
# one step after the other, with bao, kubectl, curl and jq.
#
#   . .rotate-lab/env && bench/runbook.sh
#
# Needs BAO_ADDR/BAO_TOKEN, KUBECONFIG, CONFIG_CENTER_URL/CONFIG_CENTER_TOKEN (the lab's env
# file sets them all). The defaults below are the example shop's `dragonfly` credential
# (lab/rotate_lab/shop/ecommerce/rotate.yaml); bench/rotation.py derives them from the chain file.
#
# The new password never appears in argv (`ps` shows argv to every user) nor on the
# terminal: it lives in a shell variable and in 0600 files of a private temp directory,
# bao reads it from stdin, jq from a file, curl sends files. The Config Center admin token
# goes to curl as a header file for the same reason.
#
# RUNBOOK_STEPS=FILE appends "EPOCH start|end STEP TARGET" lines (the benchmark's timeline).
set -euo pipefail

BAO=${BAO:-bao}
KV_MOUNT=${RUNBOOK_KV_MOUNT:-secret}
KV_PATH=${RUNBOOK_KV_PATH:-infra/dragonfly}
KV_KEY=${RUNBOOK_KV_KEY:-password}
KV_VERB=${RUNBOOK_KV_VERB:-put}              # patch keeps the path's other keys
ES=${RUNBOOK_EXTERNALSECRET:-dragonfly/dragonfly-password}
SECRET=${RUNBOOK_SECRET:-dragonfly/dragonfly-password-secret}
SECRET_KEY=${RUNBOOK_SECRET_KEY:-password}
PROVIDER=${RUNBOOK_PROVIDER:-dragonfly/dragonfly}
CONSUMERS=${RUNBOOK_CONSUMERS:-shop/cart shop/order shop/user}
DOC_KEY=${RUNBOOK_DOC_KEY:-bootstrap}
# How the consumer documents change: a jq filter over the document, $pw = the new password.
DOC_FILTER=${RUNBOOK_DOC_FILTER:-'.dragonfly.password = $pw
  | .dragonfly.url = "redis://:\(.dragonfly.password)@\(.dragonfly.host):\(.dragonfly.port)/0"'}
TIMEOUT=${RUNBOOK_TIMEOUT:-120}
POLL=${RUNBOOK_POLL:-0.5}                    # how often the operator re-checks the Secret
STEPS=${RUNBOOK_STEPS:-/dev/null}
CC=${CONFIG_CENTER_URL:?set CONFIG_CENTER_URL (. DIR/env)}

umask 077
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

say() { printf '==> %s\n' "$*" >&2; }
mark() { printf '%s %s %s %s\n' "$(date +%s.%N)" "$1" "$2" "$3" >>"$STEPS"; }
ns_of() { printf '%s' "${1%%/*}"; }
name_of() { printf '%s' "${1#*/}"; }
cc() { curl -sS --fail-with-body -H @"$tmp/auth" "$@"; }

printf 'Authorization: Bearer %s\n' "${CONFIG_CENTER_TOKEN:?set CONFIG_CENTER_TOKEN}" >"$tmp/auth"

# 0. A new password: 40 characters [A-Za-z0-9], never echoed.
pw=$(openssl rand -base64 60 | tr -dc 'A-Za-z0-9' | cut -c1-40)
printf '%s' "$pw" >"$tmp/pw"
want=$(sha256sum <"$tmp/pw" | cut -d' ' -f1)

# 1. OpenBao: write the new version (the value comes from stdin: `KEY=-`).
say "1. bao kv $KV_VERB $KV_MOUNT/$KV_PATH"
mark start backend.write "$KV_MOUNT/$KV_PATH"
"$BAO" kv "$KV_VERB" -mount="$KV_MOUNT" "$KV_PATH" "$KV_KEY=-" <"$tmp/pw" >/dev/null
mark end backend.write "$KV_MOUNT/$KV_PATH"

# 2. ESO: force a sync, then wait until the Secret holds the new value (compared by hash).
say "2. force-sync externalsecret $ES; wait for Secret $SECRET"
mark start sync "$ES"
kubectl -n "$(ns_of "$ES")" annotate externalsecret "$(name_of "$ES")" \
  force-sync="$(date +%s)" --overwrite >/dev/null
deadline=$((SECONDS + TIMEOUT))
until [ "$(kubectl -n "$(ns_of "$SECRET")" get secret "$(name_of "$SECRET")" \
          -o jsonpath="{.data.$SECRET_KEY}" | base64 -d | sha256sum | cut -d' ' -f1)" = "$want" ]; do
  if [ "$SECONDS" -ge "$deadline" ]; then
    echo "runbook: Secret $SECRET did not get the new value within ${TIMEOUT}s" >&2
    exit 1
  fi
  sleep "$POLL"
done
mark end sync "$ES"

# 3. The provider reads the password at start: restart it and wait for the rollout.
say "3. restart deployment $PROVIDER"
mark start provider.restart "$PROVIDER"
kubectl -n "$(ns_of "$PROVIDER")" rollout restart deployment "$(name_of "$PROVIDER")" >/dev/null
kubectl -n "$(ns_of "$PROVIDER")" rollout status deployment "$(name_of "$PROVIDER")" \
  --timeout="${TIMEOUT}s" >/dev/null
mark end provider.restart "$PROVIDER"

# 4. Each consumer, one after the other.
for consumer in $CONSUMERS; do
  ns=$(ns_of "$consumer")
  svc=$(name_of "$consumer")
  say "4. consumer $consumer"

  # 4a. Config Center: read the document, set the new password, write it back (If-Match).
  mark start config.write "$consumer"
  cc -D "$tmp/headers" -o "$tmp/doc.json" "$CC/v1/services/$svc/keys/$DOC_KEY"
  etag=$(grep -i '^etag:' "$tmp/headers" | cut -d' ' -f2 | tr -d '\r')
  jq --rawfile pw "$tmp/pw" "{value: (.value | $DOC_FILTER)}" "$tmp/doc.json" >"$tmp/new.json"
  cc -X PUT -H "If-Match: $etag" -H 'Content-Type: application/json' \
    --data-binary @"$tmp/new.json" -o /dev/null "$CC/v1/services/$svc/keys/$DOC_KEY"
  mark end config.write "$consumer"

  # 4b. A new machine token into the service's token Secret (the old ones are kept for now).
  mark start token.mint "$consumer"
  cc -o "$tmp/tokens.json" "$CC/v1/services/$svc/tokens"
  old_ids=$(jq -r '.[] | select(.revoked | not) | .id' "$tmp/tokens.json")
  cc -X POST -o "$tmp/token.json" "$CC/v1/services/$svc/tokens"
  jq '{data: {token: (.token | @base64)}}' "$tmp/token.json" >"$tmp/patch.json"
  kubectl -n "$ns" patch secret "$svc-config-token" --type merge \
    --patch-file "$tmp/patch.json" >/dev/null
  mark end token.mint "$consumer"

  # 4c. Restart it (it reads document and token at start) and wait for the rollout.
  mark start consumer.restart "$consumer"
  kubectl -n "$ns" rollout restart deployment "$svc" >/dev/null
  kubectl -n "$ns" rollout status deployment "$svc" --timeout="${TIMEOUT}s" >/dev/null
  mark end consumer.restart "$consumer"

  # 4d. Its /readyz through the API server's service proxy, then retire the old tokens.
  mark start readyz.check "$consumer"
  kubectl get --raw "/api/v1/namespaces/$ns/services/$svc:http/proxy/readyz" >/dev/null
  for id in $old_ids; do
    cc -X DELETE -o /dev/null "$CC/v1/services/$svc/tokens/$id"
  done
  mark end readyz.check "$consumer"
done
say "done: $KV_MOUNT/$KV_PATH rotated, $(wc -w <<<"$CONSUMERS") consumer(s) moved"
