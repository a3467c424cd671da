#!/usr/bin/env bash
# rootfs.sh KIND OUT.tar.gz: a Debian 12 root file system for the bed's runner
# images (KIND runner) or its job image (KIND job), from Debian's packages in
# packages-KIND.txt, as one gzipped tar: an image's base layer. The runner's
# adds the user the dind-rootless flavour runs as, with the subordinate ids its
# user namespace maps, as Gitea's upstream image (docker:dind-rootless) does.
set -euo pipefail
kind="$1" out="$2"
here="$(cd "$(dirname "$0")" && pwd)"
hooks=()
if [[ "$kind" == runner ]]; then
  hooks+=(
    --customize-hook='chroot "$1" useradd --uid 1000 --user-group --create-home --shell /bin/bash rootless'
    --customize-hook='echo rootless:100000:65536 >"$1/etc/subuid"; echo rootless:100000:65536 >"$1/etc/subgid"'
    # Upstream's basic flavour starts /sbin/tini; Debian installs it in /usr/bin.
    --customize-hook='ln -s /usr/bin/tini "$1/usr/sbin/tini"'
  )
fi
mmdebstrap --variant=minbase --aptopt='APT::Install-Recommends "false"' \
  --dpkgopt='path-exclude=/usr/share/doc/*' --dpkgopt='path-exclude=/usr/share/man/*' \
  --dpkgopt='path-exclude=/usr/share/locale/*' \
  --include="$(paste -sd, "$here/packages-$kind.txt")" \
  "${hooks[@]}" --customize-hook='rm -rf "$1/var/lib/apt/lists/"* "$1/var/cache/apt/"*' \
  --skip=output/dev --quiet \
  bookworm "$out" http://deb.debian.org/debian
