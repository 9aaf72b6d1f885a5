{{/* Names, labels and shared pieces of loadsched's objects. */}}

{{- define "loadsched.fullname" -}}
{{- if contains .Chart.Name .Release.Name -}}
{{- .Release.Name | trunc 40 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name .Chart.Name | trunc 40 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}

{{- define "loadsched.labels" -}}
app.kubernetes.io/name: {{ .Chart.Name }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version }}
{{- end -}}

{{- define "loadsched.selector" -}}
app.kubernetes.io/name: {{ .root.Chart.Name }}
app.kubernetes.io/instance: {{ .root.Release.Name }}
app.kubernetes.io/component: {{ .component }}
{{- end -}}

{{- define "loadsched.image" -}}
{{- printf "%s:%s" .Values.image.repository (default .Chart.AppVersion .Values.image.tag) -}}
{{- end -}}

{{- define "loadsched.extenderScheme" -}}
{{- if .Values.extender.tls.enabled -}}https{{- else -}}http{{- end -}}
{{- end -}}

{{- define "loadsched.extenderURL" -}}
{{- if .Values.scheduler.extenderURL -}}
{{- .Values.scheduler.extenderURL -}}
{{- else -}}
{{- printf "%s://%s-extender.%s.svc:%d" (include "loadsched.extenderScheme" .) (include "loadsched.fullname" .) .Release.Namespace (int .Values.extender.service.port) -}}
{{- end -}}
{{- end -}}

{{- define "loadsched.tlsSecret" -}}
{{- default (printf "%s-extender-tls" (include "loadsched.fullname" .)) .Values.extender.tls.secretName -}}
{{- end -}}

{{/* Pod-level settings both services share: security context and the policy volume. */}}
{{- define "loadsched.podCommon" -}}
serviceAccountName: {{ include "loadsched.fullname" .root }}-{{ .component }}
automountServiceAccountToken: true
securityContext:
  {{- toYaml .root.Values.podSecurityContext | nindent 2 }}
{{- with .root.Values.imagePullSecrets }}
imagePullSecrets:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- with .values.nodeSelector }}
nodeSelector:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- with .values.tolerations }}
tolerations:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- with .values.affinity }}
affinity:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- end -}}

{{/* The KubeSchedulerConfiguration of the optional second scheduler. */}}
{{- define "loadsched.schedulerConfig" -}}
apiVersion: kubescheduler.config.k8s.io/v1
kind: KubeSchedulerConfiguration
leaderElection:
  leaderElect: true
  resourceLock: leases
  resourceName: {{ .Values.scheduler.leaseName }}
  resourceNamespace: {{ .Release.Namespace }}
percentageOfNodesToScore: {{ .Values.scheduler.percentageOfNodesToScore }}
profiles:
  - schedulerName: {{ .Values.scheduler.schedulerName }}
extenders:
  - urlPrefix: {{ include "loadsched.extenderURL" . }}
    filterVerb: filter
    prioritizeVerb: prioritize
    preemptVerb: preempt
    weight: {{ .Values.scheduler.weight }}
    nodeCacheCapable: true
    ignorable: true
    httpTimeout: {{ .Values.scheduler.httpTimeout }}
    enableHTTPS: {{ .Values.extender.tls.enabled }}
    {{- if .Values.extender.tls.enabled }}
    tlsConfig:
      caFile: /etc/kubernetes/extender-tls/ca.crt
    {{- end }}
{{- end -}}
