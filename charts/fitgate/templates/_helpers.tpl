{{/* Names and labels shared by every template (cert-manager's _helpers.tpl pattern). */}}
{{- define "fitgate.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{- define "fitgate.fullname" -}}
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

{{/* A component's name: the full name truncated before the suffix, so that the suffix survives and the
name stays within 63 characters. Usage: include "fitgate.component" (list . "-webhook") */}}
{{- define "fitgate.component" -}}
{{- $root := index . 0 -}}
{{- $suffix := index . 1 -}}
{{- $base := include "fitgate.fullname" $root | trunc (int (sub 63 (len $suffix))) | trimSuffix "-" -}}
{{- printf "%s%s" $base $suffix -}}
{{- end -}}

{{- define "fitgate.labels" -}}
app.kubernetes.io/name: {{ include "fitgate.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version }}
{{- end -}}

{{- define "fitgate.selectorLabels" -}}
app.kubernetes.io/name: {{ include "fitgate.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end -}}

{{- define "fitgate.serviceAccountName" -}}
{{- if .Values.serviceAccount.create -}}
{{- default (include "fitgate.fullname" .) .Values.serviceAccount.name -}}
{{- else -}}
{{- default "default" .Values.serviceAccount.name -}}
{{- end -}}
{{- end -}}

{{- define "fitgate.webhookService" -}}
{{- include "fitgate.component" (list . "-webhook") -}}
{{- end -}}

{{- define "fitgate.webhookSecret" -}}
{{- include "fitgate.component" (list . "-webhook-tls") -}}
{{- end -}}

{{/* Contradictory values fail the render with a message saying what to change. */}}
{{- define "fitgate.validate" -}}
{{- if and (gt (int .Values.replicaCount) 1) (not .Values.operator.peering.enabled) -}}
{{- fail "replicaCount > 1 needs operator.peering.enabled=true (otherwise every replica reconciles and they fight over status)" -}}
{{- end -}}
{{- if and .Values.webhook.certManager.enabled .Values.webhook.caBundle -}}
{{- fail "webhook.caBundle is for url mode with your own certificate; with webhook.certManager.enabled cert-manager injects the CA" -}}
{{- end -}}
{{- if and .Values.webhook.url (not (hasPrefix "https://" .Values.webhook.url)) -}}
{{- fail "webhook.url must start with https:// (the API server only calls webhooks over TLS)" -}}
{{- end -}}
{{- if and .Values.webhook.certManager.enabled .Values.webhook.url -}}
{{- fail "webhook.url (an operator outside the cluster) cannot use a cert-manager certificate mounted into the pod: set webhook.caBundle or use the chart-generated certificate" -}}
{{- end -}}
{{- if and .Values.workloadWebhook.observe (not (and .Values.workloadWebhook.enabled (gt (int .Values.workloadWebhook.auditSeconds) 0))) -}}
{{- fail "workloadWebhook.observe reads the pods of the workloads the audit finds: it needs workloadWebhook.enabled=true and workloadWebhook.auditSeconds > 0" -}}
{{- end -}}
{{- end -}}

{{/*
operator.prices ({H100: 2.5, L4: 0.7}) as FITGATE_GPU_HOUR_PRICES reads it: H100=2.5,L4=0.7 (sorted by GPU).
*/}}
{{- define "fitgate.prices" -}}
{{- $items := list }}
{{- range $gpu, $usd := . }}
{{- $items = append $items (printf "%s=%v" $gpu $usd) }}
{{- end }}
{{- join "," $items }}
{{- end }}
