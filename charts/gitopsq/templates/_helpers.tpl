{{/* Names and labels shared by every template. */}}

{{- define "gitopsq.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" }}
{{- end }}

{{- define "gitopsq.fullname" -}}
{{- if .Values.fullnameOverride }}
{{- .Values.fullnameOverride | trunc 63 | trimSuffix "-" }}
{{- else if contains (include "gitopsq.name" .) .Release.Name }}
{{- .Release.Name | trunc 63 | trimSuffix "-" }}
{{- else }}
{{- printf "%s-%s" .Release.Name (include "gitopsq.name" .) | trunc 63 | trimSuffix "-" }}
{{- end }}
{{- end }}

{{- define "gitopsq.selectorLabels" -}}
app.kubernetes.io/name: {{ include "gitopsq.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end }}

{{- define "gitopsq.labels" -}}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" }}
{{ include "gitopsq.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/part-of: gitopsq
{{- end }}

{{- define "gitopsq.serviceAccountName" -}}
{{- if .Values.serviceAccount.create }}
{{- default (include "gitopsq.fullname" .) .Values.serviceAccount.name }}
{{- else }}
{{- required "serviceAccount.name is required when serviceAccount.create is false" .Values.serviceAccount.name }}
{{- end }}
{{- end }}

{{- define "gitopsq.image" -}}
{{- if .Values.image.digest }}
{{- printf "%s@%s" .Values.image.repository .Values.image.digest }}
{{- else }}
{{- printf "%s:%s" .Values.image.repository (default .Chart.AppVersion .Values.image.tag) }}
{{- end }}
{{- end }}

{{- define "gitopsq.webhookServiceName" -}}
{{- printf "%s-webhook" (include "gitopsq.fullname" .) | trunc 63 | trimSuffix "-" }}
{{- end }}

{{- define "gitopsq.metricsServiceName" -}}
{{- printf "%s-metrics" (include "gitopsq.fullname" .) | trunc 63 | trimSuffix "-" }}
{{- end }}

{{- define "gitopsq.webhookCertSecret" -}}
{{- default (printf "%s-webhook-cert" (include "gitopsq.fullname" .)) .Values.webhook.certSecretName }}
{{- end }}

{{/* The Job webhook runs only where the admission loop runs. */}}
{{- define "gitopsq.webhookOn" -}}
{{- if and .Values.webhook.enabled (ne .Values.mode "sync") }}true{{ end }}
{{- end }}

{{- define "gitopsq.syncOn" -}}
{{- if ne .Values.mode "admission" }}true{{ end }}
{{- end }}

{{- define "gitopsq.admissionOn" -}}
{{- if ne .Values.mode "sync" }}true{{ end }}
{{- end }}

{{- define "gitopsq.webhookClient" -}}
service:
  namespace: {{ .root.Release.Namespace }}
  name: {{ include "gitopsq.webhookServiceName" .root }}
  port: 443
  path: {{ .path }}
{{- end }}
