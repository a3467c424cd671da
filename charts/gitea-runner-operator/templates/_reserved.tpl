{{/*
The listener container's env names that the scaler reads as its
configuration, as a JSON list (callers: fromJsonArray). The chart sets them
from values; the same names in listenerTemplate's listener container are
ignored, so a template cannot change what a listener serves.

The names live in files/reserved-env.txt, which internal/cli's tests read
too, to compare them with the scaler's flags.
*/}}
{{- define "gitea-runner-operator.reservedEnvNamesJson" -}}
{{- $names := list -}}
{{- range .Files.Lines "files/reserved-env.txt" -}}
{{- $line := trim . -}}
{{- if and $line (not (hasPrefix "#" $line)) -}}
{{- $names = append $names $line -}}
{{- end -}}
{{- end -}}
{{- if not $names -}}
{{- fail "files/reserved-env.txt is missing from the chart or lists no env name" -}}
{{- end -}}
{{- toJson $names -}}
{{- end -}}
