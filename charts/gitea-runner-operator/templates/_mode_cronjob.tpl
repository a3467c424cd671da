{{/*
mode: cronjob. One scaler pass per schedule tick. concurrencyPolicy Forbid
keeps two passes from racing; activeDeadlineSeconds ends a stuck pass so it
cannot hold Forbid forever and block every later tick; backoffLimit 0
because the next tick is the retry.
Argument: dict "root" $ "listener" <entry of gitea-runner-operator.listeners>.
*/}}
{{- define "gitea-runner-operator.cronJob" -}}
{{- $c := .root.Values.cronjob -}}
{{- $labels := include "gitea-runner-operator.listenerLabels" (dict "root" .root "listener" .listener.id) | fromJson -}}
apiVersion: batch/v1
kind: CronJob
metadata:
  name: {{ .listener.workloadName }}
  namespace: {{ .root.Release.Namespace }}
  labels:
    {{- toYaml $labels | nindent 4 }}
spec:
  schedule: {{ .listener.schedule | quote }}
  {{- with $c.timeZone }}
  timeZone: {{ . | quote }}
  {{- end }}
  concurrencyPolicy: Forbid
  suspend: {{ $c.suspend }}
  startingDeadlineSeconds: {{ int64 $c.startingDeadlineSeconds }}
  successfulJobsHistoryLimit: {{ int64 $c.successfulJobsHistoryLimit }}
  failedJobsHistoryLimit: {{ int64 $c.failedJobsHistoryLimit }}
  jobTemplate:
    metadata:
      labels:
        {{- toYaml $labels | nindent 8 }}
    spec:
      backoffLimit: 0
      activeDeadlineSeconds: {{ int64 $c.activeDeadlineSeconds }}
      template:
        {{- include "gitea-runner-operator.listenerPod" . | nindent 8 }}
{{- end -}}
