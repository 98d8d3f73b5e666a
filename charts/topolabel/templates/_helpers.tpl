{{/* The base of every object's name: fullnameOverride, else "topolabel" (the names of manifests/). */}}
{{- define "topolabel.fullname" -}}
{{- .Values.fullnameOverride | default "topolabel" | trunc 50 | trimSuffix "-" -}}
{{- end -}}

{{- define "topolabel.agentName" -}}
{{- printf "%s-agent" (include "topolabel.fullname" .) -}}
{{- end -}}

{{- define "topolabel.ibCollectorName" -}}
{{- printf "%s-ib-collector" (include "topolabel.fullname" .) -}}
{{- end -}}

{{/* Labels on every object: the app's name (as in manifests/) and Helm's bookkeeping. */}}
{{- define "topolabel.labels" -}}
app.kubernetes.io/name: {{ .name }}
{{- with .part }}
app.kubernetes.io/part-of: {{ . }}
{{- end }}
app.kubernetes.io/instance: {{ .ctx.Release.Name }}
app.kubernetes.io/version: {{ .ctx.Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .ctx.Release.Service }}
helm.sh/chart: {{ printf "%s-%s" .ctx.Chart.Name .ctx.Chart.Version | replace "+" "_" }}
{{- end -}}

{{- define "topolabel.operatorLabels" -}}
{{- include "topolabel.labels" (dict "ctx" . "name" (include "topolabel.fullname" .)) -}}
{{- end -}}

{{- define "topolabel.agentLabels" -}}
{{- include "topolabel.labels" (dict "ctx" . "name" (include "topolabel.agentName" .) "part" (include "topolabel.fullname" .)) -}}
{{- end -}}

{{- define "topolabel.ibCollectorLabels" -}}
{{- include "topolabel.labels" (dict "ctx" . "name" (include "topolabel.ibCollectorName" .) "part" (include "topolabel.fullname" .)) -}}
{{- end -}}

{{- define "topolabel.image" -}}
{{- printf "%s:%s" .Values.image.repository (.Values.image.tag | default .Chart.AppVersion) -}}
{{- end -}}

{{- define "topolabel.imagePullPolicy" -}}
{{- with .Values.image.pullPolicy }}
imagePullPolicy: {{ . }}
{{- end }}
{{- end -}}

{{/* The documents of a file under files/ (copies of manifests/ made by hack/chart_files.py, so the chart and kustomize share them). */}}
{{- define "topolabel.documents" -}}
{{- $docs := list -}}
{{- range regexSplit "(?m)^---\\s*$" (.ctx.Files.Get .file) -1 -}}
{{- $doc := fromYaml . -}}
{{- if $doc }}{{ $docs = append $docs $doc }}{{ end -}}
{{- end -}}
{{- toYaml (dict "items" $docs) -}}
{{- end -}}

{{/* The rules of the `kind` object named `name` (any, when no name is given) in a file under files/. */}}
{{- define "topolabel.rules" -}}
{{- $args := . -}}
{{- range (fromYaml (include "topolabel.documents" .)).items -}}
{{- if and (eq .kind $args.kind) (or (not $args.name) (eq .metadata.name $args.name)) }}{{ toYaml .rules }}{{ end -}}
{{- end -}}
{{- end -}}

{{/* Fails on a cluster without ValidatingAdmissionPolicy (Kubernetes < 1.30) unless `value`.enabled is false.
  A cluster's API list names kinds (apps/v1/Deployment); `helm template`'s default list does not, and renders
  the policy. */}}
{{- define "topolabel.requireAdmissionPolicy" -}}
{{- $apis := .ctx.Capabilities.APIVersions }}
{{- if and ($apis.Has "apps/v1/Deployment") (not ($apis.Has "admissionregistration.k8s.io/v1/ValidatingAdmissionPolicy")) }}
{{- fail (printf "%s needs ValidatingAdmissionPolicy (admissionregistration.k8s.io/v1, Kubernetes >= 1.30); this cluster is %s. Set %s.enabled=false to install %s without it (%s)" .value .ctx.Capabilities.KubeVersion.Version .value .what .risk) }}
{{- end }}
{{- end -}}

{{/* The ValidatingAdmissionPolicies and their bindings in a file under files/ (a copy of a manifest), named
  for this chart (the manifests' leading "topolabel" becomes the release's name), labelled `labels` and matching
  the requests of `user` alone (each policy's first matchCondition); `variables` (name -> CEL expression)
  replaces the expressions of the policies' variables of those names. */}}
{{- define "topolabel.admissionPolicy" -}}
{{- $args := . -}}
{{- $fullname := include "topolabel.fullname" .ctx -}}
{{- range (fromYaml (include "topolabel.documents" .)).items }}
{{- $_ := set .metadata "name" (printf "%s%s" $fullname (trimPrefix "topolabel" .metadata.name)) }}
{{- $_ := set .metadata "labels" (fromYaml $args.labels) }}
{{- if eq .kind "ValidatingAdmissionPolicy" }}
{{- $_ := set (index .spec.matchConditions 0) "expression" (printf "request.userInfo.username == %q" $args.user) }}
{{- range .spec.variables }}
{{- if hasKey ($args.variables | default dict) .name }}{{ $_ := set . "expression" (index $args.variables .name) }}{{ end }}
{{- end }}
{{- else }}
{{- $_ := set .spec "policyName" (printf "%s%s" $fullname (trimPrefix "topolabel" .spec.policyName)) }}
{{- end }}
---
{{ toYaml . }}
{{- end }}
{{- end -}}
