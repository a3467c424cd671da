#!/usr/bin/env bash
# Fails when the merge table in README.md ("### Merge rules") and the rules in
# templates/_merge.tpl differ: each rule there is introduced by a comment
# that is its table row, `{{- /* | field | rule | */ -}}`, so the rows must
# be the same, in the same order, word for word.
set -euo pipefail

chart_dir="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"

# The table's rows: the lines starting with '|' after the "### Merge rules"
# heading, without the header row and the separator row.
readme_rows() {
  awk '
    /^### Merge rules/ { in_section = 1; next }
    in_section && /^#/ { exit }
    in_section && /^\|/ { in_table = 1; print; next }
    in_table { exit }
  ' "${chart_dir}/README.md" | tail -n +3
}

template_rows() {
  sed -nE 's@^\{\{- /\* (\|.*\|) \*/ -\}\}$@\1@p' "${chart_dir}/templates/_merge.tpl"
}

readme="$(readme_rows)"
template="$(template_rows)"
if [[ -z "${readme}" || -z "${template}" ]]; then
  echo "check-merge-rules.sh: found no merge rules in README.md (${readme:+found}${readme:-none}) or templates/_merge.tpl (${template:+found}${template:-none})" >&2
  exit 1
fi
if ! diff <(echo "${readme}") <(echo "${template}") >&2; then
  echo "check-merge-rules.sh: the README's merge table (<) and templates/_merge.tpl (>) differ; keep one row per rule, in the same order and words" >&2
  exit 1
fi
echo "check-merge-rules.sh: $(echo "${readme}" | wc -l) merge rules, README table and templates/_merge.tpl agree"
