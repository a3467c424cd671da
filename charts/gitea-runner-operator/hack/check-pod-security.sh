#!/usr/bin/env bash
# Renders the chart with the default values and with each ci/*-values.yaml,
# in both modes, and checks every listener pod template against Pod Security
# Standards `restricted` with k8s.io/pod-security-admission, the library the
# API server's admission plugin runs (scripts/tools/helm/podsecurity).
# Needs helm on PATH (eval "$(scripts/install-helm.sh --print-env)").
set -euo pipefail

chart_dir="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
repo_root="$(cd "${chart_dir}/../.." && pwd)"
tools="${repo_root}/scripts/tools/helm"

bin="$(mktemp -d)/podsecurity"
trap 'rm -rf "$(dirname "${bin}")"' EXIT
(cd "${tools}" && go build -mod=readonly -o "${bin}" ./podsecurity)

for values in "" "${chart_dir}"/ci/*-values.yaml; do
  for mode in cronjob deployment; do
    label="default"
    if [[ -n "${values}" ]]; then label="ci/$(basename "${values}")"; fi
    echo "pod security, values ${label}, mode ${mode}:"
    # Mode cronjob refuses the values that only a looping listener serves
    # (metrics, its PodMonitor, the webhook), which a values file for mode
    # deployment may turn on: they are turned off for that render.
    only_deployment=()
    if [[ "${mode}" == cronjob ]]; then
      only_deployment=(--set metrics.enabled=false --set metrics.podMonitor.enabled=false --set webhook.enabled=false)
    fi
    helm template gro "${chart_dir}" --namespace gitea-runners --set "mode=${mode}" \
      ${values:+--values "${values}"} "${only_deployment[@]}" | "${bin}" -level restricted
  done
done
