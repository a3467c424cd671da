{{/*
What the scaler does, and nothing more: read RunnerGroups and patch their
status, create/list/get/delete runner Jobs, keep its per-group state
ConfigMap, read the registration/auth token Secrets, and record Events.
The ClusterRole and the namespaced Roles share these rules, so the two
scopes cannot drift apart.
*/}}
{{- define "gitea-runner-operator.rbacRules" -}}
- apiGroups: ["gitea.bpg.pw"]
  resources: ["runnergroups"]
  verbs: ["get", "list", "watch"]
- apiGroups: ["gitea.bpg.pw"]
  resources: ["runnergroups/status"]
  verbs: ["patch"]
- apiGroups: ["batch"]
  resources: ["jobs"]
  verbs: ["create", "list", "get", "delete"]
- apiGroups: [""]
  resources: ["configmaps"]
  verbs: ["get", "create", "update"]
- apiGroups: [""]
  resources: ["secrets"]
  verbs: ["get"]
- apiGroups: [""]
  resources: ["events"]
  verbs: ["create"]
{{- end -}}
