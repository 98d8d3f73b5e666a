{{/* The base of every object's name: fullnameOverride, else "topolabel" (the names of manifests/). */}}
{{- define "topolabel.fullname" -}}
{{- .Values.fullnameOverride | default "topolabel" | trunc 50 | trimSuffix "-" -}}
{{- end -}}

{{- define "topolabel.agentName" -}}
{{- printf "%s-agent" (include "topolabel.fullname" .) -}}
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

{{- define "topolabel.image" -}}
{{- printf "%s:%s" .Values.image.repository (.Values.image.tag | default .Chart.AppVersion) -}}
{{- end -}}

{{- define "topolabel.imagePullPolicy" -}}
{{- with .Values.image.pullPolicy }}
imagePullPolicy: {{ . }}
{{- end }}
{{- end -}}

{{/* The documents of a file under files/ (links to manifests/, so the chart and kustomize share them). */}}
{{- define "topolabel.documents" -}}
{{- $docs := list -}}
{{- range regexSplit "(?m)^---\\s*$" (.ctx.Files.Get .file) -1 -}}
{{- $doc := fromYaml . -}}
{{- if $doc }}{{ $docs = append $docs $doc }}{{ end -}}
{{- end -}}
{{- toYaml (dict "items" $docs) -}}
{{- end -}}

{{/* The rules of the one ClusterRole in a file under files/. */}}
{{- define "topolabel.clusterRoleRules" -}}
{{- range (fromYaml (include "topolabel.documents" .)).items -}}
{{- if eq .kind "ClusterRole" }}{{ toYaml .rules }}{{ end -}}
{{- end -}}
{{- end -}}
