#!/usr/bin/env bash
# record.sh OUT_DIR: records the answers of the test bed's Gitea that the fake
# (internal/gitea/giteatest) is checked against, one JSON file per request in
# the shape of internal/gitea/testdata (note, request, response with the
# headers that matter), the origin rewritten to http://gitea.test:3000 and
# tokens to placeholders. Run it on a fresh bed, after
# eval "$(scripts/testbed env)"; it makes org acme with repo app (one
# workflow job on a label no runner offers, so it stays queued) and registers
# one runner with the bed's gitea-runner (TESTBED_RUNNER_VERSION), without
# starting it.
set -euo pipefail

out="$1"
: "${GITEA_URL:?run eval \"\$(scripts/testbed env)\" first}" "${GITEA_ADMIN_TOKEN:?}" "${TESTBED_DIR:?}"
repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/../../.." && pwd)"
mkdir -p "$out"
origin="http://gitea.test:3000"

api() { # api METHOD PATH [BODY]: the admin's call, its body on stdout
  curl -fsS -X "$1" -H "Authorization: token $GITEA_ADMIN_TOKEN" -H 'Content-Type: application/json' \
    ${3:+--data "$3"} "$GITEA_URL$2"
}

# record NAME NOTE METHOD PATH AUTH TOKEN [BODY]
record() {
  local name="$1" note="$2" method="$3" path="$4" auth="$5" token="$6" body="${7:-}" tmp
  tmp="$(mktemp -d)"
  curl -sS -o "$tmp/body" -D "$tmp/headers" -X "$method" -H "Authorization: token $token" \
    ${body:+-H 'Content-Type: application/json' --data "$body"} "$GITEA_URL$path" >/dev/null
  local status ctype link total
  status="$(awk 'NR == 1 { print $2 }' "$tmp/headers")"
  ctype="$(sed -n 's/^[Cc]ontent-[Tt]ype: \(.*\)\r$/\1/p' "$tmp/headers")"
  link="$(sed -n 's/^[Ll]ink: \(.*\)\r$/\1/p' "$tmp/headers")"
  total="$(sed -n 's/^[Xx]-[Tt]otal-[Cc]ount: \(.*\)\r$/\1/p' "$tmp/headers")"
  local response_body
  if jq -e . "$tmp/body" >/dev/null 2>&1; then
    response_body="$(cat "$tmp/body")"
  else
    response_body="$(jq -Rs . "$tmp/body")"
  fi
  jq -n --arg note "$note" --arg method "$method" --arg path "$path" --arg auth "$auth" \
    --argjson status "${status:-0}" --arg ctype "$ctype" --arg link "$link" --arg total "$total" \
    --argjson body "${response_body:-null}" '
    {note: $note, request: {method: $method, path: $path, auth: $auth},
     response: {status: $status,
                headers: ({"content-type": $ctype} + (if $link != "" then {link: $link} else {} end)
                          + (if $total != "" then {"x-total-count": $total} else {} end)),
                body: $body}}' |
    sed "s#$GITEA_URL#$origin#g; s#$token#<token>#g" >"$out/$name.json"
  rm -rf "$tmp"
  echo "recorded $name: $status"
}

api POST /api/v1/orgs '{"username":"acme","visibility":"public"}' >/dev/null
api POST /api/v1/orgs/acme/repos '{"name":"app","auto_init":true,"default_branch":"main"}' >/dev/null
workflow='on: [push]
jobs:
  build:
    runs-on: [ubuntu-latest]
    steps:
      - run: echo build
'
api POST /api/v1/repos/acme/app/contents/.gitea/workflows/ci.yml \
  "$(jq -n --arg c "$(printf '%s' "$workflow" | base64 -w0)" '{content: $c, message: "ci", branch: "main"}')" >/dev/null
for _ in $(seq 60); do
  [[ "$(api GET '/api/v1/repos/acme/app/actions/jobs?status=queued' | jq '.total_count')" == 1 ]] && break
  sleep 1
done

# One runner, registered as the runner Jobs register theirs (ephemeral), not started.
reg="$(api POST /api/v1/orgs/acme/actions/runners/registration-token | jq -r .token)"
work="$(mktemp -d)"
(cd "$work" && "$repo/.cache/gitea-runner/${TESTBED_RUNNER_VERSION:-v1.0.8}/bin/gitea-runner" register --no-interactive \
  --instance "$GITEA_URL" --token "$reg" --name rg-ci-abc12 --labels bed-host:host --ephemeral >/dev/null 2>&1)
rm -rf "$work"
runner="$(api GET /api/v1/orgs/acme/actions/runners | jq '.runners[0].id')"

admin="admin token"
record version "server built from the code.gitea.io/gitea module by scripts/tools/gitea, with main.Version set" GET /api/v1/version "$admin" "$GITEA_ADMIN_TOKEN"
record repo-jobs-queued "a job on a label no runner offers waits as queued" GET '/api/v1/repos/acme/app/actions/jobs?status=queued' "$admin" "$GITEA_ADMIN_TOKEN"
record org-runners "an ephemeral runner registered and never started" GET /api/v1/orgs/acme/actions/runners "$admin" "$GITEA_ADMIN_TOKEN"
record org-runner-disable "disabling a registered runner" PATCH "/api/v1/orgs/acme/actions/runners/$runner" "$admin" "$GITEA_ADMIN_TOKEN" '{"disabled":true}'
record error-bad-token "invalid token" GET /api/v1/repos/acme/app/actions/jobs "bad token" "0000000000000000000000000000000000000000"
record error-invalid-status-running "'running' is not an accepted status" GET '/api/v1/repos/acme/app/actions/jobs?status=running' "$admin" "$GITEA_ADMIN_TOKEN"
record error-invalid-sort "only sort=id is accepted on the jobs listings" GET '/api/v1/repos/acme/app/actions/jobs?sort=name' "$admin" "$GITEA_ADMIN_TOKEN"
record error-repo-not-found "unknown repository" GET /api/v1/repos/acme/nope/actions/jobs "$admin" "$GITEA_ADMIN_TOKEN"
record error-org-not-found "unknown org" GET /api/v1/orgs/nope/actions/jobs "$admin" "$GITEA_ADMIN_TOKEN"
record error-runner-not-found "unknown runner ID" GET /api/v1/orgs/acme/actions/runners/9999 "$admin" "$GITEA_ADMIN_TOKEN"
record error-users-jobs-404 "there is no per-user jobs endpoint for another user" GET /api/v1/users/testbed-admin/actions/jobs "$admin" "$GITEA_ADMIN_TOKEN"
