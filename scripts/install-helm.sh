#!/usr/bin/env bash
# Builds helm and the helm-unittest plugin from the Go module proxy and caches
# them under <repo>/.cache, keyed by version, so a second run costs nothing.
#
# Usage:
#   scripts/install-helm.sh              build what is missing, then print the env to use
#   scripts/install-helm.sh --print-env  print only the exports (for eval), building first if needed
#
# Why build from source: this machine reaches only the Go module proxy, Debian
# and npm, so release tarballs cannot be downloaded. helm-unittest cannot be
# `go install`ed (its go.mod has a replace), so it is built from the small
# tools module in scripts/tools/helm, which repeats that replace.
set -euo pipefail

HELM_VERSION="v3.22.0"
HELM_UNITTEST_VERSION="v1.1.2"
# The Kubernetes minor version helm assumes without a cluster: helm v3.22.0
# is built on client-go v0.37, and its release build sets 1.37 from that.
HELM_K8S_MINOR="37"

repo_root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cache="${repo_root}/.cache"
helm_dir="${cache}/helm-${HELM_VERSION}"
helm_bin="${helm_dir}/bin/helm"
unittest_dir="${cache}/helm-unittest-${HELM_UNITTEST_VERSION}"
unittest_bin="${unittest_dir}/bin/helm-unittest"
# Helm's own folders live in the cache too, so the tests never read or write
# the user's ~/.config/helm, ~/.cache/helm or plugins installed there.
helm_home="${cache}/helm-home-${HELM_VERSION}"
plugins_dir="${helm_home}/plugins"
plugin_dir="${plugins_dir}/unittest"

print_only=false
case "${1:-}" in
  --print-env) print_only=true ;;
  "") ;;
  -h|--help) sed -n '2,13p' "$0"; exit 0 ;;
  *) echo "install-helm.sh: unknown argument ${1} (use --print-env or nothing)" >&2; exit 2 ;;
esac

log() { if [[ "${print_only}" == false ]]; then echo "install-helm: $*" >&2; fi; }

build_helm() {
  if [[ -x "${helm_bin}" ]] && "${helm_bin}" version --template '{{.Version}}' 2>/dev/null | grep -qx "${HELM_VERSION}"; then
    log "helm ${HELM_VERSION} cached at ${helm_bin}"
    return
  fi
  log "building helm ${HELM_VERSION} (about a minute)"
  mkdir -p "${helm_dir}/bin"
  # The ldflags are what helm's own release build sets. Without them `helm
  # version` says "v3.22" and helm lint/template assume Kubernetes 1.20, which
  # fails the chart's kubeVersion constraint.
  GOBIN="${helm_dir}/bin" go install -ldflags "\
-X helm.sh/helm/v3/internal/version.version=${HELM_VERSION} \
-X helm.sh/helm/v3/pkg/chartutil.k8sVersionMajor=1 \
-X helm.sh/helm/v3/pkg/chartutil.k8sVersionMinor=${HELM_K8S_MINOR} \
-X helm.sh/helm/v3/pkg/lint/rules.k8sVersionMajor=1 \
-X helm.sh/helm/v3/pkg/lint/rules.k8sVersionMinor=${HELM_K8S_MINOR}" \
    "helm.sh/helm/v3/cmd/helm@${HELM_VERSION}"
}

build_unittest() {
  local stamp="${unittest_dir}/.built-from"
  local want
  # The tools module's go.mod/go.sum decide every dependency version of the
  # build, so a change to either (or to the version) means a rebuild.
  want="$( (echo "${HELM_UNITTEST_VERSION}"; cat "${repo_root}/scripts/tools/helm/go.mod" "${repo_root}/scripts/tools/helm/go.sum") | sha256sum | cut -d' ' -f1)"
  if [[ -x "${unittest_bin}" && -f "${stamp}" && "$(cat "${stamp}")" == "${want}" ]]; then
    log "helm-unittest ${HELM_UNITTEST_VERSION} cached at ${unittest_bin}"
    return
  fi
  log "building helm-unittest ${HELM_UNITTEST_VERSION} (about 30 s)"
  mkdir -p "${unittest_dir}/bin"
  (cd "${repo_root}/scripts/tools/helm" && go build -mod=readonly -o "${unittest_bin}" \
    -ldflags "-X github.com/helm-unittest/helm-unittest/internal/build.version=${HELM_UNITTEST_VERSION#v}" \
    github.com/helm-unittest/helm-unittest/cmd/helm-unittest)
  echo "${want}" >"${stamp}"
}

install_plugin() {
  mkdir -p "${plugin_dir}"
  # Written every run: cheap, and it follows the binary if the cache moves.
  # Hooks are left out on purpose: upstream's install hook downloads a release.
  cat >"${plugin_dir}/plugin.yaml" <<EOF
name: "unittest"
version: "${HELM_UNITTEST_VERSION#v}"
usage: "unittest for helm charts"
description: "helm-unittest built from source by scripts/install-helm.sh"
ignoreFlags: false
command: "${unittest_bin}"
EOF
}

build_helm
build_unittest
install_plugin

env_lines() {
  echo "export PATH=\"${helm_dir}/bin:\${PATH}\""
  echo "export HELM_PLUGINS=\"${plugins_dir}\""
  echo "export HELM_CACHE_HOME=\"${helm_home}/cache\""
  echo "export HELM_CONFIG_HOME=\"${helm_home}/config\""
  echo "export HELM_DATA_HOME=\"${helm_home}/data\""
}

if [[ "${print_only}" == true ]]; then
  env_lines
else
  log "helm: ${helm_bin}"
  log "helm-unittest plugin: ${plugin_dir}"
  log "to use them in a shell: eval \"\$(scripts/install-helm.sh --print-env)\""
  env_lines
fi
