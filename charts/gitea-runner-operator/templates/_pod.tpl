{{/*
The default listener pod: what every listener runs before its
listenerTemplate is merged in (by the rules in _merge.tpl). It passes Pod
Security Admission `restricted` and the usual admission policies as it is:
non-root UID 65532 (the image's user), read-only root filesystem, no
privilege escalation, every capability dropped, RuntimeDefault seccomp,
requests and limits set.

The listener container's env is the scaler's configuration, one entry per
setting it reads (files/reserved-env.txt lists the names; a template cannot
set them). A setting left at the scaler's own default is still set when the
chart has a value for it, so the rendered pod says what runs.

Argument: dict "root" $ "listener" <an entry of gitea-runner-operator.listeners>.
*/}}
{{- define "gitea-runner-operator.defaultListenerPod" -}}
{{- $v := .root.Values -}}
{{- $s := $v.scaler -}}
{{- $ca := include "gitea-runner-operator.giteaCA" .root | fromYaml -}}
{{- $rt := include "gitea-runner-operator.runnerTemplate" .root | fromYaml -}}
{{- $lp := $v.listenerPod | default dict -}}
{{- $proxyEnv := include "gitea-runner-operator.proxyEnv" .root | fromJsonArray -}}
{{- /* A proxy resolves a group's Gitea host itself, past the scaler's dial
check: only a list of allowed Gitea URLs keeps tokens from loopback and
metadata addresses (the same rule as a proxy set in listenerTemplate). */ -}}
{{- if and $proxyEnv (not $v.allowedGiteaURLs) -}}
{{- fail "proxy: a proxy needs allowedGiteaURLs (the proxy, not the scaler, resolves a group's Gitea host, so only a list keeps API tokens from loopback and metadata addresses)" -}}
{{- end -}}
metadata:
  labels:
    {{- include "gitea-runner-operator.listenerLabels" (dict "root" .root "listener" .listener.name) | nindent 4 }}
  {{- if or $rt $lp.annotations }}
  annotations:
    {{- with $lp.annotations }}
    {{- toYaml . | nindent 4 }}
    {{- end }}
    {{- with $rt }}
    # A changed runnerTemplate restarts a looping scaler, which reads it once.
    checksum/runner-template: {{ toYaml . | sha256sum | quote }}
    {{- end }}
  {{- end }}
spec:
  serviceAccountName: {{ include "gitea-runner-operator.serviceAccountName" .root | quote }}
  # The scaler talks to the API server with this token.
  automountServiceAccountToken: true
  # Under a CronJob a failed pass is not retried in place: the next tick runs
  # a fresh one.
  restartPolicy: {{ ternary "Always" "Never" (eq $v.mode "deployment") }}
  securityContext:
    runAsNonRoot: true
    runAsUser: 65532
    runAsGroup: 65532
    seccompProfile:
      type: RuntimeDefault
  nodeSelector:
    {{- toYaml (merge (deepCopy ($lp.nodeSelector | default dict)) (dict "kubernetes.io/os" "linux")) | nindent 4 }}
  {{- with $lp.tolerations }}
  tolerations:
    {{- toYaml . | nindent 4 }}
  {{- end }}
  {{- with $lp.affinity }}
  affinity:
    {{- toYaml . | nindent 4 }}
  {{- end }}
  {{- with $lp.imagePullSecrets }}
  imagePullSecrets:
    {{- toYaml . | nindent 4 }}
  {{- end }}
  {{- if or $ca $rt }}
  volumes:
  {{- end }}
  {{- if $ca }}
    - name: gitea-ca
      {{- if $ca.configMap }}
      configMap:
        name: {{ $ca.configMap | quote }}
      {{- else }}
      secret:
        secretName: {{ $ca.secret | quote }}
      {{- end }}
        items:
          - key: {{ $ca.key | quote }}
            path: {{ $ca.key | quote }}
  {{- end }}
  {{- if $rt }}
    - name: runner-template
      configMap:
        name: {{ include "gitea-runner-operator.runnerTemplateName" .root }}
  {{- end }}
  containers:
    - name: listener
      image: {{ include "gitea-runner-operator.image" .root | quote }}
      imagePullPolicy: {{ $v.image.pullPolicy }}
      command: [gitea-runner-scaler, run]
      env:
        - name: SCALER_LOG_FORMAT
          value: {{ $s.logFormat | toString | quote }}
        - name: SCALER_LOG_LEVEL
          value: {{ $s.logLevel | toString | quote }}
        {{- if eq $v.mode "deployment" }}
        - name: SCALER_LOOP
          value: "true"
        - name: SCALER_INTERVAL
          value: {{ $s.interval | toString | quote }}
        {{- if $v.metrics.enabled }}
        - name: SCALER_METRICS_ADDR
          value: {{ printf ":%d" (int64 $v.metrics.port) | quote }}
        {{- end }}
        {{- if $v.deployment.liveness.enabled }}
        - name: SCALER_HEALTH_ADDR
          value: {{ printf ":%d" (int64 $v.deployment.liveness.port) | quote }}
        - name: SCALER_HEALTHZ_STALE_INTERVALS
          value: {{ printf "%d" (int64 $v.deployment.liveness.staleIntervals) | quote }}
        {{- end }}
        {{- if $v.webhook.enabled }}
        - name: SCALER_WEBHOOK_ADDR
          value: {{ printf ":%d" (int64 $v.webhook.port) | quote }}
        - name: SCALER_WEBHOOK_SECRET
          valueFrom:
            secretKeyRef:
              name: {{ $v.webhook.secret.name | quote }}
              key: {{ $v.webhook.secret.key | quote }}
        {{- end }}
        {{- else }}
        - name: SCALER_LOOP
          value: "false"
        {{- end }}
        {{- with include "gitea-runner-operator.servedNamespaces" .root | fromJsonArray }}
        - name: SCALER_NAMESPACES
          value: {{ join "," . | quote }}
        {{- end }}
        {{- with .listener.selector }}
        - name: SCALER_SELECTOR
          value: {{ . | quote }}
        {{- end }}
        {{- with .listener.exclude }}
        - name: SCALER_EXCLUDE_SELECTORS
          value: {{ join ";" . | quote }}
        {{- end }}
        - name: SCALER_DRY_RUN
          value: {{ ternary "true" "false" (eq ($s.dryRun | toString) "true") | quote }}
        {{- with $s.runnerImage }}
        - name: SCALER_RUNNER_IMAGE
          value: {{ . | toString | quote }}
        {{- end }}
        {{- with $s.defaultLabels }}
        - name: SCALER_DEFAULT_LABELS
          value: {{ join "," . | quote }}
        {{- end }}
        - name: SCALER_SPAWN_TTL
          value: {{ $s.spawnTTL | toString | quote }}
        - name: SCALER_GITEA_TIMEOUT
          value: {{ $s.giteaTimeout | toString | quote }}
        - name: SCALER_WORKERS
          value: {{ printf "%d" (int64 $s.workers) | quote }}
        - name: SCALER_RUNNER_JOB_TTL
          value: {{ printf "%d" (int64 $s.runnerJobTTL) | quote }}
        - name: SCALER_RUNNER_TERMINATION_GRACE_PERIOD
          value: {{ printf "%d" (int64 $s.runnerTerminationGracePeriodSeconds) | quote }}
        {{- if $s.runnerSelfRegistration }}
        - name: SCALER_RUNNER_SELF_REGISTRATION
          value: "true"
        {{- end }}
        - name: SCALER_GROUP_TIMEOUT
          value: {{ $s.groupTimeout | toString | quote }}
        - name: SCALER_GITEA_MAX_RESPONSE_BYTES
          value: {{ printf "%d" (int64 $s.giteaMaxResponseBytes) | quote }}
        - name: SCALER_KUBE_QPS
          value: {{ $s.kubeQPS | toString | quote }}
        - name: SCALER_KUBE_BURST
          value: {{ printf "%d" (int64 $s.kubeBurst) | quote }}
        - name: SCALER_GITEA_CONCURRENCY
          value: {{ printf "%d" (int64 $s.giteaConcurrency) | quote }}
        - name: SCALER_RUNNER_IDLE_TIMEOUT
          value: {{ $s.runnerIdleTimeout | toString | quote }}
        - name: SCALER_RUNNER_START_TIMEOUT
          value: {{ $s.runnerStartTimeout | toString | quote }}
        - name: SCALER_ASSIGNMENT_HOLD
          value: {{ $s.assignmentHold | toString | quote }}
        {{- if and $s.rightsRecheck (ne ($s.rightsRecheck | toString) "0s") }}
        - name: SCALER_RIGHTS_RECHECK
          value: {{ $s.rightsRecheck | toString | quote }}
        {{- end }}
        {{- if $s.clusterWideReads }}
        - name: SCALER_CLUSTER_WIDE_READS
          value: "true"
        {{- end }}
        {{- with $v.allowedGiteaURLs }}
        - name: SCALER_ALLOWED_GITEA_URLS
          value: {{ join "," . | quote }}
        {{- end }}
        - name: SCALER_TENANT_CLUSTER_ROLE
          value: {{ include "gitea-runner-operator.tenantRoleName" .root | quote }}
        - name: SCALER_SERVICE_ACCOUNT
          value: {{ printf "%s:%s" .root.Release.Namespace (include "gitea-runner-operator.serviceAccountName" .root) | quote }}
        - name: SCALER_TRUST_UNLABELLED_NAMESPACES
          value: {{ ternary "true" "false" (eq ($s.trustUnlabelledNamespaces | toString) "true") | quote }}
        {{- if $s.userNamespacesPodSecurityStandards }}
        - name: SCALER_USER_NAMESPACES_POD_SECURITY_STANDARDS
          value: "true"
        {{- end }}
        {{- with ($v.runnerFlavour | default dict) }}
        {{- if ne (.default | default "Auto") "Auto" }}
        - name: SCALER_DEFAULT_FLAVOUR
          value: {{ .default | quote }}
        {{- end }}
        {{- if and (eq (.default | default "Auto") "UserNamespaced") (not ($v.userNamespacedRunners | default dict).image) }}
        {{- fail "runnerFlavour.default UserNamespaced needs userNamespacedRunners.image: the flavour is not set up" }}
        {{- end }}
        {{- if .pinned }}
        - name: SCALER_FLAVOUR_PINNED
          value: "true"
        {{- end }}
        {{- end }}
        {{- with ($v.userNamespacedRunners | default dict) }}
        {{- if .image }}
        - name: SCALER_USER_NAMESPACED_RUNNER_IMAGE
          value: {{ .image | quote }}
        - name: SCALER_USER_NAMESPACED_SECCOMP_PROFILE
          value: {{ .seccompProfile | quote }}
        - name: SCALER_USER_NAMESPACED_TUN_RESOURCE
          value: {{ .tunResource | quote }}
        {{- end }}
        {{- end }}
        {{- /* Go's collector keeps the heap under the container's memory
        limit instead of letting it grow to twice what is live (issue 23);
        the runtime reads the bytes. GOGC=50 lets it grow to one and a half
        times what is live: with the executable's pages beside the heap, a
        loop over 5,000 groups in 500 namespaces then stays within the
        default 128Mi (reliability.md, Measured). The listener's env may
        override both. */}}
        - name: GOMEMLIMIT
          valueFrom:
            resourceFieldRef:
              containerName: listener
              resource: limits.memory
        - name: GOGC
          value: "50"
        - name: SCALER_REGISTRATION_CHECKS
          value: {{ printf "%s/%s" $.root.Release.Namespace (include "gitea-runner-operator.registrationChecksName" $.root) | quote }}
        {{- if $ca }}
        - name: SCALER_GITEA_CA_FILE
          value: {{ printf "/etc/gitea-runner-scaler/gitea-ca/%s" $ca.key | quote }}
        {{- end }}
        {{- if $rt }}
        - name: SCALER_RUNNER_TEMPLATE
          value: /etc/gitea-runner-scaler/runner-template/runner-template.yaml
        {{- end }}
        {{- with $v.runnerTemplatePinned }}
        - name: SCALER_RUNNER_TEMPLATE_PINNED
          value: {{ join "," . | quote }}
        {{- end }}
        {{- with $proxyEnv }}
        {{- toYaml . | nindent 8 }}
        {{- end }}
        {{- with (($v.cleanup | default dict).deletedNamespaces | default dict) }}
        {{- if .enabled }}
        - name: SCALER_DELETED_NAMESPACES_MIRROR
          value: {{ printf "%s/%s" $.root.Release.Namespace (include "gitea-runner-operator.registrationsMirrorName" $.root) | quote }}
        - name: SCALER_DELETED_NAMESPACES_PER_PASS
          value: {{ printf "%d" (int64 (.perPass | default 4)) | quote }}
        {{- with .giteaURL }}
        - name: SCALER_DELETED_NAMESPACES_GITEA_URL
          value: {{ . | quote }}
        {{- end }}
        {{- if (.tokenSecret | default dict).name }}
        - name: SCALER_DELETED_NAMESPACES_TOKEN
          valueFrom:
            secretKeyRef:
              name: {{ .tokenSecret.name | quote }}
              key: {{ .tokenSecret.key | quote }}
              optional: true
        {{- end }}
        {{- end }}
        {{- end }}
        {{- with ($v.runnerConfig | default dict).defaults }}
        - name: SCALER_RUNNER_CONFIG_DEFAULTS
          value: {{ toJson . | quote }}
        {{- end }}
        {{- with ($v.runnerConfig | default dict).pinned }}
        - name: SCALER_RUNNER_CONFIG_PINNED
          value: {{ toJson . | quote }}
        {{- end }}
        {{- if ($v.runnerCache | default dict).enabled }}
        - name: SCALER_RUNNER_CACHE_URL
          value: {{ include "gitea-runner-operator.runnerCacheURL" .root | quote }}
        - name: SCALER_RUNNER_CACHE_SECRET_NAME
          value: {{ include "gitea-runner-operator.runnerCacheName" .root | quote }}
        - name: SCALER_RUNNER_CONFIG_IMAGE
          value: {{ include "gitea-runner-operator.image" .root | quote }}
        {{- end }}
      {{- if or $ca $rt }}
      volumeMounts:
        {{- if $ca }}
        - name: gitea-ca
          mountPath: /etc/gitea-runner-scaler/gitea-ca
          readOnly: true
        {{- end }}
        {{- if $rt }}
        - name: runner-template
          mountPath: /etc/gitea-runner-scaler/runner-template
          readOnly: true
        {{- end }}
      {{- end }}
      {{- $live := and (eq $v.mode "deployment") $v.deployment.liveness.enabled }}
      {{- if $live }}
      {{- $lp := int64 $v.deployment.liveness.port }}
      {{- if and $v.metrics.enabled (eq $lp (int64 $v.metrics.port)) }}
      {{- fail (printf "deployment.liveness.port (%d) must differ from metrics.port" $lp) }}
      {{- end }}
      {{- if and $v.webhook.enabled (eq $lp (int64 $v.webhook.port)) }}
      {{- fail (printf "deployment.liveness.port (%d) must differ from webhook.port" $lp) }}
      {{- end }}
      {{- end }}
      {{- if and (eq $v.mode "deployment") (or $v.metrics.enabled $v.webhook.enabled $live) }}
      ports:
        {{- if $live }}
        - name: health
          containerPort: {{ int64 $v.deployment.liveness.port }}
          protocol: TCP
        {{- end }}
        {{- if $v.metrics.enabled }}
        - name: metrics
          containerPort: {{ int64 $v.metrics.port }}
          protocol: TCP
        {{- end }}
        {{- if $v.webhook.enabled }}
        - name: webhook
          containerPort: {{ int64 $v.webhook.port }}
          protocol: TCP
        {{- end }}
      {{- end }}
      {{- if $live }}
      {{- /* /healthz counts from the start, so no initial delay: a stuck
      first pass fails it like any other. */}}
      livenessProbe:
        httpGet:
          path: /healthz
          port: health
        periodSeconds: 30
        timeoutSeconds: 5
        failureThreshold: 2
      {{- end }}
      resources:
        {{- toYaml $v.resources | nindent 8 }}
      securityContext:
        allowPrivilegeEscalation: false
        readOnlyRootFilesystem: true
        runAsNonRoot: true
        runAsUser: 65532
        runAsGroup: 65532
        capabilities:
          drop: [ALL]
        seccompProfile:
          type: RuntimeDefault
      # A failed pass shows its last log lines in `kubectl describe pod`.
      terminationMessagePolicy: FallbackToLogsOnError
{{- end -}}
