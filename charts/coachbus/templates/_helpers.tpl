{{/* Chart name, truncated to 63 chars: Kubernetes names are DNS labels. */}}
{{- define "coachbus.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/*
Fully qualified app name (helm create style). Truncated at 63 chars because some
Kubernetes name fields are limited to that (DNS-1123 labels).
*/}}
{{- define "coachbus.fullname" -}}
{{- if .Values.fullnameOverride }}
{{- .Values.fullnameOverride | trunc 63 | trimSuffix "-" }}
{{- else }}
{{- $name := default .Chart.Name .Values.nameOverride }}
{{- if contains $name .Release.Name }}
{{- .Release.Name | trunc 63 | trimSuffix "-" }}
{{- else }}
{{- printf "%s-%s" .Release.Name $name | trunc 63 | trimSuffix "-" }}
{{- end }}
{{- end }}
{{- end }}

{{/* Name of one component's resources: (list $ "shadow"). */}}
{{- define "coachbus.componentName" -}}
{{- $root := index . 0 }}
{{- printf "%s-%s" (include "coachbus.fullname" $root) (index . 1) | trunc 63 | trimSuffix "-" }}
{{- end }}

{{- define "coachbus.chart" -}}
{{- printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
{{- end }}

{{- define "coachbus.selectorLabels" -}}
app.kubernetes.io/name: {{ include "coachbus.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end }}

{{- define "coachbus.labels" -}}
helm.sh/chart: {{ include "coachbus.chart" . }}
{{ include "coachbus.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/part-of: coachbus
{{- end }}

{{/* Labels of one component: (list $ "shadow"). */}}
{{- define "coachbus.componentLabels" -}}
{{ include "coachbus.labels" (index . 0) }}
app.kubernetes.io/component: {{ index . 1 }}
{{- end }}

{{- define "coachbus.componentSelectorLabels" -}}
{{ include "coachbus.selectorLabels" (index . 0) }}
app.kubernetes.io/component: {{ index . 1 }}
{{- end }}

{{- define "coachbus.serviceAccountName" -}}
{{- if .Values.serviceAccount.create }}
{{- default (include "coachbus.fullname" .) .Values.serviceAccount.name }}
{{- else }}
{{- default "default" .Values.serviceAccount.name }}
{{- end }}
{{- end }}

{{- define "coachbus.image" -}}
{{- printf "%s:%s" .Values.image.repository (default .Chart.AppVersion .Values.image.tag) }}
{{- end }}

{{/* The Secret every service reads its secrets from. */}}
{{- define "coachbus.secretName" -}}
{{- default (include "coachbus.fullname" .) .Values.secret.existingSecret }}
{{- end }}

{{/*
What a service is: gateway, synth or agent, from its key unless `kind` says
otherwise. (list $name $svc)
*/}}
{{- define "coachbus.kind" -}}
{{- $name := index . 0 }}{{- $svc := index . 1 }}
{{- if $svc.kind }}{{ $svc.kind }}
{{- else if eq $name "gateway" }}gateway
{{- else if eq $name "synth" }}synth
{{- else }}agent
{{- end }}
{{- end }}

{{/* The consumer group whose lag scales a service: (list $ $name $svc). */}}
{{- define "coachbus.consumerGroup" -}}
{{- $root := index . 0 }}{{- $name := index . 1 }}{{- $svc := index . 2 }}
{{- default (printf "%s%s" $root.Values.config.topicPrefix $name) $svc.consumerGroup }}
{{- end }}

{{/*
Topics whose lag scales a service, as JSON: an agent consumes the user messages,
Synth the five agent topics. (list $ $name $svc)
*/}}
{{- define "coachbus.lagTopics" -}}
{{- $root := index . 0 }}{{- $name := index . 1 }}{{- $svc := index . 2 }}
{{- $prefix := $root.Values.config.topicPrefix }}
{{- $kind := include "coachbus.kind" (list $name $svc) }}
{{- $topics := list }}
{{- if $svc.lagTopics }}
{{- $topics = $svc.lagTopics }}
{{- else if eq $kind "agent" }}
{{- $topics = list (printf "%suser-messages" $prefix) }}
{{- else if eq $kind "synth" }}
{{- range $agent := list "shadow" "persona" "plasticity" "stability" "coach" }}
{{- $topics = append $topics (printf "%sagent.%s" $prefix $agent) }}
{{- end }}
{{- end }}
{{- toJson $topics }}
{{- end }}

{{/*
A service's effective autoscaling, as JSON: the global `autoscaling` with the
service's own keys on top. Not sprig's mergeOverwrite: it skips zero values, so a
service's `enabled: false` could never switch off a global `enabled: true`.
(list $ $svc)
*/}}
{{- define "coachbus.autoscaling" -}}
{{- $g := (index . 0).Values.autoscaling }}
{{- $o := default dict (index . 1).autoscaling }}
{{- $r := dict }}
{{- range $key := list "enabled" "type" "minReplicas" "maxReplicas" }}
{{- $_ := set $r $key (ternary (get $o $key) (get $g $key) (hasKey $o $key)) }}
{{- end }}
{{- toJson $r }}
{{- end }}

{{/* KEDA's name for the SASL mechanism. */}}
{{- define "coachbus.kedaSasl" -}}
{{- $m := .Values.kafka.saslMechanism }}
{{- if not (hasPrefix "SASL_" .Values.kafka.securityProtocol) }}none
{{- else if eq $m "PLAIN" }}plaintext
{{- else if eq $m "SCRAM-SHA-256" }}scram_sha256
{{- else if eq $m "SCRAM-SHA-512" }}scram_sha512
{{- else }}{{ fail "kafka.saslMechanism must be PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512 with a SASL_* securityProtocol" }}
{{- end }}
{{- end }}

{{- define "coachbus.kafkaTls" -}}
{{- if has .Values.kafka.securityProtocol (list "SSL" "SASL_SSL") }}true{{ end }}
{{- end }}

{{/* Pod-level probes on /healthz, served on the same port as /metrics. */}}
{{- define "coachbus.probes" -}}
startupProbe:
  httpGet: {path: /healthz, port: http}
  periodSeconds: 5
  failureThreshold: {{ .Values.probes.startupFailureThreshold }}
livenessProbe:
  httpGet: {path: /healthz, port: http}
  periodSeconds: {{ .Values.probes.periodSeconds }}
  timeoutSeconds: 3
  failureThreshold: 3
readinessProbe:
  httpGet: {path: /healthz, port: http}
  periodSeconds: 5
  timeoutSeconds: 3
  failureThreshold: 2
{{- end }}

{{/* envFrom shared by every coachbus container (services and the topic job). */}}
{{- define "coachbus.envFrom" -}}
- configMapRef:
    name: {{ include "coachbus.fullname" . }}
- secretRef:
    name: {{ include "coachbus.secretName" . }}
{{- end }}

{{/* With SASL and kafka.perServiceUsers: the Kafka user of one principal (list $ name),
its password from the Secret's KAFKA_PASSWORD_<NAME> (see shared/coachbus/acl.py).
env entries override the envFrom Secret's shared KAFKA_SASL_USERNAME/PASSWORD. */}}
{{- define "coachbus.kafkaUserEnv" -}}
{{- $ := index . 0 }}
{{- $name := index . 1 }}
{{- if and (hasPrefix "SASL_" $.Values.kafka.securityProtocol) $.Values.kafka.perServiceUsers }}
- name: KAFKA_SASL_USERNAME
  value: {{ printf "coachbus-%s" $name | quote }}
- name: KAFKA_SASL_PASSWORD
  valueFrom:
    secretKeyRef:
      name: {{ include "coachbus.secretName" $ }}
      key: {{ printf "KAFKA_PASSWORD_%s" (upper $name) }}
{{- end }}
{{- end }}

{{/*
The gateway serves /metrics and the API docs on a second, internal port
(COACHBUS_GATEWAY_INTERNAL_PORT); its 8080 is public and answers 404 for them.
*/}}
{{- define "coachbus.gatewayInternalPort" -}}9000{{- end }}

{{/* Name of the container port a service's /metrics is on: (list $name $svc). */}}
{{- define "coachbus.metricsPortName" -}}
{{- if eq (include "coachbus.kind" .) "gateway" }}internal{{ else }}http{{ end }}
{{- end }}

{{/* Number of that port: (list $name $svc). */}}
{{- define "coachbus.metricsPort" -}}
{{- if eq (include "coachbus.kind" .) "gateway" }}{{ include "coachbus.gatewayInternalPort" . }}{{ else }}8080{{ end }}
{{- end }}

{{/*
A number as an env value. Helm reads every number in values as a float64, which
prints as 1e+06 from a million on: whole numbers are printed as integers.
*/}}
{{- define "coachbus.number" -}}
{{- if eq (float64 .) (float64 (int64 .)) }}{{ int64 . }}{{ else }}{{ . }}{{ end }}
{{- end }}

{{/*
The human tier's settings, the gateway's alone (services/gateway/review_settings.py):
env entries, not the ConfigMap every service reads. The webhook's signing secret
comes from review.webhook.existingSecret, or the services' Secret, by secretKeyRef:
a missing key stops the pod instead of letting the gateway sign nothing.
*/}}
{{- define "coachbus.reviewEnv" -}}
{{- $r := .Values.review }}
- name: COACHBUS_REVIEW_CONSOLE
  value: {{ $r.console | quote }}
- name: COACHBUS_REVIEW_CLAIM_TTL_S
  value: {{ include "coachbus.number" $r.claimTtlSeconds | quote }}
# Exported as coachbus_review_wait_limit_seconds: CoachbusReviewWaiting's limit.
- name: COACHBUS_REVIEW_ALERT_AFTER_S
  value: {{ include "coachbus.number" $r.alertAfterSeconds | quote }}
- name: COACHBUS_REVIEW_STREAM_HOLD_S
  value: {{ include "coachbus.number" $r.streamHoldSeconds | quote }}
{{- with $r.webhook }}
{{- if .url }}
- name: COACHBUS_REVIEW_WEBHOOK_URL
  value: {{ .url | quote }}
- name: COACHBUS_REVIEW_WEBHOOK_SECRET
  valueFrom:
    secretKeyRef:
      name: {{ default (include "coachbus.secretName" $) .existingSecret }}
      key: {{ .secretKey }}
- name: COACHBUS_REVIEW_WEBHOOK_ATTEMPTS
  value: {{ include "coachbus.number" .attempts | quote }}
- name: COACHBUS_REVIEW_WEBHOOK_TIMEOUT_S
  value: {{ include "coachbus.number" .timeoutSeconds | quote }}
- name: COACHBUS_REVIEW_WEBHOOK_BACKOFF_S
  value: {{ include "coachbus.number" .backoffSeconds | quote }}
{{- end }}
{{- end }}
{{- end }}
