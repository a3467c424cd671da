{{/*
The default listener pod: what every listener runs before listenerTemplate is
merged in (see _listener_pod.tpl). It is meant to pass Pod Security Admission
`restricted` and the usual admission policies as it is: non-root UID 65532
(the image's user), read-only root filesystem, no privilege escalation, all
capabilities dropped, RuntimeDefault seccomp, requests and limits set.
Argument of every helper here: dict "root" $ "listener" <entry of
gitea-runner-operator.listeners>.
*/}}

{{/*
The scaler's configuration as env, one entry per setting the scaler reads
(files/reserved-env.txt names them). Settings left at the scaler's own
default are still set when the chart has a value for them, so the rendered
pod says what runs.
*/}}
{{- define "gitea-runner-operator.listenerEnv" -}}
{{- $v := .root.Values -}}
{{- $s := $v.scaler -}}
{{- $env := list -}}
{{- $env = append $env (dict "name" "SCALER_LOG_FORMAT" "value" ($s.logFormat | toString)) -}}
{{- $env = append $env (dict "name" "SCALER_LOG_LEVEL" "value" ($s.logLevel | toString)) -}}
{{- if eq $v.mode "deployment" -}}
{{- $env = append $env (dict "name" "SCALER_LOOP" "value" "true") -}}
{{- $env = append $env (dict "name" "SCALER_INTERVAL" "value" ($s.interval | toString)) -}}
{{- else -}}
{{- $env = append $env (dict "name" "SCALER_LOOP" "value" "false") -}}
{{- end -}}
{{- with $v.watchNamespaces -}}
{{- $env = append $env (dict "name" "SCALER_NAMESPACES" "value" (join "," .)) -}}
{{- end -}}
{{- with .listener.selector -}}
{{- $env = append $env (dict "name" "SCALER_SELECTOR" "value" .) -}}
{{- end -}}
{{- with .listener.exclude -}}
{{- $env = append $env (dict "name" "SCALER_EXCLUDE_SELECTORS" "value" (join ";" .)) -}}
{{- end -}}
{{- $env = append $env (dict "name" "SCALER_DRY_RUN" "value" (ternary "true" "false" (eq ($s.dryRun | toString) "true"))) -}}
{{- with $s.runnerImage -}}
{{- $env = append $env (dict "name" "SCALER_RUNNER_IMAGE" "value" (toString .)) -}}
{{- end -}}
{{- with $s.defaultLabels -}}
{{- $env = append $env (dict "name" "SCALER_DEFAULT_LABELS" "value" (join "," .)) -}}
{{- end -}}
{{- $env = append $env (dict "name" "SCALER_SPAWN_TTL" "value" ($s.spawnTTL | toString)) -}}
{{- $env = append $env (dict "name" "SCALER_GITEA_TIMEOUT" "value" ($s.giteaTimeout | toString)) -}}
{{- $env = append $env (dict "name" "SCALER_WORKERS" "value" (printf "%d" (int64 $s.workers))) -}}
{{- $env = append $env (dict "name" "SCALER_RUNNER_JOB_TTL" "value" (printf "%d" (int64 $s.runnerJobTTL))) -}}
{{- toYaml $env -}}
{{- end -}}

{{- define "gitea-runner-operator.defaultListenerContainer" -}}
{{- $v := .root.Values -}}
name: listener
image: {{ printf "%s:%s" $v.image.repository (include "gitea-runner-operator.imageTag" .root) | quote }}
imagePullPolicy: {{ $v.image.pullPolicy }}
command:
  - gitea-runner-scaler
  - run
env:
  {{- include "gitea-runner-operator.listenerEnv" . | nindent 2 }}
resources:
  {{- toYaml $v.resources | nindent 2 }}
securityContext:
  allowPrivilegeEscalation: false
  readOnlyRootFilesystem: true
  runAsNonRoot: true
  runAsUser: 65532
  runAsGroup: 65532
  capabilities:
    drop:
      - ALL
  seccompProfile:
    type: RuntimeDefault
# A failed pass shows its last log lines in `kubectl describe pod`.
terminationMessagePolicy: FallbackToLogsOnError
{{- end -}}

{{- define "gitea-runner-operator.defaultListenerPod" -}}
metadata:
  labels:
    {{- include "gitea-runner-operator.listenerLabels" (dict "root" .root "listener" .listener.id) | fromJson | toYaml | nindent 4 }}
spec:
  serviceAccountName: {{ include "gitea-runner-operator.serviceAccountName" .root }}
  # The scaler talks to the API server with this token.
  automountServiceAccountToken: true
  # A failed pass is not retried in place: the next schedule runs a fresh one.
  restartPolicy: {{ ternary "Always" "Never" (eq .root.Values.mode "deployment") }}
  securityContext:
    runAsNonRoot: true
    runAsUser: 65532
    runAsGroup: 65532
    seccompProfile:
      type: RuntimeDefault
  nodeSelector:
    kubernetes.io/os: linux
  containers:
    - {{- include "gitea-runner-operator.defaultListenerContainer" . | nindent 6 }}
{{- end -}}
