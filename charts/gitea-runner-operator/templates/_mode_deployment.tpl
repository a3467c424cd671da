{{/*
mode: deployment. One long-running scaler per listener (SCALER_LOOP=true).
A single replica with the Recreate strategy: two scalers serving the same
RunnerGroups at once, even for the length of a rolling update, would only
race each other for the same queued jobs.
Argument: dict "root" $ "listener" <entry of gitea-runner-operator.listeners>.
*/}}
{{- define "gitea-runner-operator.deployment" -}}
{{- $labels := include "gitea-runner-operator.listenerLabels" (dict "root" .root "listener" .listener.id) | fromJson -}}
apiVersion: apps/v1
kind: Deployment
metadata:
  name: {{ .listener.workloadName }}
  namespace: {{ .root.Release.Namespace }}
  labels:
    {{- toYaml $labels | nindent 4 }}
spec:
  replicas: 1
  revisionHistoryLimit: {{ int64 .root.Values.deployment.revisionHistoryLimit }}
  strategy:
    type: Recreate
  selector:
    matchLabels:
      {{- include "gitea-runner-operator.listenerSelectorLabels" (dict "root" .root "listener" .listener.id) | fromJson | toYaml | nindent 6 }}
  template:
    {{- include "gitea-runner-operator.listenerPod" . | nindent 4 }}
{{- end -}}
