#!/usr/bin/env bash
# Keeps the chart's copy of the CRDs identical to the repository's crds/.
#
#   hack/sync-crds.sh          copy crds/*.yaml to files/crds/ (and drop copies
#                              whose source is gone); `make generate` runs this
#                              right after controller-gen writes crds/
#   hack/sync-crds.sh --check  change nothing; exit 1 naming each file that
#                              differs, is missing or is extra (the chart tests
#                              run this, so they fail on drift on their own)
#
# Why a copy at all: a chart can only read files inside its own folder, and
# the CRD must be a template (files/crds/, loaded by templates/crd.yaml) so
# `helm upgrade` upgrades it. crds/ is generated from the Go types in
# internal/api/v1alpha1 and stays the one source of the chart's copy.
set -euo pipefail

chart_dir="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
repo_root="$(cd "${chart_dir}/../.." && pwd)"
src="${repo_root}/crds"
dst="${chart_dir}/files/crds"

check=false
case "${1:-}" in
  --check) check=true ;;
  "") ;;
  *) echo "sync-crds.sh: unknown argument ${1} (use --check or nothing)" >&2; exit 2 ;;
esac

shopt -s nullglob
sources=("${src}"/*.yaml)
if [[ ${#sources[@]} -eq 0 ]]; then
  echo "sync-crds.sh: no CRD in ${src#"${repo_root}"/}/ to ship; the chart needs crds/gitea.bpg.pw_runnergroups.yaml" >&2
  exit 1
fi

drift=0
for f in "${sources[@]}"; do
  name="$(basename "${f}")"
  if [[ "${check}" == true ]]; then
    if [[ ! -f "${dst}/${name}" ]]; then
      echo "sync-crds.sh: charts/gitea-runner-operator/files/crds/${name} is missing; run make generate" >&2
      drift=1
    elif ! cmp -s "${f}" "${dst}/${name}"; then
      echo "sync-crds.sh: charts/gitea-runner-operator/files/crds/${name} differs from crds/${name}; run make generate and commit both" >&2
      drift=1
    fi
  else
    mkdir -p "${dst}"
    cp "${f}" "${dst}/${name}"
  fi
done

for f in "${dst}"/*.yaml; do
  name="$(basename "${f}")"
  if [[ ! -f "${src}/${name}" ]]; then
    if [[ "${check}" == true ]]; then
      echo "sync-crds.sh: charts/gitea-runner-operator/files/crds/${name} has no source in crds/; run make generate to remove it" >&2
      drift=1
    else
      rm -f "${f}"
    fi
  fi
done

if [[ "${check}" == true ]]; then
  if [[ ${drift} -ne 0 ]]; then
    exit 1
  fi
  echo "sync-crds.sh: chart CRDs match crds/"
else
  echo "sync-crds.sh: copied ${#sources[@]} CRD file(s) to charts/gitea-runner-operator/files/crds/"
fi
