#!/usr/bin/env bash
# s6-drain.sh RUNNER_ROOTFS_TAR_GZ RUNNER_ARCHIVE_TAR_GZ [PRESTOP]
#
# Replays a drain of a dind runner pod without a cluster: Gitea's s6 tree (the
# runner archive's scripts/s6) under Debian's s6-svscan as PID 1, in the bed's
# runner root file system, with stand-ins for the Docker daemon (its job container
# dies when it stops) and for the runner (on SIGTERM it waits 8 s for its job, which
# needs the daemon). It stops the tree as the kubelet does, first without a preStop
# hook, then with PRESTOP (default: the built-in runner pod's, runnerjob.RunnerFirstStop),
# and prints each side's timeline. Needs root (unshare, chroot).
set -euo pipefail
[[ $# -ge 2 ]] || { sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//' >&2; exit 2; }
ROOTFS_TAR=$1 ARCHIVE=$2
PRESTOP=${3:-'[ -d /etc/s6/gitea-runner/supervise ] || exit 0; s6-svc -d /etc/s6/gitea-runner && s6-svwait -d /etc/s6/gitea-runner'}
R="$(mktemp -d)"
trap 'rm -rf "$R"' EXIT
tar -xzf "$ROOTFS_TAR" -C "$R"
mkdir -p "$R/dev" "$R/etc/s6"
tar -xzf "$ARCHIVE" -C "$R/etc/s6" --strip-components=3 --wildcards '*/scripts/s6/*'

cat >"$R/usr/local/bin/dockerd-entrypoint.sh" <<'SH'
#!/bin/bash
echo "$(date +%s.%N) dockerd: up" >>/log
trap 'echo "$(date +%s.%N) dockerd: SIGTERM, stops with its containers" >>/log; rm -f /tmp/docker-up; exit 0' TERM
touch /tmp/docker-up
while :; do sleep 0.2; done
SH
cat >"$R/usr/local/bin/run.sh" <<'SH'
#!/bin/bash
echo "$(date +%s.%N) runner: up, its job running" >>/log
term() {
  echo "$(date +%s.%N) runner: SIGTERM, waits for its job" >>/log
  for _ in $(seq 40); do
    [ -f /tmp/docker-up ] || { echo "$(date +%s.%N) runner: the job's container died with the daemon: job failed" >>/log; exit 1; }
    sleep 0.2
  done
  echo "$(date +%s.%N) runner: job finished" >>/log
  exit 0
}
trap term TERM
while :; do sleep 0.2; done
SH
printf '#!/bin/sh\n[ -f /tmp/docker-up ]\n' >"$R/usr/local/bin/docker"
chmod +x "$R"/usr/local/bin/*

drain() {
  local hook=$1 u pid1
  rm -rf "$R"/etc/s6/*/supervise "$R"/etc/s6/*/event "$R/etc/s6/.s6-svscan" "$R/tmp/docker-up"
  : >"$R/log"
  unshare --pid --fork --mount chroot "$R" /bin/sh -c \
    'mount -t proc proc /proc; mount -t tmpfs dev /dev; mknod -m 666 /dev/null c 1 3; exec s6-svscan /etc/s6' 2>/dev/null &
  u=$!
  until grep -q "runner: up" "$R/log"; do sleep 0.2; done
  sleep 2
  pid1="$(pgrep -P "$u" s6-svscan)"
  echo "$(date +%s.%N) kubelet: pod deleted" >>"$R/log"
  if [[ -n "$hook" ]]; then
    nsenter -t "$pid1" -m -p -r /bin/sh -c "cd /; $hook" 2>/dev/null
    echo "$(date +%s.%N) kubelet: preStop returned $?" >>"$R/log"
  fi
  kill -TERM "$pid1" 2>/dev/null && echo "$(date +%s.%N) kubelet: SIGTERM to PID 1 (s6-svscan)" >>"$R/log"
  wait "$u" || true
  echo "$(date +%s.%N) kubelet: container exited" >>"$R/log"
  sort -n "$R/log" | awk 'NR == 1 { t0 = $1 } { printf "  %+6.2fs %s\n", $1 - t0, substr($0, index($0, " ") + 1) }'
}
echo "without a preStop hook:"
drain ""
echo "with the preStop hook: $PRESTOP"
drain "$PRESTOP"
