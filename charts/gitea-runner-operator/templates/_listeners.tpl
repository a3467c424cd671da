{{/*
The listeners this release runs, as a JSON list (fromJsonArray), default
listener first. Each entry:
  id            listener name: "default" or listeners[i].name
  path          value path of the listener, for messages
  workloadName  the CronJob/Deployment name (at most 52 characters: the
                CronJob controller appends 11 to name its Jobs)
  selector      SCALER_SELECTOR ("" for the default listener)
  exclude       SCALER_EXCLUDE_SELECTORS entries
  schedule      the CronJob schedule
  templates     listenerTemplates applied in order over the default pod:
                the top-level listenerTemplate, then the listener's own

Who serves a RunnerGroup: additional listener i serves the groups its
selector matches minus those matched by listeners 0..i-1; the default
listener serves every group no additional listener matches. So each group
has exactly one listener: the first that matches, else the default.
*/}}
{{- define "gitea-runner-operator.listeners" -}}
{{- $root := . -}}
{{- $fullname := include "gitea-runner-operator.fullname" . -}}
{{- $shared := dict "path" "listenerTemplate" "value" (.Values.listenerTemplate | default dict) -}}
{{- $additional := list -}}
{{- $selectors := list -}}
{{- $ids := dict -}}
{{- range $i, $l := (.Values.listeners | default list) -}}
{{- $path := printf "listeners[%d]" $i -}}
{{- $name := $l.name | default "" | toString -}}
{{- if not $name -}}
{{- fail (printf "%s.name: must be set" $path) -}}
{{- end -}}
{{- if or (gt (len $name) 63) (not (regexMatch "^[a-z0-9]([-a-z0-9]*[a-z0-9])?$" $name)) -}}
{{- fail (printf "%s.name: %q is not a DNS label (at most 63 lower-case letters, digits or '-', starting and ending with a letter or digit)" $path $name) -}}
{{- end -}}
{{- if eq $name "default" -}}
{{- fail (printf "%s.name: \"default\" is the default listener's name; choose another" $path) -}}
{{- end -}}
{{- if hasKey $ids $name -}}
{{- fail (printf "%s.name: %q is already the name of %s; listener names must be unique" $path $name (get $ids $name)) -}}
{{- end -}}
{{- $_ := set $ids $name $path -}}
{{- $selector := include "gitea-runner-operator.selectorString" (dict "selector" $l.selector "path" (printf "%s.selector" $path)) -}}
{{- $own := dict "path" (printf "%s.listenerTemplate" $path) "value" ($l.listenerTemplate | default dict) -}}
{{- $additional = append $additional (dict
    "id" $name
    "path" $path
    "workloadName" (printf "%s-%s" $fullname $name | trunc 52 | trimSuffix "-")
    "selector" $selector
    "exclude" $selectors
    "schedule" ($l.schedule | default $root.Values.cronjob.schedule)
    "templates" (list $shared $own)) -}}
{{- $selectors = append $selectors $selector -}}
{{- end -}}
{{- $all := list -}}
{{- if .Values.defaultListener.enabled -}}
{{- $all = append $all (dict
    "id" "default"
    "path" "defaultListener"
    "workloadName" ($fullname | trunc 52 | trimSuffix "-")
    "selector" ""
    "exclude" $selectors
    "schedule" .Values.cronjob.schedule
    "templates" (list $shared)) -}}
{{- end -}}
{{- $all = concat $all $additional -}}
{{- if not $all -}}
{{- fail "defaultListener.enabled is false and listeners is empty: no listener would serve any RunnerGroup" -}}
{{- end -}}
{{- $workloads := dict -}}
{{- range $all -}}
{{- if hasKey $workloads .workloadName -}}
{{- fail (printf "%s: workload name %q (cut to 52 characters) equals that of %s; shorten the release name, set fullnameOverride or rename the listener" .path .workloadName (get $workloads .workloadName)) -}}
{{- end -}}
{{- $_ := set $workloads .workloadName .path -}}
{{- end -}}
{{- toJson $all -}}
{{- end -}}
