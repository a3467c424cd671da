{{/*
Label selectors: validation and the conversion of a LabelSelector
({matchLabels, matchExpressions}) to the string form the scaler's
--selector and --exclude-selector take (k=v, k in (a,b), k notin (a,b), k, !k).

The string is deterministic: requirements are sorted by key (then by text)
and In/NotIn values are sorted and de-duplicated, so a values file that only
reorders keys never changes the rendered env, and so never restarts pods.
*/}}

{{/* Fails unless .key is a valid label key; .path names the value. */}}
{{- define "gitea-runner-operator.validateLabelKey" -}}
{{- $key := .key | toString -}}
{{- $name := regexReplaceAll "^.*/" $key "" -}}
{{- $prefix := ternary (trimSuffix (printf "/%s" $name) $key) "" (contains "/" $key) -}}
{{- if not (regexMatch "^([a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*/)?[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?$" $key) -}}
{{- fail (printf "%s: %q is not a valid label key (an optional DNS subdomain prefix and '/', then a name of letters, digits, '-', '_' or '.')" .path $key) -}}
{{- end -}}
{{- if or (gt (len $name) 63) (gt (len $prefix) 253) -}}
{{- fail (printf "%s: label key %q is too long (name at most 63 characters, prefix at most 253)" .path $key) -}}
{{- end -}}
{{- end -}}

{{/* Fails unless .value is a valid label value; .path names the value. */}}
{{- define "gitea-runner-operator.validateLabelValue" -}}
{{- $value := .value | toString -}}
{{- if or (gt (len $value) 63) (not (regexMatch "^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$" $value)) -}}
{{- fail (printf "%s: %q is not a valid label value (at most 63 letters, digits, '-', '_' or '.', starting and ending with a letter or digit)" .path $value) -}}
{{- end -}}
{{- end -}}

{{/*
The string form of a selector, after validating it.
Argument: dict "selector" <LabelSelector> "path" <value path for messages>.
*/}}
{{- define "gitea-runner-operator.selectorString" -}}
{{- $path := .path -}}
{{- $sel := .selector | default dict -}}
{{- $reqs := list -}}
{{- range $k, $v := ($sel.matchLabels | default dict) -}}
{{- $p := printf "%s.matchLabels" $path -}}
{{- include "gitea-runner-operator.validateLabelKey" (dict "key" $k "path" $p) -}}
{{- include "gitea-runner-operator.validateLabelValue" (dict "value" $v "path" (printf "%s.%s" $p $k)) -}}
{{- $reqs = append $reqs (printf "%s\t%s=%s" $k $k $v) -}}
{{- end -}}
{{- range $i, $e := ($sel.matchExpressions | default list) -}}
{{- $p := printf "%s.matchExpressions[%d]" $path $i -}}
{{- $key := $e.key | default "" -}}
{{- if not $key -}}
{{- fail (printf "%s.key: must be set" $p) -}}
{{- end -}}
{{- include "gitea-runner-operator.validateLabelKey" (dict "key" $key "path" (printf "%s.key" $p)) -}}
{{- $op := $e.operator | default "" -}}
{{- $values := $e.values | default list -}}
{{- if has $op (list "In" "NotIn") -}}
{{- if not $values -}}
{{- fail (printf "%s.values: operator %s needs at least one value" $p $op) -}}
{{- end -}}
{{- range $j, $v := $values -}}
{{- include "gitea-runner-operator.validateLabelValue" (dict "value" $v "path" (printf "%s.values[%d]" $p $j)) -}}
{{- end -}}
{{- $set := $values | uniq | sortAlpha | join "," -}}
{{- $reqs = append $reqs (printf "%s\t%s %s (%s)" $key $key (ternary "in" "notin" (eq $op "In")) $set) -}}
{{- else if has $op (list "Exists" "DoesNotExist") -}}
{{- if $values -}}
{{- fail (printf "%s.values: operator %s takes no values" $p $op) -}}
{{- end -}}
{{- $reqs = append $reqs (printf "%s\t%s%s" $key (ternary "" "!" (eq $op "Exists")) $key) -}}
{{- else -}}
{{- fail (printf "%s.operator: %q is not one of In, NotIn, Exists, DoesNotExist" $p $op) -}}
{{- end -}}
{{- end -}}
{{- if not $reqs -}}
{{- fail (printf "%s: needs at least one matchLabels or matchExpressions entry (an empty selector would match every RunnerGroup)" $path) -}}
{{- end -}}
{{- $out := list -}}
{{- range ($reqs | sortAlpha) -}}
{{- $out = append $out (regexReplaceAll "^[^\t]*\t" . "") -}}
{{- end -}}
{{- join "," $out -}}
{{- end -}}
