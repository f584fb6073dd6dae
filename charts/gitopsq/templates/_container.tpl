{{/*
The controller's command line and environment. tests/chart/test_controller_start.py starts `gitopsq` with
exactly these (kubeconfig instead of the in-cluster account), so every flag here must be one the controller
accepts (gitopsq/commands/controller.py).
*/}}

{{- define "gitopsq.args" -}}
- controller
{{- with .Values.cluster }}
- --cluster={{ . }}
{{- end }}
{{- if include "gitopsq.syncOn" . }}
- --repo={{ .Values.repo.url }}
- --branch={{ .Values.repo.branch }}
- --interval={{ .Values.repo.interval }}
- --drift-interval={{ .Values.repo.driftInterval }}
- {{ ternary "--prune" "--no-prune" .Values.repo.prune }}
{{- with .Values.repo.sourceName }}
- --name={{ . }}
{{- end }}
{{- end }}
{{- if eq .Values.mode "sync" }}
- --sync-only
{{- else if eq .Values.mode "admission" }}
- --admission-only
{{- end }}
- --namespace={{ .Release.Namespace }}
{{- if include "gitopsq.admissionOn" . }}
- --integrations={{ join "," (default (list "batch/job") .Values.integrations) }}
{{- end }}
{{- if .Values.leaderElection.enabled }}
- --leader-elect
- --lease-name={{ .Values.leaderElection.leaseName }}
- --lease-duration={{ .Values.leaderElection.leaseDuration }}
- --renew-deadline={{ .Values.leaderElection.renewDeadline }}
- --retry-period={{ .Values.leaderElection.retryPeriod }}
{{- else }}
- --no-leader-elect
{{- end }}
- --health-addr=:{{ .Values.health.port }}
- --metrics-addr={{ if .Values.metrics.enabled }}:{{ .Values.metrics.port }}{{ end }}
- --http-header-timeout={{ .Values.http.headerTimeout }}
- --http-body-timeout={{ .Values.http.bodyTimeout }}
- --http-max-connections={{ .Values.http.maxConnections }}
{{- if .Values.gitWebhook.secret.name }}
- --webhook-secret-file=/etc/gitopsq/git-webhook/{{ .Values.gitWebhook.secret.key }}
{{- end }}
{{- if and .Values.audit.enabled (include "gitopsq.syncOn" .) }}
- --audit-wal-dir=/var/cache/gitopsq/audit-wal
{{- with .Values.audit.repo }}
- --audit-repo={{ . }}
{{- end }}
{{- if .Values.signing.secret.name }}
- --audit-signing-key=/etc/gitopsq/signing/{{ .Values.signing.secret.key }}
{{- end }}
{{- end }}
{{- include "gitopsq.jobWebhookArgs" . }}
- --cache-dir=/var/cache/gitopsq/repos
- --log-format={{ .Values.logFormat }}
{{- with .Values.extraArgs }}
{{ toYaml . }}
{{- end }}
{{- end }}

{{/* The Job webhook's flags (HTTPS server, certificate files; with self-generated certificates also where to
keep them and which Service and configurations they are for). */}}
{{- define "gitopsq.jobWebhookArgs" -}}
{{- if include "gitopsq.webhookOn" . }}
- --webhook-addr=:{{ .Values.webhook.port }}
- --webhook-cert-dir=/etc/gitopsq/webhook-certs
{{- if not .Values.webhook.certManager.enabled }}
- --webhook-cert-secret={{ include "gitopsq.webhookCertSecret" . }}
- --webhook-service={{ .Release.Namespace }}/{{ include "gitopsq.webhookServiceName" . }}
- --webhook-configuration={{ include "gitopsq.fullname" . }}
{{- end }}
{{- with .Values.webhook.managedNamespaces }}
- --managed-namespaces={{ join "," . }}
{{- end }}
{{- end }}
{{- end }}

{{- define "gitopsq.env" -}}
- name: HOME
  value: /var/cache/gitopsq
- name: XDG_CACHE_HOME
  value: /var/cache/gitopsq
{{- with .Values.git.username }}
- name: GITOPSQ_GIT_USERNAME
  value: {{ . | quote }}
{{- end }}
{{- if .Values.git.tokenSecret.name }}
- name: GITOPSQ_GIT_TOKEN_FILE
  value: /etc/gitopsq/git-token/{{ .Values.git.tokenSecret.key }}
{{- end }}
{{- if .Values.git.sshSecret.name }}
- name: GITOPSQ_SSH_KEY_FILE
  value: /etc/gitopsq/git-ssh/{{ .Values.git.sshSecret.privateKeyKey }}
- name: GITOPSQ_SSH_KNOWN_HOSTS
  value: /etc/gitopsq/git-ssh/{{ .Values.git.sshSecret.knownHostsKey }}
{{- end }}
{{- with .Values.extraEnv }}
{{ toYaml . }}
{{- end }}
{{- end }}

{{- define "gitopsq.volumeMounts" -}}
- name: cache
  mountPath: /var/cache/gitopsq
- name: tmp
  mountPath: /tmp
{{- if .Values.git.tokenSecret.name }}
- name: git-token
  mountPath: /etc/gitopsq/git-token
  readOnly: true
{{- end }}
{{- if .Values.git.sshSecret.name }}
- name: git-ssh
  mountPath: /etc/gitopsq/git-ssh
  readOnly: true
{{- end }}
{{- if .Values.gitWebhook.secret.name }}
- name: git-webhook
  mountPath: /etc/gitopsq/git-webhook
  readOnly: true
{{- end }}
{{- if .Values.signing.secret.name }}
- name: signing
  mountPath: /etc/gitopsq/signing
  readOnly: true
{{- end }}
{{- if include "gitopsq.webhookOn" . }}
- name: webhook-certs
  mountPath: /etc/gitopsq/webhook-certs
  {{- if .Values.webhook.certManager.enabled }}
  readOnly: true
  {{- end }}
{{- end }}
{{- end }}

{{- define "gitopsq.volumes" -}}
- name: cache
  emptyDir:
    sizeLimit: {{ .Values.cache.sizeLimit }}
- name: tmp
  emptyDir:
    medium: Memory
    sizeLimit: 64Mi
{{- with .Values.git.tokenSecret }}
{{- if .name }}
- name: git-token
  secret:
    secretName: {{ .name }}
    defaultMode: 0440
    items:
      - key: {{ .key }}
        path: {{ .key }}
{{- end }}
{{- end }}
{{- with .Values.git.sshSecret }}
{{- if .name }}
- name: git-ssh
  secret:
    secretName: {{ .name }}
    defaultMode: 0440
    items:
      - key: {{ .privateKeyKey }}
        path: {{ .privateKeyKey }}
      - key: {{ .knownHostsKey }}
        path: {{ .knownHostsKey }}
{{- end }}
{{- end }}
{{- with .Values.gitWebhook.secret }}
{{- if .name }}
- name: git-webhook
  secret:
    secretName: {{ .name }}
    defaultMode: 0440
    items:
      - key: {{ .key }}
        path: {{ .key }}
{{- end }}
{{- end }}
{{- with .Values.signing.secret }}
{{- if .name }}
- name: signing
  secret:
    secretName: {{ .name }}
    defaultMode: 0440
    items:
      - key: {{ .key }}
        path: {{ .key }}
{{- end }}
{{- end }}
{{- if include "gitopsq.webhookOn" . }}
- name: webhook-certs
  {{- if .Values.webhook.certManager.enabled }}
  secret:
    secretName: {{ include "gitopsq.webhookCertSecret" . }}
    defaultMode: 0440
  {{- else }}
  emptyDir:
    medium: Memory
    sizeLimit: 1Mi
  {{- end }}
{{- end }}
{{- end }}
