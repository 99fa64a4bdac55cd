{{/* The image of every burstcache container. */}}
{{- define "burstcache.image" -}}
{{ .Values.image.repository }}:{{ .Values.image.tag | default .Chart.AppVersion }}
{{- end }}

{{/* Labels Helm adds to every object, beside those of config/. */}}
{{- define "burstcache.labels" -}}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Values.image.tag | default .Chart.AppVersion | quote }}
{{- end }}

{{/* imagePullSecrets of a pod spec, if any. */}}
{{- define "burstcache.imagePullSecrets" -}}
{{- with .Values.imagePullSecrets }}
imagePullSecrets:
{{- toYaml . | nindent 2 }}
{{- end }}
{{- end }}

{{/* The names of imagePullSecrets, comma-separated, for the pods the manager and the node plugin create. */}}
{{- define "burstcache.imagePullSecretNames" -}}
{{- $names := list }}
{{- range .Values.imagePullSecrets }}
{{- $names = append $names .name }}
{{- end }}
{{- join "," $names }}
{{- end }}

{{/* nodeSelector, tolerations and affinity of a pod spec, from a values section. */}}
{{- define "burstcache.scheduling" -}}
{{- with .nodeSelector }}
nodeSelector:
{{- toYaml . | nindent 2 }}
{{- end }}
{{- with .tolerations }}
tolerations:
{{- toYaml . | nindent 2 }}
{{- end }}
{{- with .affinity }}
affinity:
{{- toYaml . | nindent 2 }}
{{- end }}
{{- end }}

{{/* Annotations of the webhook configurations: cert-manager's caBundle injection, if enabled. */}}
{{- define "burstcache.webhookAnnotations" -}}
{{- if .Values.certManager.enabled }}
annotations:
  cert-manager.io/inject-ca-from: {{ .Release.Namespace }}/burstcache-serving-cert
{{- end }}
{{- end }}
