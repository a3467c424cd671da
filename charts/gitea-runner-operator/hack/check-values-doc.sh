#!/usr/bin/env bash
# Fails when README.md's generated parts (the values table, the chart's
# facts) differ from what values.yaml and Chart.yaml give, or when a key in
# values.yaml has no "##" comment above it. `make docs` rewrites them.
# The generator is Go (scripts/tools/docs/chartdoc), a tool module of its
# own, so it needs nothing beyond the Go toolchain.
set -euo pipefail

chart_dir="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
repo_root="$(cd "${chart_dir}/../.." && pwd)"

cd "${repo_root}/scripts/tools/docs"
go run -mod=readonly ./chartdoc -check "${chart_dir}"
echo "check-values-doc.sh: README.md's values table is what values.yaml's comments give"
