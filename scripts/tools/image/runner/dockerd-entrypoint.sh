#!/bin/sh
# The bed's runner images start their Docker daemon with this, as s6's docker
# service starts upstream's (`s6-notifyoncheck dockerd-entrypoint.sh`): under
# any user but root, rootless through Debian's dockerd-rootless.sh
# (rootlesskit, slirp4netns, the user's subordinate ids), else rootful. The
# daemon listens where DOCKER_HOST points, which the runner reads too.
# Arguments go to dockerd; its settings (insecure registries, mirrors) are
# read from daemon.json as usual: ~/.config/docker/ rootless, /etc/docker/
# rootful.
set -eu
if [ "$(id -u)" != 0 ]; then
  : "${XDG_RUNTIME_DIR:=/run/user/$(id -u)}"
  HOME="$(getent passwd "$(id -u)" | cut -d: -f6)"
  export XDG_RUNTIME_DIR HOME
  exec /usr/share/docker.io/contrib/dockerd-rootless.sh --host="${DOCKER_HOST:-unix://$XDG_RUNTIME_DIR/docker.sock}" "$@"
fi
# A privileged container's mounts are private; dockerd wants its own to
# propagate to the containers it starts.
mount --make-rshared /
exec dockerd --host="${DOCKER_HOST:-unix:///var/run/docker.sock}" "$@"
