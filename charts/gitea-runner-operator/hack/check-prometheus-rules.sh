#!/usr/bin/env bash
# Renders the chart's PrometheusRule and Grafana dashboard in both modes and
# checks them with scripts/tools/promrules: every PromQL expression parses
# with Prometheus' own parser, every alert's "for" and annotation template
# is valid, and every metric named is the scaler's or kube-state-metrics'
# RunnerGroup metric (files/kube-state-metrics.yaml). promtool is not built
# for this: its module takes far longer than this check's budget to build
# cold (it pulls every service-discovery SDK); the parser is the one
# promtool and the rule manager use.
# Needs helm on PATH (eval "$(scripts/install-helm.sh --print-env)").
set -euo pipefail

chart_dir="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
repo_root="$(cd "${chart_dir}/../.." && pwd)"
tools="${repo_root}/scripts/tools/promrules"

bin="$(mktemp -d)/promrules"
trap 'rm -rf "$(dirname "${bin}")"' EXIT
(cd "${tools}" && go build -mod=readonly -o "${bin}" .)

for mode in cronjob deployment; do
  echo "prometheus rules and dashboard, mode ${mode}:"
  # Only a looping listener serves /metrics; mode cronjob refuses it.
  metrics=false
  [[ "${mode}" == deployment ]] && metrics=true
  helm template gro "${chart_dir}" --namespace gitea-runners --set "mode=${mode}" \
    --set prometheusRule.enabled=true --set grafanaDashboard.enabled=true \
    --set kubeStateMetrics.enabled=true --set "metrics.enabled=${metrics}" \
    --set 'networkPolicy.metricsFrom[0].namespaceSelector.matchLabels.kubernetes\.io/metadata\.name=monitoring' |
    "${bin}" -ksm "${chart_dir}/files/kube-state-metrics.yaml" -scaler "${tools}/scaler-metrics.txt"
done
