{{/*
The listenerTemplate merge rules: how a user's pod template changes the
default listener pod (_pod.tpl). Pod fields are applied by the rules a
listener's controller must keep (its ServiceAccount, its identity labels,
the env that says what it serves); everything else is the user's.

Each comment line `| field | rule |` below is a row of the merge table in
README.md, in the table's order and in the same words
(hack/check-merge-rules.sh fails when they differ). The code under a row is
that rule. tests/listener_pod_merge_test.yaml has a case per row.

"Empty" means null, "", [] or {}: an empty field keeps the default. false
and 0 are values and apply (sprig's `empty` would drop them, so a user could
never turn a default flag off). So a rule tests with `with` only where its
field cannot be false or 0 (strings, lists, maps), and with isEmpty where it
can.

The helpers change the pod in place. They never change .Values: each
template is deep-copied first, because sprig's set changes a dict in place
and .Values is shared by every listener.
*/}}

{{/*
The merged listener pod (metadata and spec), as YAML.
Argument: dict "root" $ "listener" <an entry of gitea-runner-operator.listeners>.
*/}}
{{- define "gitea-runner-operator.listenerPod" -}}
{{- $pod := include "gitea-runner-operator.defaultListenerPod" . | fromYaml -}}
{{- /* What the chart reserves: its labels, and the scaler's env names. */ -}}
{{- $reservedLabels := deepCopy $pod.metadata.labels -}}
{{- $reservedEnv := list -}}
{{- range .root.Files.Lines "files/reserved-env.txt" -}}
{{- $line := trim . -}}
{{- if and $line (not (hasPrefix "#" $line)) -}}
{{- $reservedEnv = append $reservedEnv $line -}}
{{- end -}}
{{- end -}}
{{- if not $reservedEnv -}}
{{- fail "files/reserved-env.txt is missing from the chart or lists no env name" -}}
{{- end -}}
{{- /* | `listenerTemplate`, then `listeners[i].listenerTemplate` | merged over the default pod in that order, each by the rules below (`tests/listeners_template_test.yaml`) | */ -}}
{{- $templates := list
    (dict "path" "listenerTemplate" "value" .root.Values.listenerTemplate)
    (dict "path" (printf "%s.listenerTemplate" .listener.path) "value" .listener.listenerTemplate) -}}
{{- range $templates -}}
{{- include "gitea-runner-operator.mergeListenerTemplate" (dict
    "pod" $pod
    "template" (deepCopy (.value | default dict))
    "path" .path
    "mode" $.root.Values.mode
    "reservedLabels" $reservedLabels
    "reservedEnv" $reservedEnv) -}}
{{- end -}}
{{- /* A proxy in the listener's env: the dial check then sees only the
proxy, which resolves a group's Gitea host, so only a list of allowed Gitea
URLs keeps tokens from loopback and metadata addresses. The scaler refuses
to start so too; failing here says it at install. */ -}}
{{- if not .root.Values.allowedGiteaURLs -}}
{{- range (first $pod.spec.containers).env -}}
{{- if has .name (list "HTTPS_PROXY" "https_proxy" "HTTP_PROXY" "http_proxy") -}}
{{- fail (printf "%s: the listener container's env sets %s: a proxy needs allowedGiteaURLs (the proxy, not the scaler, resolves a group's Gitea host, so only a list keeps API tokens from loopback and metadata addresses)" $.listener.path .name) -}}
{{- end -}}
{{- end -}}
{{- end -}}
{{- toYaml $pod -}}
{{- end -}}

{{/*
Merges one listenerTemplate into .pod, in place.
Argument: dict "pod" "template" "path" (its value path, for messages) "mode"
"reservedLabels" "reservedEnv".
*/}}
{{- define "gitea-runner-operator.mergeListenerTemplate" -}}
{{- $pod := .pod -}}
{{- $spec := .pod.spec -}}
{{- $meta := .template.metadata | default dict -}}
{{- $tspec := .template.spec | default dict -}}
{{- /* | `metadata.name` | ignored (the workload names its pods) | */ -}}
{{- /* | `metadata.namespace` | ignored (pods run in the release namespace) | */ -}}
{{- /* | `metadata.labels` | added key by key; keys the chart sets are ignored: `app.kubernetes.io/name`, `app.kubernetes.io/instance`, `app.kubernetes.io/component`, `app.kubernetes.io/version`, `app.kubernetes.io/managed-by`, `app.kubernetes.io/part-of`, `helm.sh/chart`, `gitea.bpg.pw/listener` | */ -}}
{{- range $k, $v := $meta.labels -}}
{{- if not (hasKey $.reservedLabels $k) -}}
{{- $_ := set $pod.metadata.labels $k $v -}}
{{- end -}}
{{- end -}}
{{- /* | `metadata.annotations` | added key by key (pod annotations) | */ -}}
{{- with $meta.annotations -}}
{{- $annotations := $pod.metadata.annotations | default dict -}}
{{- range $k, $v := . -}}
{{- $_ := set $annotations $k $v -}}
{{- end -}}
{{- $_ := set $pod.metadata "annotations" $annotations -}}
{{- end -}}
{{- /* | `spec.serviceAccountName`, `spec.serviceAccount` | ignored (the listener needs the chart's ServiceAccount and RBAC) | */ -}}
{{- /* | `spec.restartPolicy` | applies when it fits the mode (`Never`/`OnFailure` under a CronJob, `Always` under a Deployment); any other value fails the render (`tests/listener_pod_validation_test.yaml`) | */ -}}
{{- with $tspec.restartPolicy -}}
{{- if eq $.mode "deployment" -}}
{{- if ne . "Always" -}}
{{- fail (printf "%s.spec.restartPolicy: %q does not fit mode deployment: a Deployment's pods must use Always" $.path .) -}}
{{- end -}}
{{- else if not (has . (list "Never" "OnFailure")) -}}
{{- fail (printf "%s.spec.restartPolicy: %q does not fit mode cronjob: a Job's pods must use Never or OnFailure" $.path .) -}}
{{- end -}}
{{- $_ := set $spec "restartPolicy" . -}}
{{- end -}}
{{- /* | `spec.nodeSelector` | merged key by key over `kubernetes.io/os: linux`; a key already there takes the template's value | */ -}}
{{- with $tspec.nodeSelector -}}
{{- $_ := set $spec "nodeSelector" (merge . $spec.nodeSelector) -}}
{{- end -}}
{{- /* | `spec.securityContext` | merged key by key, recursively; the defaults it does not name stay | */ -}}
{{- with $tspec.securityContext -}}
{{- include "gitea-runner-operator.mergeDeep" (dict "into" $spec "field" "securityContext" "over" .) -}}
{{- end -}}
{{- /* | `spec.tolerations` | appended | */ -}}
{{- with $tspec.tolerations -}}
{{- $_ := set $spec "tolerations" (concat ($spec.tolerations | default list) .) -}}
{{- end -}}
{{- /* | `spec.volumes` | added; one with the name of a volume already there replaces it | */ -}}
{{- with $tspec.volumes -}}
{{- include "gitea-runner-operator.mergeByKey" (dict "into" $spec "field" "volumes" "over" . "key" "name") -}}
{{- end -}}
{{- /* | `spec.imagePullSecrets` | added; one with a name already there replaces it | */ -}}
{{- with $tspec.imagePullSecrets -}}
{{- include "gitea-runner-operator.mergeByKey" (dict "into" $spec "field" "imagePullSecrets" "over" . "key" "name") -}}
{{- end -}}
{{- /* | `spec.initContainers` | added unchanged; one with a name already there replaces it | */ -}}
{{- with $tspec.initContainers -}}
{{- include "gitea-runner-operator.mergeByKey" (dict "into" $spec "field" "initContainers" "over" . "key" "name") -}}
{{- end -}}
{{- /* | `spec.containers[]` named other than `listener` | added unchanged after the listener container; one with a name already there replaces it | */ -}}
{{- range $tspec.containers -}}
{{- if ne (.name | default "") "listener" -}}
{{- include "gitea-runner-operator.mergeByKey" (dict "into" $spec "field" "containers" "over" (list .) "key" "name") -}}
{{- end -}}
{{- end -}}
{{- /* | every other `spec` field (`affinity`, `priorityClassName`, `topologySpreadConstraints`, `dnsPolicy`, `terminationGracePeriodSeconds`, `runtimeClassName`, `hostAliases`, …) | applies, replacing the default; applies whether or not the template has a `containers` entry | */ -}}
{{- range $k, $v := omit $tspec "serviceAccountName" "serviceAccount" "restartPolicy" "nodeSelector" "securityContext" "tolerations" "volumes" "imagePullSecrets" "initContainers" "containers" -}}
{{- if not (include "gitea-runner-operator.isEmpty" $v) -}}
{{- $_ := set $spec $k $v -}}
{{- end -}}
{{- end -}}
{{- /* | `spec.automountServiceAccountToken` | applies like any other field (`false` too: then mount a token yourself) | */ -}}
{{- /* | empty fields | keep the default | */ -}}
{{- /* (Every rule above and below skips an empty field: see the top of this file.) */ -}}
{{- /* | `spec.containers[]` named `listener` | merged into the default listener container by the rows below; it stays named `listener` and first | */ -}}
{{- range $tspec.containers -}}
{{- if eq (.name | default "") "listener" -}}
{{- include "gitea-runner-operator.mergeListenerContainer" (dict "container" (first $spec.containers) "override" . "reservedEnv" $.reservedEnv) -}}
{{- end -}}
{{- end -}}
{{- end -}}

{{/*
Merges a template's container named "listener" into the default listener
container, in place. Its name stays "listener".
Argument: dict "container" "override" "reservedEnv".
*/}}
{{- define "gitea-runner-operator.mergeListenerContainer" -}}
{{- $c := .container -}}
{{- $o := .override -}}
{{- /* | listener `env` | merged by name after the chart's env; reserved names are ignored: `KUBECONFIG` and every `SCALER_*` name the scaler reads (`files/reserved-env.txt`) | */ -}}
{{- $env := list -}}
{{- range $o.env -}}
{{- if not (has (.name | default "") $.reservedEnv) -}}
{{- $env = append $env . -}}
{{- end -}}
{{- end -}}
{{- include "gitea-runner-operator.mergeByKey" (dict "into" $c "field" "env" "over" $env "key" "name") -}}
{{- /* | listener `envFrom` | appended (explicit env, so the chart's `SCALER_*`, still wins over it) | */ -}}
{{- with $o.envFrom -}}
{{- $_ := set $c "envFrom" (concat ($c.envFrom | default list) .) -}}
{{- end -}}
{{- /* | listener `volumeMounts` | added; one with a mountPath already there replaces it | */ -}}
{{- with $o.volumeMounts -}}
{{- include "gitea-runner-operator.mergeByKey" (dict "into" $c "field" "volumeMounts" "over" . "key" "mountPath") -}}
{{- end -}}
{{- /* | listener `resources` | merged key by key, recursively (`limits.memory` alone keeps `limits.cpu` and the requests) | */ -}}
{{- with $o.resources -}}
{{- include "gitea-runner-operator.mergeDeep" (dict "into" $c "field" "resources" "over" .) -}}
{{- end -}}
{{- /* | listener `securityContext` | merged key by key, recursively (`capabilities.add` keeps `drop: [ALL]`) | */ -}}
{{- with $o.securityContext -}}
{{- include "gitea-runner-operator.mergeDeep" (dict "into" $c "field" "securityContext" "over" .) -}}
{{- end -}}
{{- /* | listener, every other field (`image`, `imagePullPolicy`, `command`, `args`, probes, `ports`, `workingDir`, …) | applies, replacing the default | */ -}}
{{- range $k, $v := omit $o "name" "env" "envFrom" "volumeMounts" "resources" "securityContext" -}}
{{- if not (include "gitea-runner-operator.isEmpty" $v) -}}
{{- $_ := set $c $k $v -}}
{{- end -}}
{{- end -}}
{{- end -}}

{{/* "true" when the argument is empty (null, "", [] or {}); "" otherwise. */}}
{{- define "gitea-runner-operator.isEmpty" -}}
{{- if kindIs "invalid" . -}}true
{{- else if and (kindIs "string" .) (eq . "") -}}true
{{- else if and (kindIs "slice" .) (eq (len .) 0) -}}true
{{- else if and (kindIs "map" .) (eq (len .) 0) -}}true
{{- end -}}
{{- end -}}

{{/*
Merges the dict .over into the dict at .into.<field>, in place, key by key:
a dict meets a dict recursively; any other non-empty value replaces (a list
is replaced, not appended).
Argument: dict "into" <dict> "field" <key> "over" <dict>.
*/}}
{{- define "gitea-runner-operator.mergeDeep" -}}
{{- $base := get .into .field | default dict -}}
{{- range $k, $v := .over -}}
{{- if include "gitea-runner-operator.isEmpty" $v -}}
{{- else if and (kindIs "map" $v) (kindIs "map" (get $base $k)) -}}
{{- include "gitea-runner-operator.mergeDeep" (dict "into" $base "field" $k "over" $v) -}}
{{- else -}}
{{- $_ := set $base $k $v -}}
{{- end -}}
{{- end -}}
{{- $_ := set .into .field $base -}}
{{- end -}}

{{/*
Merges the list .over into the list at .into.<field>, in place, by one key
of its items (name, or mountPath for volumeMounts): an item whose key is
already there replaces that item where it stands; the others are appended
in order.
Argument: dict "into" <dict> "field" <key> "over" <list> "key" <item key>.
*/}}
{{- define "gitea-runner-operator.mergeByKey" -}}
{{- $key := .key -}}
{{- $byKey := dict -}}
{{- range .over -}}
{{- $_ := set $byKey (get . $key | toString) . -}}
{{- end -}}
{{- $merged := list -}}
{{- $placed := dict -}}
{{- range get .into .field | default list -}}
{{- $k := get . $key | toString -}}
{{- if hasKey $byKey $k -}}
{{- $merged = append $merged (get $byKey $k) -}}
{{- $_ := set $placed $k true -}}
{{- else -}}
{{- $merged = append $merged . -}}
{{- end -}}
{{- end -}}
{{- range .over -}}
{{- $k := get . $key | toString -}}
{{- if not (hasKey $placed $k) -}}
{{- $merged = append $merged (get $byKey $k) -}}
{{- $_ := set $placed $k true -}}
{{- end -}}
{{- end -}}
{{- $_ := set .into .field $merged -}}
{{- end -}}
