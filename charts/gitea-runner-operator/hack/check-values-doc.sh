#!/usr/bin/env bash
# Fails when values.yaml and the README's values table name different keys,
# or when a key in values.yaml has no "##" comment above it.
# The checker is Go (scripts/tools/helm/valuesdoc) so it needs nothing beyond
# the Go toolchain; it lives in the tools module, not the main module, because
# it parses YAML with comments (go.yaml.in/yaml/v3).
set -euo pipefail

chart_dir="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
repo_root="$(cd "${chart_dir}/../.." && pwd)"

cd "${repo_root}/scripts/tools/helm"
go run -mod=readonly ./valuesdoc "${chart_dir}"
