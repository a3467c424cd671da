#!/usr/bin/env bash
# Runs every check of the chart and exits non-zero on the first failure:
#   1. the chart's CRD copy matches crds/          (hack/sync-crds.sh --check)
#   2. README values table == values.yaml keys      (hack/check-values-doc.sh)
#   3. README merge table == templates/_merge.tpl   (hack/check-merge-rules.sh)
#   4. helm lint --strict, default values and each ci/*-values.yaml
#   5. listener routing: each RunnerGroup label set has exactly one listener
#   6. every rendered listener pod passes Pod Security Standards restricted
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

step "listener routing (exactly one listener per RunnerGroup)"
"${chart_dir}/hack/check-listener-routing.sh"

step "pod security (restricted) of every rendered listener pod"
"${chart_dir}/hack/check-pod-security.sh"

step "helm unittest"
helm unittest --strict "${chart_dir}"

echo
echo "chart checks passed"
