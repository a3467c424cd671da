{{/*
The listeners this release runs, default listener first, as a JSON list
(callers: fromJsonArray). Each entry:
  name              "default" or listeners[i].name
  path              the listener's value path, for messages
  workloadName      the CronJob or Deployment name, at most 52 characters
                    (the CronJob controller appends 11 to name its Jobs)
  selector          SCALER_SELECTOR: the listener's LabelSelector as compact
                    JSON, keys sorted ("" for the default listener); the
                    scaler parses it with metav1.LabelSelectorAsSelector
  exclude           SCALER_EXCLUDE_SELECTORS: the selectors of the listeners
                    before it
  schedule          the CronJob schedule
  listenerTemplate  the listener's own listenerTemplate

Who serves a RunnerGroup: additional listener i serves the groups its
selector matches minus those the selectors of listeners 0..i-1 match; the
default listener serves every group that no additional listener matches.
So each group has exactly one listener: the first that matches, else the
default. hack/check-listener-routing.sh proves it on the rendered env.

values.schema.json checks each selector's structure: at least one entry,
the syntax of label keys and values, the operators, values for In and NotIn
and none for Exists and DoesNotExist. The checks here are the ones it cannot
make: unique listener names and workload names, and the length of a label
key's prefix.
*/}}
{{- define "gitea-runner-operator.listeners" -}}
{{- $fullname := include "gitea-runner-operator.fullname" . -}}
{{- $additional := list -}}
{{- $selectors := list -}}
{{- $names := dict -}}
{{- range $i, $l := .Values.listeners | default list -}}
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
{{- if hasKey $names $name -}}
{{- fail (printf "%s.name: %q is already the name of %s; listener names must be unique" $path $name (get $names $name)) -}}
{{- end -}}
{{- $_ := set $names $name $path -}}
{{- $selector := $l.selector -}}
{{- $keys := list -}}
{{- range $key, $_ := $selector.matchLabels -}}
{{- $keys = append $keys (list (printf "%s.selector.matchLabels" $path) $key) -}}
{{- end -}}
{{- range $j, $e := $selector.matchExpressions -}}
{{- $keys = append $keys (list (printf "%s.selector.matchExpressions[%d].key" $path $j) $e.key) -}}
{{- end -}}
{{- range $keys -}}
{{- if gt (len (regexReplaceAll "/?[^/]*$" (last .) "")) 253 -}}
{{- fail (printf "%s: label key %q has a prefix longer than 253 characters (a DNS subdomain)" (first .) (last .)) -}}
{{- end -}}
{{- end -}}
{{- $additional = append $additional (dict
    "name" $name
    "path" $path
    "workloadName" (printf "%s-%s" $fullname $name | trunc 52 | trimSuffix "-")
    "selector" (toJson $selector)
    "exclude" $selectors
    "schedule" ($l.schedule | default $.Values.cronjob.schedule)
    "listenerTemplate" ($l.listenerTemplate | default dict)) -}}
{{- $selectors = append $selectors (toJson $selector) -}}
{{- end -}}
{{- $all := list -}}
{{- if .Values.defaultListener.enabled -}}
{{- $all = append $all (dict
    "name" "default"
    "path" "defaultListener"
    "workloadName" ($fullname | trunc 52 | trimSuffix "-")
    "selector" ""
    "exclude" $selectors
    "schedule" .Values.cronjob.schedule
    "listenerTemplate" dict) -}}
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
