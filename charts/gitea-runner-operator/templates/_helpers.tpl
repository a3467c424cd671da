{{/*
Names and labels shared by every template. Every helper carries the chart's
name as a prefix so it cannot clash with a parent chart's helpers.
*/}}

{{/* The chart name, or nameOverride; cut to 63 characters (a label value). */}}
{{- define "gitea-runner-operator.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{/*
The release-qualified name used for every object. A release name that
already holds the chart name is used alone, so `helm install
gitea-runner-operator` does not give gitea-runner-operator-gitea-runner-operator.
*/}}
{{- define "gitea-runner-operator.fullname" -}}
{{- if .Values.fullnameOverride -}}
{{- .Values.fullnameOverride | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- $name := default .Chart.Name .Values.nameOverride -}}
{{- if contains $name .Release.Name -}}
{{- .Release.Name | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name $name | trunc 63 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}
{{- end -}}

{{/* chart-version, as helm.sh/chart wants it ('+' is not allowed in a label value). */}}
{{- define "gitea-runner-operator.chart" -}}
{{- printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{/* The scaler image tag: image.tag, else the chart's appVersion. */}}
{{- define "gitea-runner-operator.imageTag" -}}
{{- default .Chart.AppVersion .Values.image.tag -}}
{{- end -}}

{{/*
Labels that say which release an object belongs to; Deployments select on
them, so they never change across upgrades.
Returned as JSON; callers use fromJson and merge dicts, never paste text.
*/}}
{{- define "gitea-runner-operator.selectorLabels" -}}
{{- dict "app.kubernetes.io/name" (include "gitea-runner-operator.name" .) "app.kubernetes.io/instance" (.Release.Name | trunc 63 | trimSuffix "-") | toJson -}}
{{- end -}}

{{/* The recommended app.kubernetes.io/* set plus helm.sh/chart, as JSON. */}}
{{- define "gitea-runner-operator.labels" -}}
{{- $labels := include "gitea-runner-operator.selectorLabels" . | fromJson -}}
{{- $_ := set $labels "helm.sh/chart" (include "gitea-runner-operator.chart" .) -}}
{{- $_ := set $labels "app.kubernetes.io/version" (include "gitea-runner-operator.imageTag" . | trunc 63 | trimSuffix "-") -}}
{{- $_ := set $labels "app.kubernetes.io/managed-by" .Release.Service -}}
{{- $_ := set $labels "app.kubernetes.io/part-of" "gitea-runner-operator" -}}
{{- toJson $labels -}}
{{- end -}}

{{/*
The label that tells listeners apart. A Deployment selects on it, so two
listeners' Deployments never select each other's pods.
*/}}
{{- define "gitea-runner-operator.listenerLabelKey" -}}
gitea.bpg.pw/listener
{{- end -}}

{{/*
Selector labels of one listener's pods: the release's plus component and
listener name. Argument: dict "root" $ "listener" <listener id>.
*/}}
{{- define "gitea-runner-operator.listenerSelectorLabels" -}}
{{- $labels := include "gitea-runner-operator.selectorLabels" .root | fromJson -}}
{{- $_ := set $labels "app.kubernetes.io/component" "listener" -}}
{{- $_ := set $labels (include "gitea-runner-operator.listenerLabelKey" .root) .listener -}}
{{- toJson $labels -}}
{{- end -}}

{{/*
Every label the chart puts on a listener's objects and pods. These keys are
the chart's identity: the same keys in listenerTemplate.metadata.labels are
ignored. Argument: dict "root" $ "listener" <listener id>.
*/}}
{{- define "gitea-runner-operator.listenerLabels" -}}
{{- $labels := include "gitea-runner-operator.labels" .root | fromJson -}}
{{- $labels = merge $labels (include "gitea-runner-operator.listenerSelectorLabels" . | fromJson) -}}
{{- toJson $labels -}}
{{- end -}}

{{/* The ServiceAccount the listeners run as. */}}
{{- define "gitea-runner-operator.serviceAccountName" -}}
{{- if .Values.serviceAccount.create -}}
{{- default (include "gitea-runner-operator.fullname" .) .Values.serviceAccount.name | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- default "default" .Values.serviceAccount.name -}}
{{- end -}}
{{- end -}}
