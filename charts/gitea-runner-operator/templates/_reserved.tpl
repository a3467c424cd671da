{{/*
The listener container's env names that the scaler reads as its
configuration (the flags' env vars in the contract). The chart sets them from
values; the same names in listenerTemplate's listener container are ignored,
so a template cannot change what a listener serves.

This is the ONE list in the chart. Keep its shape: one name per line between
the define and end lines, nothing else, so tests outside the chart can parse
it and compare it with the scaler's flags.
*/}}
{{- define "gitea-runner-operator.reservedEnvNames" -}}
KUBECONFIG
SCALER_NAMESPACES
SCALER_SELECTOR
SCALER_EXCLUDE_SELECTORS
SCALER_LOOP
SCALER_INTERVAL
SCALER_DRY_RUN
SCALER_LOG_FORMAT
SCALER_LOG_LEVEL
SCALER_RUNNER_IMAGE
SCALER_DEFAULT_LABELS
SCALER_SPAWN_TTL
SCALER_GITEA_TIMEOUT
SCALER_WORKERS
SCALER_RUNNER_JOB_TTL
{{- end -}}

{{/* The list above as a JSON list (callers: fromJsonArray). */}}
{{- define "gitea-runner-operator.reservedEnvNamesJson" -}}
{{- $names := list -}}
{{- range (include "gitea-runner-operator.reservedEnvNames" . | splitList "\n") -}}
{{- if trim . -}}
{{- $names = append $names (trim .) -}}
{{- end -}}
{{- end -}}
{{- toJson $names -}}
{{- end -}}
