#!/usr/bin/env bash
# Runs every check of the chart and exits non-zero on the first failure:
#   1. the chart's CRD copy matches crds/          (hack/sync-crds.sh --check)
#   2. README values table == values.yaml keys      (hack/check-values-doc.sh)
#   3. README merge table == templates/_merge.tpl   (hack/check-merge-rules.sh)
#   4. helm lint --strict, default values and each ci/*-values.yaml
#   5. kubeVersion admits the floor CI proves (1.30.0) and the highest minor it
#      runs (1.37), and refuses the minor below the floor (1.29)
#   5b. listener routing: each RunnerGroup label set has exactly one listener
#   6. every rendered listener pod passes Pod Security Standards restricted
#   6b. the PrometheusRule and dashboard parse and name metrics that exist
#   7. helm unittest (tests/*_test.yaml)
#
# helm and the unittest plugin come from scripts/install-helm.sh (built and
# cached under .cache/ on first use), so this runs on a fresh machine too.
set -euo pipefail

chart_dir="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
repo_root="$(cd "${chart_dir}/../.." && pwd)"

eval "$("${repo_root}/scripts/install-helm.sh" --print-env)"

step() { echo; echo "==> $*"; }

step "CRD copy matches crds/"
"${chart_dir}/hack/sync-crds.sh" --check

step "values.yaml and README values table"
"${chart_dir}/hack/check-values-doc.sh"

step "README merge table and templates/_merge.tpl"
"${chart_dir}/hack/check-merge-rules.sh"

step "helm lint --strict (default values)"
helm lint --strict "${chart_dir}"
for f in "${chart_dir}"/ci/*-values.yaml; do
  step "helm lint --strict (ci/$(basename "${f}"))"
  helm lint --strict "${chart_dir}" --values "${f}"
done

step "kubeVersion: the floor and the highest minor CI runs install, the minor below is refused"
# make test-k8s-versions runs the chart on the bed at both ends (Makefile:
# K8S_FLOOR_VERSION, K8S_CEILING_VERSION); the floor's first release must render.
for v in 1.30.0 1.37.2; do
  helm template gro "${chart_dir}" --kube-version "${v}" >/dev/null
done
if out="$(helm template gro "${chart_dir}" --kube-version 1.29.15 2>&1 >/dev/null)"; then
  echo "kubeVersion: Kubernetes 1.29 was accepted, but CI proves 1.30 and up only"; exit 1
fi
grep -q "incompatible with Kubernetes v1.29.15" <<<"${out}" || { echo "kubeVersion: unexpected refusal: ${out}"; exit 1; }
echo "kubeVersion: 1.30.0 and 1.37.2 render, 1.29.15 is refused"

step "listener routing (exactly one listener per RunnerGroup)"
"${chart_dir}/hack/check-listener-routing.sh"

step "pod security (restricted) of every rendered listener pod"
"${chart_dir}/hack/check-pod-security.sh"

step "PrometheusRule and Grafana dashboard expressions"
"${chart_dir}/hack/check-prometheus-rules.sh"

step "helm unittest"
helm unittest --strict "${chart_dir}"

echo
echo "chart checks passed"
