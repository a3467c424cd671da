{{/*
Small helpers shared by the templates: names, labels, the ServiceAccount and
the RBAC rules. Each carries the chart's name as a prefix, so it cannot clash
with a parent chart's helpers. Labels are YAML lines: include them with
nindent.
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

{{/*
scaler.giteaCA as YAML when a bundle is set ({} when not): configMap or
secret, and key. Both set is refused: which one wins would be a guess.
*/}}
{{- define "gitea-runner-operator.giteaCA" -}}
{{- $ca := .Values.scaler.giteaCA | default dict -}}
{{- if and $ca.configMap $ca.secret -}}
{{- fail "scaler.giteaCA: set configMap or secret, not both" -}}
{{- end -}}
{{- if or $ca.configMap $ca.secret -}}
{{- dict "configMap" ($ca.configMap | default "") "secret" ($ca.secret | default "") "key" ($ca.key | default "ca.crt") | toYaml -}}
{{- else -}}
{}
{{- end -}}
{{- end -}}

{{/*
The runner template the scaler reads, as YAML ({} when empty): runnerTemplate,
plus, when scaler.giteaCA is set and giteaCA.runnerPods is not false, the same
bundle for the runner pods (the runners talk to Gitea too): a volume gitea-ca
from the ConfigMap or Secret of the same name in the runner pod's own
namespace (a pod cannot mount another namespace's; optional, so a namespace
without it still runs runners, trusting only the public CAs), mounted at
/etc/gitea-ca in the runner container, and SSL_CERT_DIR naming the image's
CA directory and it. SSL_CERT_DIR adds to the system roots for Go programs
(act_runner, dockerd), where SSL_CERT_FILE would replace them. A runner
container in runnerTemplate that sets SSL_CERT_DIR itself keeps its own.
*/}}
{{- define "gitea-runner-operator.runnerTemplate" -}}
{{- $tpl := deepCopy (.Values.runnerTemplate | default dict) -}}
{{- $ca := include "gitea-runner-operator.giteaCA" . | fromYaml -}}
{{- if and $ca (ne (toString (.Values.scaler.giteaCA | default dict).runnerPods) "false") -}}
{{- $items := list (dict "key" $ca.key "path" "ca.crt") -}}
{{- $vol := dict "name" "gitea-ca" -}}
{{- if $ca.configMap -}}
{{- $_ := set $vol "configMap" (dict "name" $ca.configMap "optional" true "items" $items) -}}
{{- else -}}
{{- $_ := set $vol "secret" (dict "secretName" $ca.secret "optional" true "items" $items) -}}
{{- end -}}
{{- $spec := get $tpl "spec" | default dict -}}
{{- $_ := set $spec "volumes" (append (get $spec "volumes" | default list) $vol) -}}
{{- $mount := dict "name" "gitea-ca" "mountPath" "/etc/gitea-ca" "readOnly" true -}}
{{- $env := dict "name" "SSL_CERT_DIR" "value" "/etc/ssl/certs:/etc/gitea-ca" -}}
{{- $containers := list -}}
{{- $found := false -}}
{{- range (get $spec "containers" | default list) -}}
{{- if eq .name "runner" -}}
{{- $found = true -}}
{{- $_ := set . "volumeMounts" (append (get . "volumeMounts" | default list) $mount) -}}
{{- $own := false -}}
{{- range (get . "env" | default list) -}}{{- if eq .name "SSL_CERT_DIR" -}}{{- $own = true -}}{{- end -}}{{- end -}}
{{- if not $own -}}
{{- $_ := set . "env" (append (get . "env" | default list) $env) -}}
{{- end -}}
{{- end -}}
{{- $containers = append $containers . -}}
{{- end -}}
{{- if not $found -}}
{{- $containers = append $containers (dict "name" "runner" "volumeMounts" (list $mount) "env" (list $env)) -}}
{{- end -}}
{{- $_ := set $spec "containers" $containers -}}
{{- $_ := set $tpl "spec" $spec -}}
{{- end -}}
{{- include "gitea-runner-operator.runnerPodShorthands" (dict "root" . "tpl" $tpl) -}}
{{- toYaml $tpl -}}
{{- end -}}

{{/*
Adds runnerPod and proxy to the runner template $tpl, in place. They are
the platform team's like runnerTemplate, so they join its layer: where
runnerTemplate names the same annotation, pull Secret or env variable, its
own wins; nodeSelector, tolerations and affinity, which a pod takes whole,
are set in one place or the render fails (neither silently wins). A
group's spec.template then merges over the result by the runner pod merge
rules, and runnerTemplatePinned can pin these fields as any other.
Argument: dict "root" $ "tpl" <the runner template, a dict>.
*/}}
{{- define "gitea-runner-operator.runnerPodShorthands" -}}
{{- $tpl := .tpl -}}
{{- $rp := .root.Values.runnerPod | default dict -}}
{{- $proxyEnv := include "gitea-runner-operator.proxyEnv" .root | fromJsonArray -}}
{{- if or $rp.annotations $rp.imagePullSecrets $rp.nodeSelector $rp.tolerations $rp.affinity $proxyEnv -}}
{{- $spec := get $tpl "spec" | default dict -}}
{{- with $rp.annotations -}}
{{- $meta := get $tpl "metadata" | default dict -}}
{{- $_ := set $meta "annotations" (merge (get $meta "annotations" | default dict) .) -}}
{{- $_ := set $tpl "metadata" $meta -}}
{{- end -}}
{{- with $rp.imagePullSecrets -}}
{{- $merged := dict "list" (deepCopy .) -}}
{{- include "gitea-runner-operator.mergeByKey" (dict "into" $merged "field" "list" "over" (get $spec "imagePullSecrets" | default list) "key" "name") -}}
{{- $_ := set $spec "imagePullSecrets" $merged.list -}}
{{- end -}}
{{- range $field := list "nodeSelector" "tolerations" "affinity" -}}
{{- with get $rp $field -}}
{{- if get $spec $field -}}
{{- fail (printf "runnerPod.%s: runnerTemplate.spec.%s is set too; set it in one place (a pod takes it whole, so one would silently lose)" $field $field) -}}
{{- end -}}
{{- $_ := set $spec $field . -}}
{{- end -}}
{{- end -}}
{{- with $proxyEnv -}}
{{- $containers := list -}}
{{- $found := false -}}
{{- range (get $spec "containers" | default list) -}}
{{- if eq .name "runner" -}}
{{- $found = true -}}
{{- $own := dict -}}
{{- range (get . "env" | default list) -}}{{- $_ := set $own .name true -}}{{- end -}}
{{- $env := get . "env" | default list -}}
{{- range $proxyEnv -}}
{{- if not (hasKey $own .name) -}}{{- $env = append $env . -}}{{- end -}}
{{- end -}}
{{- $_ := set . "env" $env -}}
{{- end -}}
{{- $containers = append $containers . -}}
{{- end -}}
{{- if not $found -}}
{{- $containers = append $containers (dict "name" "runner" "env" $proxyEnv) -}}
{{- end -}}
{{- $_ := set $spec "containers" $containers -}}
{{- end -}}
{{- $_ := set $tpl "spec" $spec -}}
{{- end -}}
{{- end -}}

{{/*
The proxy's env, as a JSON list ([] without a proxy): HTTP_PROXY,
HTTPS_PROXY and NO_PROXY, each also in lower case (Go reads either; curl
and many tools in CI jobs read only the lower-case names). NO_PROXY starts
with the API server's in-cluster address: client-go reads the same
variables, and $(KUBERNETES_SERVICE_HOST), which the kubelet expands from
the service environment of every pod, is the address it dials in-cluster.
*/}}
{{- define "gitea-runner-operator.proxyEnv" -}}
{{- $p := .Values.proxy | default dict -}}
{{- $env := list -}}
{{- if or $p.httpProxy $p.httpsProxy -}}
{{- $no := concat (list "$(KUBERNETES_SERVICE_HOST)" "kubernetes.default.svc") ($p.noProxy | default list) | join "," -}}
{{- range $pair := list (list "HTTP_PROXY" $p.httpProxy) (list "HTTPS_PROXY" $p.httpsProxy) (list "NO_PROXY" $no) -}}
{{- with last $pair -}}
{{- $env = append $env (dict "name" (first $pair) "value" .) -}}
{{- $env = append $env (dict "name" (lower (first $pair)) "value" .) -}}
{{- end -}}
{{- end -}}
{{- end -}}
{{- toJson $env -}}
{{- end -}}

{{/* The scaler image tag: image.tag, else the chart's appVersion. */}}
{{- define "gitea-runner-operator.imageTag" -}}
{{- default .Chart.AppVersion .Values.image.tag -}}
{{- end -}}

{{/*
The scaler image reference: repository:tag, pinned by @digest when
image.digest is set. The tag stays so the reference still says which
version it is; the runtime pulls by the digest.
*/}}
{{- define "gitea-runner-operator.image" -}}
{{- $ref := printf "%s:%s" .Values.image.repository (include "gitea-runner-operator.imageTag" .) -}}
{{- with .Values.image.digest }}{{ $ref = printf "%s@%s" $ref . }}{{ end -}}
{{- $ref -}}
{{- end -}}

{{/*
The labels that say which release an object belongs to. A Deployment
selects on them, so they never change across upgrades.
*/}}
{{- define "gitea-runner-operator.selectorLabels" -}}
app.kubernetes.io/instance: {{ .Release.Name | trunc 63 | trimSuffix "-" | quote }}
app.kubernetes.io/name: {{ include "gitea-runner-operator.name" . | quote }}
{{- end -}}

{{/*
The labels of every object: the recommended app.kubernetes.io/* set and
helm.sh/chart ('+' is not allowed in a label value, so it becomes '_').
*/}}
{{- define "gitea-runner-operator.labels" -}}
{{ include "gitea-runner-operator.selectorLabels" . }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/part-of: gitea-runner-operator
app.kubernetes.io/version: {{ include "gitea-runner-operator.imageTag" . | trunc 63 | trimSuffix "-" | quote }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
{{- end -}}

{{/*
The selector labels of one listener's pods: the release's, plus the
component and the label that tells listeners apart, so two listeners'
Deployments never select each other's pods.
Argument: dict "root" $ "listener" <listener name>.
*/}}
{{- define "gitea-runner-operator.listenerSelectorLabels" -}}
{{ include "gitea-runner-operator.selectorLabels" .root }}
app.kubernetes.io/component: listener
gitea.bpg.pw/listener: {{ .listener | quote }}
{{- end -}}

{{/*
Every label of a listener's workload, Jobs and pods. These keys are the
chart's own: the same keys in listenerTemplate.metadata.labels are ignored.
Argument: dict "root" $ "listener" <listener name>.
*/}}
{{- define "gitea-runner-operator.listenerLabels" -}}
{{ include "gitea-runner-operator.labels" .root }}
app.kubernetes.io/component: listener
gitea.bpg.pw/listener: {{ .listener | quote }}
{{- end -}}

{{/*
The ServiceAccount the listeners run as. serviceAccount.create=false needs
a name (values.schema.json refuses it without; this fails too, for a chart
rendered without the schema): falling back to the namespace's "default"
ServiceAccount would hand the scaler's rights to every pod of the release
namespace that runs as it.
*/}}
{{- define "gitea-runner-operator.serviceAccountName" -}}
{{- if .Values.serviceAccount.create -}}
{{- default (include "gitea-runner-operator.fullname" .) .Values.serviceAccount.name | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- required "serviceAccount.name is required when serviceAccount.create is false (the namespace's default ServiceAccount would get the scaler's rights)" .Values.serviceAccount.name -}}
{{- end -}}
{{- end -}}

{{/*
What the scaler does cluster-wide, and nothing more: list RunnerGroups
(every namespace's, so that every listener agrees which group serves a job
several could run: README, "Which group serves a job") and patch their
status (also a group's whose namespace is not enabled, to say so); get
namespaces (their Pod Security labels); ask the API server what it may do in
a namespace (SelfSubjectRulesReviews, and SelfSubjectAccessReviews where the
rules are not the whole answer).
*/}}
{{- define "gitea-runner-operator.scalerRules" -}}
- apiGroups: ["gitea.bpg.pw"]
  resources: ["runnergroups"]
  verbs: ["list", "watch"]
- apiGroups: ["gitea.bpg.pw"]
  resources: ["runnergroups/status"]
  verbs: ["patch"]
- apiGroups: [""]
  resources: ["namespaces"]
  verbs: ["get", "list", "watch"]
- apiGroups: ["authorization.k8s.io"]
  resources: ["selfsubjectrulesreviews", "selfsubjectaccessreviews"]
  verbs: ["create"]
{{- if .Values.scaler.clusterWideReads }}
{{- /* The rights check of every namespace at once (tenancy.ReadBound):
who the scaler is, the tenant ClusterRole's current rules (that one role
only), and the RoleBindings that bind it. */}}
- apiGroups: ["authentication.k8s.io"]
  resources: ["selfsubjectreviews"]
  verbs: ["create"]
- apiGroups: ["rbac.authorization.k8s.io"]
  resources: ["clusterroles"]
  resourceNames: [{{ include "gitea-runner-operator.tenantRoleName" . | quote }}]
  verbs: ["get"]
- apiGroups: ["rbac.authorization.k8s.io"]
  resources: ["rolebindings"]
  verbs: ["list"]
{{- end }}
{{- end -}}

{{/*
What the scaler does inside a namespace it serves: create, list, get and
delete runner Jobs (delete: runners that never started, idle runners; get:
is an orphan registration's Job gone), keep its per-group state ConfigMaps (listed once per namespace and pass),
read the registration and API token Secrets (and create and update
<group>-registration-token for a group that leaves spec.registrationToken
out: the scaler mints it, and writes only a Secret the group owns), create
Events on the group and
list them (a Job's FailedCreate), list runner pods (did one start, and why
not). watch on Jobs, ConfigMaps and pods lets the looping Deployment keep
them in watch caches (tenancy.WatchRights; optional: without it the loop
lists them every pass); no Secret is listed or watched. The tenant ClusterRole holds these, bound in no namespace by the
chart unless watchNamespaces lists it. The same list is tenancy.Rights in
the scaler; the e2e SubjectAccessReview test checks the two agree.
*/}}
{{- define "gitea-runner-operator.tenantRules" -}}
- apiGroups: ["batch"]
  resources: ["jobs"]
  verbs: ["create", "list", "watch", "get", "delete"]
- apiGroups: [""]
  resources: ["configmaps"]
  verbs: ["get", "list", "watch", "create", "update"]
- apiGroups: [""]
  resources: ["secrets"]
  verbs: ["get", "create", "update"]
- apiGroups: [""]
  resources: ["events"]
  verbs: ["create", "list"]
- apiGroups: [""]
  resources: ["pods"]
  verbs: ["list", "watch"]
{{- end -}}

{{/*
The scaler's ClusterRole (cluster-wide reads) and the tenant ClusterRole.
ClusterRoles are cluster-scoped, so the release namespace is part of both
names: two releases of one name in two namespaces (one per team) would
otherwise share, and fight over, one object. `<fullname>-tenant` alone
could collide that way.
*/}}
{{- define "gitea-runner-operator.clusterRoleName" -}}
{{- printf "%s-%s" (include "gitea-runner-operator.fullname" .) .Release.Namespace -}}
{{- end -}}

{{- define "gitea-runner-operator.tenantRoleName" -}}
{{- printf "%s-%s-tenant" (include "gitea-runner-operator.fullname" .) .Release.Namespace -}}
{{- end -}}

{{/*
The command that enables namespace NS for this release: a RoleBinding of
the tenant ClusterRole to the scaler's ServiceAccount.
*/}}
{{- define "gitea-runner-operator.enableCommand" -}}
kubectl create rolebinding {{ include "gitea-runner-operator.tenantRoleName" . }} --namespace NS --clusterrole {{ include "gitea-runner-operator.tenantRoleName" . }} --serviceaccount {{ .Release.Namespace }}:{{ include "gitea-runner-operator.serviceAccountName" . }}
{{- end -}}

{{/*
Who owns the RunnerGroup CRD already, when it is not this release: "" when
this release installs (no such CRD yet) or upgrades it (it carries this
release's Helm ownership metadata), else a phrase naming the owner. The
release then leaves the CRD alone rather than adopt it: Helm refuses to
adopt an object without its ownership metadata and a template cannot add
it, and a second release taking over a CRD another release owns would make
two releases fight over every RunnerGroup in the cluster (an uninstall with
crds.keep=false would delete them all). Taking it over is one explicit step
(the NOTES print it). lookup is empty under `helm template` and
--dry-run=client, so those render the CRD.
*/}}
{{- define "gitea-runner-operator.crdOwner" -}}
{{- $name := (.Files.Get "files/crds/gitea.bpg.pw_runnergroups.yaml" | fromYaml).metadata.name | default "runnergroups.gitea.bpg.pw" -}}
{{- $live := lookup "apiextensions.k8s.io/v1" "CustomResourceDefinition" "" $name -}}
{{- if $live -}}
{{- $ann := $live.metadata.annotations | default dict -}}
{{- $labels := $live.metadata.labels | default dict -}}
{{- $rel := get $ann "meta.helm.sh/release-name" -}}
{{- $relNs := get $ann "meta.helm.sh/release-namespace" -}}
{{- $ours := and (eq $rel .Release.Name) (eq $relNs .Release.Namespace) (eq (get $labels "app.kubernetes.io/managed-by") "Helm") -}}
{{- if not $ours -}}
{{- if $rel -}}
release {{ $rel }} in namespace {{ $relNs }}
{{- else -}}
no Helm release (applied apart, e.g. kubectl apply -f crds/)
{{- end -}}
{{- end -}}
{{- end -}}
{{- end -}}

{{/*
Fails when turning crds.install off would make Helm delete the CRD: it
carries this release's ownership metadata and no helm.sh/resource-policy:
keep (see templates/crd.yaml). lookup is empty under `helm template`.
*/}}
{{- define "gitea-runner-operator.crdDropGuard" -}}
{{- $name := (.Files.Get "files/crds/gitea.bpg.pw_runnergroups.yaml" | fromYaml).metadata.name | default "runnergroups.gitea.bpg.pw" -}}
{{- $live := lookup "apiextensions.k8s.io/v1" "CustomResourceDefinition" "" $name -}}
{{- if $live -}}
{{- $ann := $live.metadata.annotations | default dict -}}
{{- $labels := $live.metadata.labels | default dict -}}
{{- $ours := and (eq (get $ann "meta.helm.sh/release-name") .Release.Name) (eq (get $ann "meta.helm.sh/release-namespace") .Release.Namespace) (eq (get $labels "app.kubernetes.io/managed-by") "Helm") -}}
{{- if and $ours (ne (get $ann "helm.sh/resource-policy") "keep") -}}
{{- fail (printf "crds.install=false: CRD %s belongs to this release and lacks the annotation helm.sh/resource-policy: keep, so Helm would delete it, and with it every RunnerGroup in the cluster. To keep it and manage it apart, run: kubectl annotate crd %s helm.sh/resource-policy=keep; then run this upgrade again. To delete it and every RunnerGroup on purpose: kubectl delete crd %s" $name $name $name) -}}
{{- end -}}
{{- end -}}
{{- end -}}

{{/*
Name of the ConfigMap that holds runnerTemplate.
*/}}
{{- define "gitea-runner-operator.runnerTemplateName" -}}
{{- printf "%s-runner-template" (include "gitea-runner-operator.fullname" . | trunc 47 | trimSuffix "-") -}}
{{- end -}}

{{/*
The name of each namespace's shared cache server: its Deployment,
Service, Secret, ConfigMap and PersistentVolumeClaim.
*/}}
{{- define "gitea-runner-operator.runnerCacheName" -}}
{{- printf "%s-cache" (include "gitea-runner-operator.fullname" .) | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{/*
The cache server's URL that runners get (SCALER_RUNNER_CACHE_URL):
runnerCache.url, or the namespace's Service, {namespace} filled in by the
scaler for each group.
*/}}
{{- define "gitea-runner-operator.runnerCacheURL" -}}
{{- .Values.runnerCache.url | default (printf "http://%s.{namespace}.svc:%d/" (include "gitea-runner-operator.runnerCacheName" .) (int64 .Values.runnerCache.port)) -}}
{{- end -}}

{{/*
The ConfigMap, in the release namespace, where the scaler mirrors what each
served namespace registered with Gitea (cleanup.deletedNamespaces); its Role
and RoleBinding have the same name.
*/}}
{{- define "gitea-runner-operator.registrationsMirrorName" -}}
{{- printf "%s-registrations" (include "gitea-runner-operator.fullname" .) | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{/*
The ConfigMap, in the release namespace, where passes keep the registration
token checks' verdicts for the next (SCALER_REGISTRATION_CHECKS); its Role and
RoleBinding have the same name.
*/}}
{{- define "gitea-runner-operator.registrationChecksName" -}}
{{- printf "%s-registration-checks" (include "gitea-runner-operator.fullname" .) | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{/*
Objects the chart makes in namespaces it does not own (a RoleBinding per
watchNamespaces entry, the runnerCache objects): a namespace's admin can
create one of those names first, and Helm then refuses the whole install or
upgrade ("exists and cannot be imported"), for every namespace. Such a
namespace is skipped instead, and NOTES names it: only its admin loses, and
only until they delete the object.

squatted: of .objects (dicts of apiVersion, kind, name) in namespace .ns,
those that exist and are not this release's (Helm's release-name and
release-namespace annotations), as "Kind/name" separated by ", "; empty
when none, and always with helm template (no cluster to look up).
*/}}
{{- define "gitea-runner-operator.squatted" -}}
{{- $root := .root -}}
{{- $ns := .ns -}}
{{- $found := list -}}
{{- range .objects -}}
{{- $o := lookup .apiVersion .kind $ns .name -}}
{{- if $o -}}
{{- $a := $o.metadata.annotations | default dict -}}
{{- if or (ne (index $a "meta.helm.sh/release-name" | default "") $root.Release.Name) (ne (index $a "meta.helm.sh/release-namespace" | default "") $root.Release.Namespace) -}}
{{- $found = append $found (printf "%s/%s" .kind .name) -}}
{{- end -}}
{{- end -}}
{{- end -}}
{{- join ", " $found -}}
{{- end -}}

{{/*
The objects of the tenant RoleBinding and of runnerCache in one namespace,
for squatted.
*/}}
{{/*
servedNamespaces: the namespaces this release enables and serves, as a JSON
list: watchNamespaces, then the names of tenantNamespaces, each once.
*/}}
{{- define "gitea-runner-operator.servedNamespaces" -}}
{{- $names := list -}}
{{- range .Values.tenantNamespaces -}}
{{- if has .name $names -}}
{{- fail (printf "tenantNamespaces lists %s twice" .name) -}}
{{- end -}}
{{- $names = append $names .name -}}
{{- end -}}
{{- concat .Values.watchNamespaces $names | uniq | toJson -}}
{{- end -}}

{{- define "gitea-runner-operator.tenantBindingObjects" -}}
{{- list (dict "apiVersion" "rbac.authorization.k8s.io/v1" "kind" "RoleBinding" "name" (include "gitea-runner-operator.tenantRoleName" .)) | toJson -}}
{{- end -}}

{{- define "gitea-runner-operator.runnerCacheObjects" -}}
{{- $name := include "gitea-runner-operator.runnerCacheName" . -}}
{{- $objects := list (dict "apiVersion" "v1" "kind" "Secret" "name" $name) (dict "apiVersion" "v1" "kind" "ConfigMap" "name" $name) (dict "apiVersion" "v1" "kind" "Service" "name" $name) (dict "apiVersion" "apps/v1" "kind" "Deployment" "name" $name) -}}
{{- if .Values.networkPolicy.enabled -}}
{{- $objects = append $objects (dict "apiVersion" "networking.k8s.io/v1" "kind" "NetworkPolicy" "name" $name) -}}
{{- end -}}
{{- if .Values.runnerCache.persistence.enabled -}}
{{- $objects = append $objects (dict "apiVersion" "v1" "kind" "PersistentVolumeClaim" "name" $name) -}}
{{- end -}}
{{- $objects | toJson -}}
{{- end -}}
