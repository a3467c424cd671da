#!/usr/bin/env bash
# Renders the chart with ci/listeners-values.yaml in both modes and checks,
# parsing each rendered selector as the scaler does (a JSON LabelSelector
# through metav1.LabelSelectorAsSelector), that every RunnerGroup label set
# in hack/listener-routing-cases.yaml (and every combination of their labels)
# is served by exactly one listener. The checker lives in the tools module
# (scripts/tools/helm/listenerrouting) so the main go.mod stays untouched.
# Needs helm on PATH (eval "$(scripts/install-helm.sh --print-env)").
set -euo pipefail

chart_dir="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
repo_root="$(cd "${chart_dir}/../.." && pwd)"
tools="${repo_root}/scripts/tools/helm"

for mode in cronjob deployment; do
  echo "listener routing, mode ${mode}:"
  helm template gro "${chart_dir}" --namespace gitea-runners \
    --values "${chart_dir}/ci/listeners-values.yaml" --set "mode=${mode}" \
    | (cd "${tools}" && go run -mod=readonly ./listenerrouting "${chart_dir}/hack/listener-routing-cases.yaml")
done
