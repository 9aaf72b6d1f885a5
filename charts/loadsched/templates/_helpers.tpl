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
    {{- if .Values.extender.bind }}
    bindVerb: bind
    {{- end }}
    weight: {{ .Values.scheduler.weight }}
    nodeCacheCapable: true
    ignorable: true
    httpTimeout: {{ .Values.scheduler.httpTimeout }}
    enableHTTPS: {{ .Values.extender.tls.enabled }}
    {{- if .Values.extender.tls.enabled }}
    tlsConfig:
      caFile: /etc/kubernetes/extender-tls/ca.crt
      {{- if .Values.extender.tls.clientAuth.enabled }}
      certFile: /etc/kubernetes/extender-client/tls.crt
      keyFile: /etc/kubernetes/extender-client/tls.key
      {{- end }}
    {{- end }}
{{- end -}}

{{/* Dispatch runs in its own Deployment (the default) or inside the extender. */}}
{{- define "loadsched.dispatchSeparate" -}}
{{- if and .Values.dispatch.enabled .Values.dispatch.separate -}}true{{- end -}}
{{- end -}}

{{- define "loadsched.dispatchInExtender" -}}
{{- if and .Values.dispatch.enabled (not .Values.dispatch.separate) -}}true{{- end -}}
{{- end -}}

{{/* The dispatch room's flags, mounts and volumes, wherever it runs. */}}
{{- define "loadsched.dispatchArgs" -}}
- --job-templates=/etc/loadsched/dispatch/templates.yaml
- --dispatch-auth={{ .Values.dispatch.auth }}
{{- if eq .Values.dispatch.auth "static" }}
- --dispatch-tokens-file=/etc/loadsched/tokens/tokens
{{- end }}
{{- end -}}

{{- define "loadsched.dispatchMounts" -}}
- {name: job-templates, mountPath: /etc/loadsched/dispatch, readOnly: true}
{{- if eq .Values.dispatch.auth "static" }}
- {name: tokens, mountPath: /etc/loadsched/tokens, readOnly: true}
{{- end }}
{{- end -}}

{{- define "loadsched.dispatchVolumes" -}}
- name: job-templates
  configMap:
    name: {{ include "loadsched.fullname" . }}-job-templates
{{- if eq .Values.dispatch.auth "static" }}
- name: tokens
  secret:
    secretName: {{ required "dispatch.staticTokensSecret is required with dispatch.auth static" .Values.dispatch.staticTokensSecret }}
{{- end }}
{{- end -}}

{{/* HTTPS for a loadsched endpoint (the extender's, and dispatch's when separate). */}}
{{- define "loadsched.tlsArgs" -}}
{{- if .Values.extender.tls.enabled }}
- --tls-cert-file=/etc/loadsched/tls/tls.crt
- --tls-key-file=/etc/loadsched/tls/tls.key
{{- if .Values.extender.tls.clientAuth.enabled }}
- --tls-client-ca-file=/etc/loadsched/tls/ca.crt
{{- end }}
{{- end }}
{{- end -}}

{{/* What dispatch reads and writes: pods (what nodes hold, its Jobs' pods), its Jobs and
CronJobs, its admission records (a ConfigMap per template with limits or keyRetentionSeconds,
in the template's namespace), and token and access reviews for its callers. Nodes come with
every extender. */}}
{{- define "loadsched.dispatchRules" -}}
- apiGroups: [""]
  resources: [pods]
  verbs: [list, watch]
- apiGroups: [""]
  resources: [configmaps]
  verbs: [get, create, update]
- apiGroups: [batch]
  resources: [jobs, cronjobs]
  verbs: [get, list, watch, create, patch, delete]
- apiGroups: [authentication.k8s.io]
  resources: [tokenreviews]
  verbs: [create]
- apiGroups: [authorization.k8s.io]
  resources: [subjectaccessreviews]
  verbs: [create]
{{- end -}}
