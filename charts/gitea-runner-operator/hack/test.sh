#!/usr/bin/env bash
# Runs every check of the chart and exits non-zero on the first failure:
#   1. the chart's CRD copy matches crds/          (hack/sync-crds.sh --check)
#   2. README values table == values.yaml keys      (hack/check-values-doc.sh)
#   3. README merge table == templates/_merge.tpl   (hack/check-merge-rules.sh)
#   4. helm lint --strict, default values and each ci/*-values.yaml
#   5. kubeVersion admits 1.34 (what CI runs) and refuses 1.33
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

step "kubeVersion: the version CI runs installs, an older minor is refused"
helm template gro "${chart_dir}" --kube-version 1.34.2 >/dev/null
if out="$(helm template gro "${chart_dir}" --kube-version 1.33.9 2>&1 >/dev/null)"; then
  echo "kubeVersion: Kubernetes 1.33 was accepted, but CI proves only 1.34"; exit 1
fi
grep -q "incompatible with Kubernetes v1.33.9" <<<"${out}" || { echo "kubeVersion: unexpected refusal: ${out}"; exit 1; }
echo "kubeVersion: 1.34.2 renders, 1.33.9 is refused"

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
