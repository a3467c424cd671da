{{/*
Generic merge helpers. They work on dicts and lists parsed from JSON, never on
.Values itself: sprig's set changes a dict in place, and .Values is shared by
every listener.

"Empty" in this chart means null, "", [] or {}: such a template field keeps
the default. false and 0 are values and do apply (sprig's `empty` would drop
them, so a user could never turn a default flag off).
*/}}

{{/* "true" when the argument is null, "", [] or {}; "" otherwise. */}}
{{- define "gitea-runner-operator.isEmpty" -}}
{{- if kindIs "invalid" . -}}true
{{- else if and (kindIs "string" .) (eq . "") -}}true
{{- else if and (kindIs "slice" .) (eq (len .) 0) -}}true
{{- else if and (kindIs "map" .) (eq (len .) 0) -}}true
{{- end -}}
{{- end -}}

{{/*
Deep merge of two dicts, key by key: a dict meets a dict recursively, any
other non-empty value replaces (lists are replaced, not appended). Argument:
list base override. Returns JSON (fromJson).
*/}}
{{- define "gitea-runner-operator.deepMerge" -}}
{{- $base := deepCopy (index . 0 | default dict) -}}
{{- range $k, $v := (index . 1 | default dict) -}}
{{- if include "gitea-runner-operator.isEmpty" $v -}}
{{- else if and (kindIs "map" $v) (kindIs "map" (get $base $k)) -}}
{{- $_ := set $base $k (include "gitea-runner-operator.deepMerge" (list (get $base $k) $v) | fromJson) -}}
{{- else -}}
{{- $_ := set $base $k $v -}}
{{- end -}}
{{- end -}}
{{- toJson $base -}}
{{- end -}}

{{/*
Merges two lists of objects by one key (name for containers and volumes,
mountPath for volumeMounts): an override item whose key is already in the
base replaces that item in place; the others are appended in order.
Argument: dict "base" list "over" list "key" string. Returns JSON (fromJsonArray).
*/}}
{{- define "gitea-runner-operator.mergeByKey" -}}
{{- $key := .key -}}
{{- $over := .over | default list -}}
{{- $byKey := dict -}}
{{- range $over -}}
{{- $_ := set $byKey (get . $key | toString) . -}}
{{- end -}}
{{- $out := list -}}
{{- $placed := dict -}}
{{- range (.base | default list) -}}
{{- $k := get . $key | toString -}}
{{- if hasKey $byKey $k -}}
{{- $out = append $out (get $byKey $k) -}}
{{- $_ := set $placed $k true -}}
{{- else -}}
{{- $out = append $out . -}}
{{- end -}}
{{- end -}}
{{- range $over -}}
{{- $k := get . $key | toString -}}
{{- if not (hasKey $placed $k) -}}
{{- $out = append $out (get $byKey $k) -}}
{{- $_ := set $placed $k true -}}
{{- end -}}
{{- end -}}
{{- toJson $out -}}
{{- end -}}
