{{/*
The listener pod: the default pod (_defaults.tpl) with the listener's
templates merged over it, one after the other (the top-level
listenerTemplate, then listeners[i].listenerTemplate). One rule per field;
the chart README's merge table lists them and tests/listener_pod_merge_test.yaml
tests each.

Pod-level fields never depend on the template having a containers entry
(actions/actions-runner-controller#2652 is the trap this avoids).
*/}}

{{/*
Returns the merged pod template (metadata + spec) as YAML.
Argument: dict "root" $ "listener" <entry of gitea-runner-operator.listeners>.
*/}}
{{- define "gitea-runner-operator.listenerPod" -}}
{{- $pod := include "gitea-runner-operator.defaultListenerPod" . | fromYaml -}}
{{- $ctx := dict
    "pod" $pod
    "mode" .root.Values.mode
    "reservedLabels" (include "gitea-runner-operator.listenerLabels" (dict "root" .root "listener" .listener.id) | fromJson)
    "reservedEnv" (include "gitea-runner-operator.reservedEnvNamesJson" .root | fromJsonArray) -}}
{{- range .listener.templates -}}
{{- include "gitea-runner-operator.applyListenerTemplate" (dict
    "template" (deepCopy (.value | default dict))
    "path" .path
    "pod" $ctx.pod
    "mode" $ctx.mode
    "reservedLabels" $ctx.reservedLabels
    "reservedEnv" $ctx.reservedEnv) -}}
{{- end -}}
{{- toYaml $pod -}}
{{- end -}}

{{/*
Merges one listenerTemplate into .pod, in place.
Argument: dict "pod" "template" "path" "mode" "reservedLabels" "reservedEnv".
*/}}
{{- define "gitea-runner-operator.applyListenerTemplate" -}}
{{- $ctx := . -}}
{{- $pod := .pod -}}
{{- $path := .path -}}
{{- $meta := .template.metadata | default dict -}}
{{- /* metadata.name and metadata.namespace: ignored (the workload names its pods). */ -}}
{{- /* metadata.labels: added key by key, except the chart's own label keys. */ -}}
{{- range $k, $v := ($meta.labels | default dict) -}}
{{- if not (hasKey $ctx.reservedLabels $k) -}}
{{- $_ := set $pod.metadata.labels $k $v -}}
{{- end -}}
{{- end -}}
{{- /* metadata.annotations: added key by key (a later template wins). */ -}}
{{- if $meta.annotations -}}
{{- $annotations := $pod.metadata.annotations | default dict -}}
{{- range $k, $v := $meta.annotations -}}
{{- $_ := set $annotations $k $v -}}
{{- end -}}
{{- $_ := set $pod.metadata "annotations" $annotations -}}
{{- end -}}
{{- $spec := $pod.spec -}}
{{- range $k, $v := (.template.spec | default dict) -}}
{{- if include "gitea-runner-operator.isEmpty" $v -}}
{{- /* empty: keep the default */ -}}
{{- else if has $k (list "serviceAccountName" "serviceAccount") -}}
{{- /* ignored: the listener needs the chart's ServiceAccount and its RBAC */ -}}
{{- else if eq $k "restartPolicy" -}}
{{- $allowed := ternary (list "Always") (list "Never" "OnFailure") (eq $ctx.mode "deployment") -}}
{{- if not (has $v $allowed) -}}
{{- if eq $ctx.mode "deployment" -}}
{{- fail (printf "%s.spec.restartPolicy: %q does not fit mode deployment: a Deployment's pods must use Always" $path $v) -}}
{{- else -}}
{{- fail (printf "%s.spec.restartPolicy: %q does not fit mode cronjob: a Job's pods must use Never or OnFailure" $path $v) -}}
{{- end -}}
{{- end -}}
{{- $_ := set $spec "restartPolicy" $v -}}
{{- else if eq $k "containers" -}}
{{- range $v -}}
{{- if eq (.name | default "") "listener" -}}
{{- include "gitea-runner-operator.mergeListenerContainer" (dict "container" (first $spec.containers) "override" . "reservedEnv" $ctx.reservedEnv) -}}
{{- else -}}
{{- $_ := set $spec "containers" (include "gitea-runner-operator.mergeByKey" (dict "base" $spec.containers "over" (list .) "key" "name") | fromJsonArray) -}}
{{- end -}}
{{- end -}}
{{- else if has $k (list "initContainers" "volumes" "imagePullSecrets") -}}
{{- $_ := set $spec $k (include "gitea-runner-operator.mergeByKey" (dict "base" (get $spec $k) "over" $v "key" "name") | fromJsonArray) -}}
{{- else if eq $k "tolerations" -}}
{{- $_ := set $spec $k (concat ($spec.tolerations | default list) $v) -}}
{{- else if eq $k "nodeSelector" -}}
{{- $_ := set $spec $k (merge (deepCopy $v) $spec.nodeSelector) -}}
{{- else if eq $k "securityContext" -}}
{{- $_ := set $spec $k (include "gitea-runner-operator.deepMerge" (list $spec.securityContext $v) | fromJson) -}}
{{- else -}}
{{- /* every other field replaces the default */ -}}
{{- $_ := set $spec $k $v -}}
{{- end -}}
{{- end -}}
{{- end -}}

{{/*
Merges a template container named "listener" into the default listener
container, in place. Argument: dict "container" "override" "reservedEnv".
*/}}
{{- define "gitea-runner-operator.mergeListenerContainer" -}}
{{- $c := .container -}}
{{- $reserved := .reservedEnv -}}
{{- range $k, $v := .override -}}
{{- if include "gitea-runner-operator.isEmpty" $v -}}
{{- else if eq $k "name" -}}
{{- /* stays "listener" */ -}}
{{- else if eq $k "env" -}}
{{- $env := list -}}
{{- range $v -}}
{{- if not (has (.name | default "") $reserved) -}}
{{- $env = append $env . -}}
{{- end -}}
{{- end -}}
{{- $_ := set $c "env" (include "gitea-runner-operator.mergeByKey" (dict "base" $c.env "over" $env "key" "name") | fromJsonArray) -}}
{{- else if eq $k "volumeMounts" -}}
{{- $_ := set $c "volumeMounts" (include "gitea-runner-operator.mergeByKey" (dict "base" $c.volumeMounts "over" $v "key" "mountPath") | fromJsonArray) -}}
{{- else if eq $k "envFrom" -}}
{{- $_ := set $c "envFrom" (concat ($c.envFrom | default list) $v) -}}
{{- else if has $k (list "resources" "securityContext") -}}
{{- $_ := set $c $k (include "gitea-runner-operator.deepMerge" (list (get $c $k) $v) | fromJson) -}}
{{- else -}}
{{- $_ := set $c $k $v -}}
{{- end -}}
{{- end -}}
{{- end -}}
