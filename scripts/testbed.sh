#!/usr/bin/env bash
# Test bed for the end-to-end tests: a real Kubernetes control plane (etcd,
# kube-apiserver, kube-controller-manager, kube-scheduler) with kwok fake nodes whose
# pods are played as local processes by testbed-agent, and a real Gitea with Actions.
# Everything listens on 127.0.0.1 only.
#
#   scripts/testbed.sh up [--fresh]   build what is missing (cached), start, wait until ready
#   scripts/testbed.sh down [--purge] stop what up started; --purge also wipes the data
#   scripts/testbed.sh env            print export lines for KUBECONFIG, GITEA_URL, GITEA_ADMIN_TOKEN
#   scripts/testbed.sh status         show each component and its health
#   scripts/testbed.sh build          only build (cold builds take minutes; run it in the background)
#   scripts/testbed.sh smoke          prove the chain: a queued Gitea job is served by a runner pod
#
# Builds are cached in <repo>/.cache/<tool>/<version>/, runtime data lives in
# <repo>/.testbed/ (TESTBED_DIR), logs in .testbed/logs/, pids in .testbed/pids/.
# Ports and switches are environment variables; see the defaults below.
set -euo pipefail

REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
CACHE="${TESTBED_CACHE_DIR:-$REPO/.cache}"
TB="${TESTBED_DIR:-$REPO/.testbed}"

ETCD_PORT="${TESTBED_ETCD_PORT:-23790}"
ETCD_PEER_PORT="${TESTBED_ETCD_PEER_PORT:-23791}"
APISERVER_PORT="${TESTBED_APISERVER_PORT:-26443}"
KCM_PORT="${TESTBED_KCM_PORT:-26257}"
SCHEDULER_PORT="${TESTBED_SCHEDULER_PORT:-26259}"
KWOK_PORT="${TESTBED_KWOK_PORT:-26080}"
GITEA_PORT="${TESTBED_GITEA_PORT:-23000}"
# Runner pods are privileged; a test of a locked-down cluster can start without it.
ALLOW_PRIVILEGED="${TESTBED_ALLOW_PRIVILEGED:-true}"
# Fake nodes: one per pool by default, so placement tests see two pools (a and b).
POOLS="${TESTBED_POOLS:-a b}"
NODES_PER_POOL="${TESTBED_NODES_PER_POOL:-1}"

KWOK_VERSION="v0.8.0"
ADMIN_USER="testbed-admin"
GITEA_ADMIN="testbed-admin"
FAKE_NODE_LABEL="testbed.gitea.bpg.pw/fake-node"
POOL_LABEL="testbed.gitea.bpg.pw/pool"
HOST="127.0.0.1"
API_URL="https://$HOST:$APISERVER_PORT"
GITEA_URL="http://$HOST:$GITEA_PORT"

# ---------------------------------------------------------------------------- helpers

log() { printf '[testbed] %s\n' "$*" >&2; }
warn() { printf '[testbed] WARNING: %s\n' "$*" >&2; }
die() {
  printf '[testbed] ERROR: %s\n' "$*" >&2
  exit 1
}

PHASE=""
PHASE_T0=""
UP_T0="$EPOCHREALTIME"
phase() {
  PHASE="$1"
  PHASE_T0="$EPOCHREALTIME"
}
phase_done() {
  awk -v a="$PHASE_T0" -v b="$EPOCHREALTIME" -v p="$PHASE" 'BEGIN { printf "[testbed] %-34s %7.1fs\n", p, b - a }' >&2
}
elapsed() { awk -v a="$1" -v b="$EPOCHREALTIME" 'BEGIN { printf "%.1f", b - a }'; }

# tool_version DIR MODULE: the version the tools module in scripts/tools/DIR pins.
tool_version() {
  awk -v m="$2" '($1 == "require" && $2 == m) || ($1 == m && $2 ~ /^v/) { print ($1 == "require" ? $3 : $2); exit }' \
    "$REPO/scripts/tools/$1/go.mod"
}

K8S_VERSION="$(tool_version kubernetes k8s.io/kubernetes)"
GITEA_VERSION="$(tool_version gitea code.gitea.io/gitea)"
K8S_BIN="$CACHE/kubernetes/$K8S_VERSION/bin"
GITEA_BIN="$CACHE/gitea/$GITEA_VERSION/bin/gitea"
KWOK_BIN="$CACHE/kwok/$KWOK_VERSION/bin/kwok"
SCALER_BIN="$REPO/bin/gitea-runner-scaler"

# wait_for DESC TIMEOUT CMD...: poll CMD every half second until it succeeds.
wait_for() {
  local desc="$1" timeout="$2"
  shift 2
  local t0="$EPOCHREALTIME"
  until "$@" >/dev/null 2>&1; do
    if awk -v a="$t0" -v b="$EPOCHREALTIME" -v t="$timeout" 'BEGIN { exit !(b - a > t) }'; then
      die "timed out after ${timeout}s waiting for $desc"
    fi
    sleep 0.5
  done
}

ensure_pkg() { # ensure_pkg COMMAND DEBIAN_PACKAGE
  command -v "$1" >/dev/null 2>&1 && return 0
  [[ "$(id -u)" == 0 ]] || die "$1 is missing; install the Debian package $2"
  log "installing $2 (for $1)"
  if [[ ! -f "$CACHE/.apt-updated" ]]; then
    apt-get update -qq >&2
    mkdir -p "$CACHE" && touch "$CACHE/.apt-updated"
  fi
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "$2" >&2
}

# ------------------------------------------------------------------ process control
# Each started process has .testbed/pids/NAME.pid holding its pid and its argv[0], so
# down and status act only on processes this script started, even if a pid is reused.

pidfile() { echo "$TB/pids/$1.pid"; }

proc_pid() { # prints the pid of NAME if it is running as recorded
  local f pid argv0
  f="$(pidfile "$1")"
  [[ -f "$f" ]] || return 1
  read -r pid argv0 <"$f" || return 1
  [[ -n "$pid" && -r "/proc/$pid/cmdline" ]] || return 1
  [[ "$(tr '\0' '\n' <"/proc/$pid/cmdline" | head -n1)" == "$argv0" ]] || return 1
  echo "$pid"
}

# start_proc NAME CMD...: start CMD detached (own session, output to logs/NAME.log)
# unless NAME already runs exactly this command line; a changed one (a new build, a
# new flag or port) is restarted.
start_proc() {
  local name="$1" pid
  shift
  if pid="$(proc_pid "$name")"; then
    if cmp -s "/proc/$pid/cmdline" <(printf '%s\0' "$@"); then
      log "$name already running (pid $pid)"
      return 0
    fi
    log "$name runs another build or other flags; restarting"
    # kube-apiserver, with clients still watching, stops serving at once but lingers
    # for a long time before it exits; nothing is lost by not waiting for that.
    stop_proc "$name" 5
  fi
  mkdir -p "$TB/pids" "$TB/logs"
  printf '==> %s starting %s\n' "$(date -Is)" "$name" >>"$TB/logs/$name.log"
  setsid "$@" >>"$TB/logs/$name.log" 2>&1 </dev/null &
  echo "$! $1" >"$(pidfile "$name")"
  log "$name started (pid $!, log $TB/logs/$name.log)"
}

# alive PID: the process exists and is not a zombie waiting for init to reap it.
alive() {
  local state
  state="$(awk '{ print $3 }' "/proc/$1/stat" 2>/dev/null)" || return 1
  [[ -n "$state" && "$state" != Z ]]
}

stop_proc() { # stop_proc NAME [TIMEOUT]: SIGTERM, then SIGKILL after TIMEOUT seconds
  local name="$1" timeout="${2:-15}" pid i
  if pid="$(proc_pid "$name")"; then
    kill -TERM "$pid" 2>/dev/null || true
    for ((i = 0; i < timeout * 10; i++)); do
      alive "$pid" || break
      sleep 0.1
    done
    if alive "$pid"; then
      warn "$name (pid $pid) ignored SIGTERM; killing"
      kill -KILL "$pid" 2>/dev/null || true
    fi
    log "$name stopped"
  fi
  rm -f "$(pidfile "$name")"
}

# ---------------------------------------------------------------------------- builds

build_kubernetes() {
  local c missing=()
  for c in kube-apiserver kube-controller-manager kube-scheduler; do
    [[ -x "$K8S_BIN/$c" ]] || missing+=("$c")
  done
  ((${#missing[@]})) || return 0
  local v="${K8S_VERSION#v}"
  # kubectl parses the server's version, so it must be the release's, not "v0.0.0".
  local ld="-s -w -X k8s.io/component-base/version.gitVersion=$K8S_VERSION"
  ld+=" -X k8s.io/component-base/version.gitMajor=${v%%.*}"
  ld+=" -X k8s.io/component-base/version.gitMinor=$(cut -d. -f2 <<<"$v")"
  ld+=" -X k8s.io/component-base/version.gitTreeState=clean"
  mkdir -p "$K8S_BIN"
  for c in "${missing[@]}"; do
    (cd "$REPO/scripts/tools/kubernetes" && go build -trimpath -ldflags "$ld" -o "$K8S_BIN/$c.tmp" "k8s.io/kubernetes/cmd/$c")
    mv "$K8S_BIN/$c.tmp" "$K8S_BIN/$c"
  done
}

build_gitea() {
  [[ -x "$GITEA_BIN" ]] && return 0
  local tags="sqlite sqlite_unlock_notify"
  mkdir -p "$(dirname "$GITEA_BIN")"
  # main.Version is what /api/v1/version reports.
  (cd "$REPO/scripts/tools/gitea" && CGO_ENABLED=1 go build -trimpath -tags "$tags" \
    -ldflags "-s -w -X main.Version=${GITEA_VERSION#v} -X 'main.Tags=$tags'" -o "$GITEA_BIN.tmp" code.gitea.io/gitea)
  mv "$GITEA_BIN.tmp" "$GITEA_BIN"
}

build_kwok() {
  [[ -x "$KWOK_BIN" ]] && return 0
  mkdir -p "$(dirname "$KWOK_BIN")"
  (cd "$CACHE" && GOBIN="$(dirname "$KWOK_BIN")" go install -trimpath -ldflags "-s -w" "sigs.k8s.io/kwok/cmd/kwok@$KWOK_VERSION")
}

# The test-bed tools are keyed by a hash of their sources and the Go version, so an
# unchanged module costs no build at all.
testbed_hash() {
  {
    go version
    cd "$REPO/scripts/testbed" && find . -type f \( -name '*.go' -o -name go.mod -o -name go.sum \) ! -name '*_test.go' |
      LC_ALL=C sort | xargs sha256sum
  } | sha256sum | cut -c1-16
}

build_testbed() {
  local out="$CACHE/testbed/$TESTBED_HASH/bin"
  [[ -x "$out/testbed-agent" && -x "$out/test-runner" ]] && return 0
  mkdir -p "$out"
  (cd "$REPO/scripts/testbed" && go build -o "$out/" ./cmd/testbed-agent ./cmd/test-runner)
  # Older builds of the module are of no further use.
  find "$CACHE/testbed" -mindepth 1 -maxdepth 1 ! -name "$TESTBED_HASH" -exec rm -rf {} +
}

build_scaler() {
  if ! compgen -G "$REPO/cmd/gitea-runner-scaler/*.go" >/dev/null; then
    warn "cmd/gitea-runner-scaler does not exist yet; pods with the scaler image will fail to start"
    return 0
  fi
  if ! (cd "$REPO" && go build -o bin/gitea-runner-scaler ./cmd/gitea-runner-scaler) 2>"$TB/logs/build-scaler.log"; then
    warn "the scaler does not build (see $TB/logs/build-scaler.log); pods with the scaler image will use the last build, if any"
  fi
}

# build_all runs the builds side by side (each is cached; a cold one takes minutes).
build_all() {
  mkdir -p "$TB/logs"
  TESTBED_HASH="$(testbed_hash)"
  local name pids=() names=() failed=0
  for name in kubernetes gitea kwok testbed; do
    "build_$name" >"$TB/logs/build-$name.log" 2>&1 &
    pids+=($!)
    names+=("$name")
  done
  build_scaler
  for i in "${!pids[@]}"; do
    if ! wait "${pids[$i]}"; then
      warn "building ${names[$i]} failed; last lines of $TB/logs/build-${names[$i]}.log:"
      tail -n 20 "$TB/logs/build-${names[$i]}.log" >&2
      failed=1
    fi
  done
  ((failed == 0)) || die "build failed"
  AGENT_BIN="$CACHE/testbed/$TESTBED_HASH/bin/testbed-agent"
  RUNNER_BIN="$CACHE/testbed/$TESTBED_HASH/bin/test-runner"
}

# ----------------------------------------------------------------------- credentials

# Generated once per data directory: a CA and serving certificate for the API server,
# the service-account key pair, and the admin's bearer token.
ensure_pki() {
  local pki="$TB/pki"
  [[ -f "$pki/tokens.csv" ]] && return 0
  mkdir -p "$pki"
  chmod 700 "$pki"
  (
    cd "$pki"
    openssl req -x509 -newkey rsa:2048 -nodes -days 3650 -subj "/CN=testbed-ca" \
      -addext "basicConstraints=critical,CA:TRUE" -addext "keyUsage=critical,keyCertSign,cRLSign" \
      -keyout ca.key -out ca.crt 2>/dev/null
    openssl req -newkey rsa:2048 -nodes -subj "/CN=kube-apiserver" -keyout apiserver.key -out apiserver.csr 2>/dev/null
    printf '%s\n' "subjectAltName=IP:$HOST,DNS:localhost,DNS:kubernetes,DNS:kubernetes.default,DNS:kubernetes.default.svc" \
      "extendedKeyUsage=serverAuth" "keyUsage=critical,digitalSignature,keyEncipherment" >apiserver.ext
    openssl x509 -req -in apiserver.csr -CA ca.crt -CAkey ca.key -CAcreateserial -days 3650 \
      -extfile apiserver.ext -out apiserver.crt 2>/dev/null
    openssl genrsa -out sa.key 2048 2>/dev/null
    openssl rsa -in sa.key -pubout -out sa.pub 2>/dev/null
    # A static token for the admin (group system:masters) and the control plane.
    printf '%s,%s,%s,"system:masters"\n' "$(openssl rand -hex 24)" "$ADMIN_USER" "$ADMIN_USER" >tokens.csv.tmp
    chmod 600 ./*.key tokens.csv.tmp
    mv tokens.csv.tmp tokens.csv
  )
}

admin_token() { cut -d, -f1 "$TB/pki/tokens.csv"; }

write_kubeconfig() {
  local ca
  ca="$(base64 -w0 <"$TB/pki/ca.crt")"
  umask 077
  cat >"$TB/kubeconfig.tmp" <<EOF
apiVersion: v1
kind: Config
clusters:
- name: testbed
  cluster:
    server: $API_URL
    certificate-authority-data: $ca
users:
- name: $ADMIN_USER
  user:
    token: $(admin_token)
contexts:
- name: testbed
  context:
    cluster: testbed
    user: $ADMIN_USER
    namespace: default
current-context: testbed
EOF
  mv "$TB/kubeconfig.tmp" "$TB/kubeconfig"
}

kc() { kubectl --kubeconfig "$TB/kubeconfig" "$@"; }

# ---------------------------------------------------------------------- components

start_etcd() {
  mkdir -p "$TB/etcd"
  start_proc etcd "$(command -v etcd)" --name testbed --data-dir "$TB/etcd" \
    --listen-client-urls "http://$HOST:$ETCD_PORT" --advertise-client-urls "http://$HOST:$ETCD_PORT" \
    --listen-peer-urls "http://$HOST:$ETCD_PEER_PORT" --initial-advertise-peer-urls "http://$HOST:$ETCD_PEER_PORT" \
    --initial-cluster "testbed=http://$HOST:$ETCD_PEER_PORT" --listen-metrics-urls "" \
    --quota-backend-bytes 2147483648
}

etcd_healthy() { curl -fsS "http://$HOST:$ETCD_PORT/health" | grep -q '"health":"true"'; }

start_apiserver() {
  local pki="$TB/pki"
  start_proc kube-apiserver "$K8S_BIN/kube-apiserver" \
    --etcd-servers "http://$HOST:$ETCD_PORT" \
    --bind-address "$HOST" --advertise-address "$HOST" --secure-port "$APISERVER_PORT" \
    --tls-cert-file "$pki/apiserver.crt" --tls-private-key-file "$pki/apiserver.key" \
    --token-auth-file "$pki/tokens.csv" \
    --authorization-mode Node,RBAC \
    --service-account-issuer https://kubernetes.default.svc.cluster.local \
    --service-account-key-file "$pki/sa.pub" --service-account-signing-key-file "$pki/sa.key" \
    --service-cluster-ip-range 10.96.0.0/16 \
    --endpoint-reconciler-type none \
    --allow-privileged="$ALLOW_PRIVILEGED" \
    --enable-admission-plugins ValidatingAdmissionPolicy \
    --profiling=false
}

apiserver_ready() {
  [[ "$(curl -fsS --cacert "$TB/pki/ca.crt" -H "Authorization: Bearer $(admin_token)" "$API_URL/readyz")" == ok ]]
}

# The node grace period is longer than a kubelet's: kwok's heartbeats come every
# 20-45s, and on a busy 2-core machine a late one must not taint the nodes NotReady.
start_controllers() {
  local kcfg="$TB/kubeconfig"
  start_proc kube-controller-manager "$K8S_BIN/kube-controller-manager" \
    --kubeconfig "$kcfg" --authentication-kubeconfig "$kcfg" --authorization-kubeconfig "$kcfg" \
    --bind-address "$HOST" --secure-port "$KCM_PORT" --leader-elect=false \
    --controllers '*' \
    --service-account-private-key-file "$TB/pki/sa.key" --root-ca-file "$TB/pki/ca.crt" \
    --use-service-account-credentials=false \
    --feature-gates WatchListClient=false \
    --node-monitor-grace-period 2m
  start_proc kube-scheduler "$K8S_BIN/kube-scheduler" \
    --kubeconfig "$kcfg" --authentication-kubeconfig "$kcfg" --authorization-kubeconfig "$kcfg" \
    --bind-address "$HOST" --secure-port "$SCHEDULER_PORT" --leader-elect=false
}

start_kwok() {
  # Node stages only: initialize (Ready) and a status heartbeat every 20-45s. Pods get
  # no stages, so kwok leaves them to testbed-agent. The stage files ship in kwok's
  # module. Node leases are off: kwok's lease informer asks for watch-list streams,
  # which Debian's etcd 3.4 cannot serve, so its lease renewals kept conflicting and
  # came late; status heartbeats are patches and keep the nodes Ready on their own.
  local dir stages
  dir="$(cd "$CACHE" && go mod download -json "sigs.k8s.io/kwok@$KWOK_VERSION" | sed -n 's/^[[:space:]]*"Dir": "\(.*\)",$/\1/p')"
  stages="$dir/kustomize/stage/node/fast/node-initialize.yaml,$dir/kustomize/stage/node/heartbeat/node-heartbeat.yaml"
  [[ -f "${stages%%,*}" && -f "${stages##*,}" ]] || die "kwok's stage files are missing under $dir"
  mkdir -p "$TB/kwok"
  # HOME keeps kwok from reading a stray ~/.kwok/kwok.yaml with stages of its own.
  HOME="$TB/kwok" start_proc kwok "$KWOK_BIN" \
    --kubeconfig "$TB/kubeconfig" \
    --manage-nodes-with-label-selector "$FAKE_NODE_LABEL=true" \
    --server-address "$HOST:$KWOK_PORT" \
    --node-ip "$HOST" \
    --node-lease-duration-seconds 0 \
    --config "$stages"
}

node_names() {
  local pool i
  for pool in $POOLS; do
    for ((i = 0; i < NODES_PER_POOL; i++)); do echo "testbed-$pool-$i $pool"; done
  done
}

apply_nodes() {
  local name pool
  node_names | while read -r name pool; do
    cat <<EOF
---
apiVersion: v1
kind: Node
metadata:
  name: $name
  annotations:
    node.alpha.kubernetes.io/ttl: "0"
    kwok.x-k8s.io/node: fake
  labels:
    kubernetes.io/os: linux
    kubernetes.io/arch: amd64
    kubernetes.io/hostname: $name
    type: kwok
    $FAKE_NODE_LABEL: "true"
    $POOL_LABEL: $pool
EOF
  done | kc apply -f - >/dev/null
}

nodes_ready() {
  local want have
  want="$(node_names | wc -l)"
  have="$(kc get nodes -l "$FAKE_NODE_LABEL=true" \
    -o jsonpath='{range .items[*]}{.status.conditions[?(@.type=="Ready")].status}{"\n"}{end}' | grep -c '^True$')"
  ((have >= want))
}

start_agent() {
  mkdir -p "$TB/hold" "$TB/logs/pods" "$TB/agent"
  start_proc testbed-agent "$AGENT_BIN" \
    --kubeconfig "$TB/kubeconfig" --ca-file "$TB/pki/ca.crt" \
    --node-selector "$FAKE_NODE_LABEL=true" \
    --scaler-bin "$SCALER_BIN" --runner-bin "$RUNNER_BIN" \
    --log-dir "$TB/logs/pods" --work-dir "$TB/agent" \
    --runner-env "TEST_RUNNER_HOLD_DIR=$TB/hold"
}

# ----------------------------------------------------------------------------- gitea

gitea_src() { (cd "$REPO/scripts/tools/gitea" && go list -m -f '{{.Dir}}' code.gitea.io/gitea); }

gitea() { GITEA_WORK_DIR="$TB/gitea" "$GITEA_BIN" --config "$TB/gitea/custom/conf/app.ini" --work-path "$TB/gitea" "$@"; }

write_gitea_config() {
  local g="$TB/gitea" src
  src="$(gitea_src)"
  mkdir -p "$g/custom/conf" "$g/data" "$g/log" "$g/repos"
  if [[ ! -f "$g/secrets.env" ]]; then
    # Generated once: changing them would invalidate sessions and runtime tokens.
    {
      echo "SECRET_KEY=$("$GITEA_BIN" generate secret SECRET_KEY)"
      echo "INTERNAL_TOKEN=$("$GITEA_BIN" generate secret INTERNAL_TOKEN)"
      echo "JWT_SECRET=$("$GITEA_BIN" generate secret JWT_SECRET)"
    } >"$g/secrets.env.tmp"
    chmod 600 "$g/secrets.env.tmp"
    mv "$g/secrets.env.tmp" "$g/secrets.env"
  fi
  # shellcheck disable=SC1091
  source "$g/secrets.env"
  umask 077
  cat >"$g/custom/conf/app.ini" <<EOF
; Written by scripts/testbed.sh on every up; edits are lost.
I_AM_BEING_UNSAFE_RUNNING_AS_ROOT = true
APP_NAME = gitea-runner-operator test bed
RUN_MODE = prod
WORK_PATH = $g

[server]
PROTOCOL = http
HTTP_ADDR = $HOST
HTTP_PORT = $GITEA_PORT
DOMAIN = $HOST
ROOT_URL = $GITEA_URL/
DISABLE_SSH = true
START_SSH_SERVER = false
OFFLINE_MODE = true
LFS_START_SERVER = false
APP_DATA_PATH = $g/data
; Built without embedded assets: locales and templates are read from the module source.
STATIC_ROOT_PATH = $src

[database]
DB_TYPE = sqlite3
PATH = $g/data/gitea.db
SQLITE_JOURNAL_MODE = WAL

[security]
INSTALL_LOCK = true
SECRET_KEY = $SECRET_KEY
INTERNAL_TOKEN = $INTERNAL_TOKEN

[oauth2]
JWT_SECRET = $JWT_SECRET

[service]
DISABLE_REGISTRATION = true

[repository]
ROOT = $g/repos

[actions]
ENABLED = true

[log]
MODE = console
LEVEL = Info
ROOT_PATH = $g/log

[mailer]
ENABLED = false

[session]
PROVIDER = file

[webhook]
ALLOWED_HOST_LIST = loopback

[cron.update_checker]
ENABLED = false
EOF
}

gitea_ready() { curl -fsS "$GITEA_URL/api/v1/version" | grep -q '"version"'; }

gitea_token_valid() {
  [[ -n "${1:-}" ]] && curl -fsS -o /dev/null -H "Authorization: token $1" "$GITEA_URL/api/v1/user"
}

# gitea_up prepares (first time), starts and waits for Gitea, then makes sure the
# admin token in gitea.env works. It runs beside the control plane's start.
gitea_up() {
  local t0="$EPOCHREALTIME"
  write_gitea_config
  if [[ ! -f "$TB/gitea/.prepared" ]] && ! proc_pid gitea >/dev/null; then
    gitea migrate >>"$TB/logs/gitea-setup.log" 2>&1
    local password
    password="$(openssl rand -hex 16)"
    gitea admin user create --admin --username "$GITEA_ADMIN" --password "$password" \
      --email "$GITEA_ADMIN@testbed.invalid" --must-change-password=false >>"$TB/logs/gitea-setup.log" 2>&1
    (umask 077 && echo "$password" >"$TB/gitea/admin-password")
    touch "$TB/gitea/.prepared"
    log "gitea prepared (migrate, admin user) in $(elapsed "$t0")s"
  fi
  GITEA_WORK_DIR="$TB/gitea" start_proc gitea "$GITEA_BIN" web --config "$TB/gitea/custom/conf/app.ini" --work-path "$TB/gitea"
  wait_for "gitea /api/v1/version" 120 gitea_ready
  local token=""
  if [[ -f "$TB/gitea.env" ]]; then
    token="$(sed -n 's/^GITEA_ADMIN_TOKEN=//p' "$TB/gitea.env")"
  fi
  if ! gitea_token_valid "$token"; then
    token="$(gitea admin user generate-access-token --username "$GITEA_ADMIN" \
      --token-name "testbed-$(date +%s%N)" --scopes all --raw 2>>"$TB/logs/gitea-setup.log" | tail -n1)"
    gitea_token_valid "$token" || die "the new Gitea admin token does not work (see $TB/logs/gitea-setup.log)"
  fi
  (
    umask 077
    printf 'GITEA_URL=%s\nGITEA_ADMIN_TOKEN=%s\nGITEA_ADMIN_USER=%s\n' "$GITEA_URL" "$token" "$GITEA_ADMIN" >"$TB/gitea.env.tmp"
    mv "$TB/gitea.env.tmp" "$TB/gitea.env"
  )
  log "gitea ready at $GITEA_URL ($(curl -fsS "$GITEA_URL/api/v1/version")) in $(elapsed "$t0")s"
}

# -------------------------------------------------------------------------- commands

cmd_build() {
  phase "build (cached by version)"
  build_all
  phase_done
}

cmd_up() {
  local fresh=0
  [[ "${1:-}" == "--fresh" ]] && fresh=1
  if ((fresh)); then
    cmd_down --purge
  fi
  mkdir -p "$TB/logs" "$TB/pids"
  touch "$TB/.testbed"

  phase "prerequisites"
  ensure_pkg etcd etcd-server
  ensure_pkg jq jq
  ensure_pkg git git
  ensure_pkg openssl openssl
  command -v kubectl >/dev/null || die "kubectl is missing"
  phase_done

  cmd_build

  phase "credentials"
  ensure_pki
  write_kubeconfig
  phase_done

  # Gitea starts beside the control plane; its result is collected at the end.
  gitea_up >"$TB/logs/gitea-up.log" 2>&1 &
  local gitea_job=$!

  phase "etcd"
  start_etcd
  wait_for "etcd health" 60 etcd_healthy
  phase_done

  phase "kube-apiserver (/readyz)"
  start_apiserver
  wait_for "kube-apiserver /readyz" 120 apiserver_ready
  phase_done

  phase "controllers, scheduler, kwok, agent"
  start_controllers
  start_kwok
  start_agent
  phase_done

  phase "fake nodes Ready"
  apply_nodes
  wait_for "fake nodes Ready" 120 nodes_ready
  phase_done

  phase "default ServiceAccount"
  wait_for "ServiceAccount default/default" 120 kc -n default get serviceaccount default
  phase_done

  phase "gitea (/api/v1/version)"
  if ! wait "$gitea_job"; then
    cat "$TB/logs/gitea-up.log" >&2
    die "gitea did not come up"
  fi
  cat "$TB/logs/gitea-up.log" >&2
  phase_done

  awk -v a="$UP_T0" -v b="$EPOCHREALTIME" 'BEGIN { printf "[testbed] up took %.1fs\n", b - a }' >&2
  log "ready; run: eval \"\$(scripts/testbed.sh env)\""
}

cmd_down() {
  local purge=0
  [[ "${1:-}" == "--purge" ]] && purge=1
  # The agent first: it stops the pod processes it started.
  local name
  for name in testbed-agent kwok kube-scheduler kube-controller-manager kube-apiserver etcd gitea; do
    stop_proc "$name" 20
  done
  if ((purge)) && [[ -d "$TB" ]]; then
    # Only a directory this script made (it holds the marker file) is wiped.
    [[ -f "$TB/.testbed" ]] || die "$TB does not look like a test-bed directory; not wiping it"
    rm -rf "$TB"
    log "wiped $TB"
  fi
}

cmd_env() {
  [[ -f "$TB/gitea.env" && -f "$TB/kubeconfig" ]] || die "the test bed is not up (run: scripts/testbed.sh up)"
  local token
  token="$(sed -n 's/^GITEA_ADMIN_TOKEN=//p' "$TB/gitea.env")"
  printf 'export KUBECONFIG=%q; export GITEA_URL=%q; export GITEA_ADMIN_TOKEN=%q; export TESTBED_DIR=%q\n' \
    "$TB/kubeconfig" "$GITEA_URL" "$token" "$TB"
}

cmd_status() {
  local name pid rc=0
  for name in etcd kube-apiserver kube-controller-manager kube-scheduler kwok testbed-agent gitea; do
    if pid="$(proc_pid "$name")"; then
      printf '%-24s running (pid %s)\n' "$name" "$pid"
    else
      printf '%-24s stopped\n' "$name"
      rc=1
    fi
  done
  if [[ -f "$TB/pki/tokens.csv" ]] && apiserver_ready; then
    echo "api server               ready at $API_URL"
    kc get nodes -L "$POOL_LABEL" 2>/dev/null | sed 's/^/  /'
  else
    echo "api server               not ready"
    rc=1
  fi
  if gitea_ready; then
    echo "gitea                    ready at $GITEA_URL ($(curl -fsS "$GITEA_URL/api/v1/version"))"
  else
    echo "gitea                    not ready"
    rc=1
  fi
  return "$rc"
}

# --------------------------------------------------------------------------- smoke
# A Secret and a plain batch Job whose pod "runs" act_runner (played by the test
# runner) against the local Gitea. The Gitea job is held in progress with a hold file
# until the smoke check has seen it there, then released.

api() { # api METHOD PATH [JSON]: Gitea REST call as the admin
  local method="$1" path="$2"
  shift 2
  curl -fsS -X "$method" -H "Authorization: token $GITEA_ADMIN_TOKEN" -H 'Content-Type: application/json' \
    "$GITEA_URL/api/v1$path" ${1:+--data "$1"}
}

job_field() { # job_field REPO JOB_ID FIELD
  api GET "/repos/smoke/$1/actions/jobs/$2" | jq -r ".$3"
}

# job_state prints a job's status, with its conclusion once it is completed
# ("completed/success"), as Gitea's GitHub-style API reports them.
job_state() {
  api GET "/repos/smoke/$1/actions/jobs/$2" | jq -r 'if .status == "completed" then "completed/\(.conclusion)" else .status end'
}

wait_job_state() { # wait_job_state REPO JOB_ID STATE TIMEOUT
  local t0="$EPOCHREALTIME" s
  while :; do
    s="$(job_state "$1" "$2")"
    if [[ "$s" == "$3" ]]; then
      log "gitea job $2: $s at +$(elapsed "$T_SMOKE")s (runner: $(job_field "$1" "$2" runner_name))"
      return 0
    fi
    [[ "$s" == completed/* ]] && die "gitea job $2 ended as $s, wanted $3"
    if awk -v a="$t0" -v b="$EPOCHREALTIME" -v t="$4" 'BEGIN { exit !(b - a > t) }'; then
      die "gitea job $2 is $s after ${4}s, wanted $3"
    fi
    sleep 0.5
  done
}

cmd_smoke() {
  # shellcheck disable=SC1091
  source "$TB/gitea.env"
  export KUBECONFIG="$TB/kubeconfig"
  T_SMOKE="$EPOCHREALTIME"
  local repo ns="testbed-smoke" workflow job_id run_id reg
  repo="smoke-$(date +%s)"

  api POST /orgs '{"username":"smoke","visibility":"public"}' >/dev/null 2>&1 || true
  api POST /orgs/smoke/repos "{\"name\":\"$repo\",\"auto_init\":true,\"default_branch\":\"main\"}" >/dev/null
  workflow="$(printf '%s\n' 'name: smoke' 'on: [push]' 'jobs:' '  build:' '    runs-on: ubuntu-latest' \
    '    steps:' '      - run: echo hello from the test bed' | base64 -w0)"
  api POST "/repos/smoke/$repo/contents/.gitea/workflows/ci.yml" \
    "{\"content\":\"$workflow\",\"message\":\"add smoke workflow\",\"branch\":\"main\"}" >/dev/null
  log "pushed .gitea/workflows/ci.yml to smoke/$repo"

  local t0="$EPOCHREALTIME"
  until job_id="$(api GET "/repos/smoke/$repo/actions/jobs" | jq -er '.jobs[0].id' 2>/dev/null)"; do
    awk -v a="$t0" -v b="$EPOCHREALTIME" 'BEGIN { exit !(b - a > 60) }' && die "no Gitea job appeared"
    sleep 0.5
  done
  wait_job_state "$repo" "$job_id" queued 30
  run_id="$(job_field "$repo" "$job_id" run_id)"

  # Hold the job in progress until it has been seen there.
  mkdir -p "$TB/hold"
  touch "$TB/hold/job-$job_id"

  reg="$(api POST /orgs/smoke/actions/runners/registration-token | jq -er .token)"
  kc get namespace "$ns" >/dev/null 2>&1 || kc create namespace "$ns" >/dev/null
  kc -n "$ns" create secret generic "$repo-runner" --from-literal=token="$reg" >/dev/null
  kc -n "$ns" apply -f - >/dev/null <<EOF
apiVersion: batch/v1
kind: Job
metadata:
  name: $repo
spec:
  backoffLimit: 2
  ttlSecondsAfterFinished: 600
  template:
    spec:
      restartPolicy: OnFailure
      automountServiceAccountToken: false
      containers:
      - name: runner
        image: gitea/act_runner:nightly-dind-rootless
        securityContext:
          privileged: true
        env:
        - name: GITEA_INSTANCE_URL
          value: $GITEA_URL
        - name: GITEA_RUNNER_REGISTRATION_TOKEN
          valueFrom:
            secretKeyRef:
              name: $repo-runner
              key: token
        - name: GITEA_RUNNER_EPHEMERAL
          value: "true"
        - name: GITEA_RUNNER_NAME
          value: $repo
        - name: GITEA_RUNNER_LABELS
          value: ubuntu-latest:docker://node:20-bookworm
        - name: TEST_RUNNER_IDLE_TIMEOUT
          value: 60s
EOF
  log "created Secret and Job $ns/$repo (gitea job $job_id, run $run_id)"

  wait_job_state "$repo" "$job_id" in_progress 90
  rm -f "$TB/hold/job-$job_id"
  wait_job_state "$repo" "$job_id" completed/success 60
  kc -n "$ns" wait --for=condition=Complete "job/$repo" --timeout=60s >/dev/null
  log "Kubernetes Job $ns/$repo Complete after $(elapsed "$T_SMOKE")s"
  kc -n "$ns" get pods -l "job-name=$repo" -o wide >&2 || true
  log "runner log: $TB/logs/pods/${ns}_$(kc -n "$ns" get pods -l "job-name=$repo" -o jsonpath='{.items[0].metadata.name}')_runner.log"
  log "smoke passed"
}

main() {
  local cmd="${1:-}"
  shift || true
  case "$cmd" in
  up) cmd_up "$@" ;;
  down) cmd_down "$@" ;;
  env) cmd_env ;;
  status) cmd_status ;;
  build) cmd_build ;;
  smoke) cmd_smoke ;;
  *)
    sed -n '2,/^set -euo/p' "${BASH_SOURCE[0]}" | sed '$d; s/^# \{0,1\}//' >&2
    exit 2
    ;;
  esac
}

main "$@"
