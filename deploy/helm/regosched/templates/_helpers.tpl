{{/* The chart name, "regosched" unless nameOverride. */}}
{{- define "regosched.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{/*
The base of every object name: the release name when it contains the chart
name (release "regosched" gives "regosched", as deploy/), else
<release>-<name>. The longest suffix added is "-scheduler-client-tls".
*/}}
{{- define "regosched.fullname" -}}
{{- if .Values.fullnameOverride -}}
{{- .Values.fullnameOverride | trunc 42 | trimSuffix "-" -}}
{{- else -}}
{{- $name := include "regosched.name" . -}}
{{- if contains $name .Release.Name -}}
{{- .Release.Name | trunc 42 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name $name | trunc 42 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}
{{- end -}}

{{- define "regosched.chart" -}}
{{- printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{/* Labels of every object; call with (dict "ctx" $ "component" "extender"). */}}
{{- define "regosched.labels" -}}
{{ include "regosched.selectorLabels" . }}
app.kubernetes.io/part-of: regosched
app.kubernetes.io/managed-by: {{ .ctx.Release.Service }}
app.kubernetes.io/version: {{ .ctx.Chart.AppVersion | quote }}
helm.sh/chart: {{ include "regosched.chart" .ctx }}
{{- end -}}

{{/* Labels that select a component's pods. */}}
{{- define "regosched.selectorLabels" -}}
app.kubernetes.io/name: {{ include "regosched.name" .ctx }}
app.kubernetes.io/instance: {{ .ctx.Release.Name }}
{{- if .component }}
app.kubernetes.io/component: {{ .component }}
{{- end }}
{{- end -}}

{{/* Labels of a component's pods: selector labels plus part-of. */}}
{{- define "regosched.podLabels" -}}
{{ include "regosched.selectorLabels" . }}
app.kubernetes.io/part-of: regosched
{{- end -}}

{{- define "regosched.schedulerFullname" -}}
{{- include "regosched.fullname" . }}-scheduler
{{- end -}}

{{/* Mutual TLS is on with tls.enabled or tls.certManager.enabled. */}}
{{- define "regosched.tls" -}}
{{- if or .Values.tls.enabled .Values.tls.certManager.enabled }}true{{ end -}}
{{- end -}}

{{- define "regosched.serverSecretName" -}}
{{- .Values.tls.serverSecretName | default (printf "%s-tls" (include "regosched.fullname" .)) -}}
{{- end -}}

{{/*
regosched rolls the scheduler when its client certificate Secret changes
(serve --scheduler-client-secret, --scheduler-deployment): with tls, unless
tls.rollSchedulerOnRenewal is off.
*/}}
{{- define "regosched.certRoll" -}}
{{- if and (include "regosched.tls" .) .Values.tls.rollSchedulerOnRenewal (not (include "regosched.plugin" .)) }}true{{ end -}}
{{- end -}}

{{- define "regosched.clientSecretName" -}}
{{- .Values.tls.clientSecretName | default (printf "%s-scheduler-client-tls" (include "regosched.fullname" .)) -}}
{{- end -}}

{{/* --leader-elect with more than one extender replica. */}}
{{- define "regosched.leaderElect" -}}
{{- if gt (int .Values.replicas) 1 }}true{{ end -}}
{{- end -}}

{{/* The second scheduler's replicas: scheduler.replicas, else replicas. */}}
{{- define "regosched.schedulerReplicas" -}}
{{- if kindIs "string" .Values.scheduler.replicas -}}
{{- int .Values.replicas -}}
{{- else -}}
{{- int .Values.scheduler.replicas -}}
{{- end -}}
{{- end -}}

{{/*
A component's affinity: the value given, else with more than one replica a
preferred anti-affinity on the node, so that one node's death leaves a
replica; preferred, so that a one-node cluster runs them all the same.
Call with (dict "ctx" $ "component" "scheduler" "replicas" 2 "affinity" {}).
*/}}
{{- define "regosched.affinity" -}}
{{- if .affinity -}}
{{- toYaml .affinity -}}
{{- else if gt (int .replicas) 1 -}}
podAntiAffinity:
  preferredDuringSchedulingIgnoredDuringExecution:
    - weight: 100
      podAffinityTerm:
        topologyKey: kubernetes.io/hostname
        labelSelector:
          matchLabels:
            {{- include "regosched.selectorLabels" . | nindent 12 }}
{{- end -}}
{{- end -}}

{{- define "regosched.image" -}}
{{- if .Values.image.digest -}}
{{ .Values.image.repository }}@{{ .Values.image.digest }}
{{- else -}}
{{ .Values.image.repository }}:{{ .Values.image.tag | default .Chart.AppVersion }}
{{- end -}}
{{- end -}}

{{/*
The scheduler's image tag: scheduler.image.tag, else the cluster's version
without a +build suffix and without a pre-release suffix other than
alpha/beta/rc (v1.36.1+k3s1 and v1.36.1-eks-f5a2e6b give v1.36.1), which
is how registry.k8s.io tags kube-scheduler.
*/}}
{{- define "regosched.schedulerTag" -}}
{{- if .Values.scheduler.image.tag -}}
{{- .Values.scheduler.image.tag -}}
{{- else -}}
{{- $v := .Capabilities.KubeVersion.Version | splitList "+" | first -}}
{{- regexReplaceAll "^v?([0-9]+\\.[0-9]+\\.[0-9]+(-(alpha|beta|rc)\\.[0-9]+)?).*$" $v "v${1}" -}}
{{- end -}}
{{- end -}}

{{/* The Service's address, as the scheduler's urlPrefix names it. */}}
{{- define "regosched.serviceHost" -}}
{{ include "regosched.fullname" . }}.{{ .Release.Namespace }}.svc
{{- end -}}

{{/*
The KubeSchedulerConfiguration of the second scheduler: the content of
deploy/scheduler/kube-scheduler-config.yaml, or with tls that of
deploy/tls/mtls/kube-scheduler-config.yaml, or with mode plugin
regosched.pluginSchedulerConfig (test/deploytest compares them).
clientConnection is left out: the scheduler uses its ServiceAccount.
*/}}
{{- define "regosched.schedulerConfig" -}}
{{- if include "regosched.plugin" . -}}
{{ include "regosched.pluginSchedulerConfig" . }}
{{- else -}}
apiVersion: kubescheduler.config.k8s.io/v1
kind: KubeSchedulerConfiguration
leaderElection:
  leaderElect: true
  # Own lease, so it never competes with the default scheduler's
  # kube-system/kube-scheduler lease.
  resourceNamespace: {{ .Release.Namespace }}
  resourceName: {{ include "regosched.schedulerFullname" . }}
profiles:
  # Only pods with spec.schedulerName: {{ .Values.schedulerName }} are placed by this
  # scheduler; everything else stays with the default scheduler.
  - schedulerName: {{ .Values.schedulerName }}
extenders:
{{- if include "regosched.tls" . }}
  - urlPrefix: https://{{ include "regosched.serviceHost" . }}:8888/scheduler
    enableHTTPS: true
    tlsConfig:
      # Secret {{ include "regosched.clientSecretName" . }}. ca.crt verifies the
      # extender's serving certificate (DNS name {{ include "regosched.serviceHost" . }});
      # tls.crt/tls.key are the client pair the extender's --client-ca-file
      # must accept. Never set insecure: true, which skips the verification
      # of the extender.
      caFile: /etc/kubernetes/regosched-tls/ca.crt
      certFile: /etc/kubernetes/regosched-tls/tls.crt
      keyFile: /etc/kubernetes/regosched-tls/tls.key
{{- else }}
  - urlPrefix: http://{{ include "regosched.serviceHost" . }}:8888/scheduler
{{- end }}
    filterVerb: filter
{{- if eq .Values.softRules "prioritize" }}
    prioritizeVerb: prioritize
    weight: {{ int .Values.scheduler.extender.weight }}
{{- else }}
    # No prioritizeVerb: regosched runs with --soft-rules=filter, where
    # filter keeps only the candidates of the lowest soft-rule penalty, so
    # a prioritize call would have nothing left to prefer (one HTTP round
    # trip less per pod; see docs/policies.md).
{{- end }}
    # regosched evicts only what resolves its conflicts, never a pod its
    # policy protects (e.g. a Redis master).
    preemptVerb: preempt
    # regosched binds after a commit-time check against every placement it
    # has accepted, so a burst of pods never breaks a rule even before any
    # informer has seen the previous binding.
    bindVerb: bind
    # The extender keeps its own node cache (informers), so only node names
    # cross the wire, not whole Node objects.
    nodeCacheCapable: true
    {{- if .Values.scheduler.extender.ignorable }}
    # Fail open (scheduler.extender.ignorable): while the extender does not
    # answer, pods are placed without its rules (two Redis masters may land
    # on one node) until the audit and the repair catch up.
    ignorable: true
    {{- else }}
    # Fail closed: if the extender is unreachable the pod stays Pending;
    # a pod is never placed without the rules (scheduler.extender.ignorable).
    ignorable: false
    {{- end }}
    httpTimeout: {{ .Values.scheduler.extender.httpTimeout }}
{{- end }}
{{- end -}}

{{/* mode plugin: regosched-scheduler decides in process; Deployment
<release> is a companion that answers no scheduler verbs. */}}
{{- define "regosched.plugin" -}}
{{- if eq .Values.mode "plugin" }}true{{ end -}}
{{- end -}}

{{- define "regosched.pluginSchedulerImage" -}}
{{- $i := .Values.regoschedScheduler.image -}}
{{- if $i.digest -}}
{{ $i.repository }}@{{ $i.digest }}
{{- else -}}
{{ $i.repository }}:{{ $i.tag | default .Chart.AppVersion }}
{{- end -}}
{{- end -}}

{{/*
The plugin's args that the chart sets from other values (the companion's
serve flags come from the same ones), and those values' names; the rest
come from plugin.args.
*/}}
{{- define "regosched.derivedPluginArgs" -}}
policy: policy.url
shadowPolicy: policy.shadowUrl
policyData: policyData
policyBearerTokenFile: policy.bearerToken
policyInsecure: policy.insecure
policyVerificationKey: policy.verificationKey
policyVerificationKeyID: policy.verificationKey.keyId
policySigningAlg: policy.verificationKey.signingAlg
policyScope: policy.verificationKey.scope
logLevel: logLevel
{{- end -}}

{{/*
The KubeSchedulerConfiguration of regosched-scheduler (mode plugin): the
content of deploy/plugin/kube-scheduler-config.yaml, with the Regosched
plugin's args from the values that give the companion its serve flags:
each arg is a serve flag of the same name (policy: --policy,
policyVerificationKeyID: --policy-verification-key-id...), and the files
they name are mounted into the scheduler's pod at the companion's paths.
Only args that are set are written.
*/}}
{{- define "regosched.pluginSchedulerConfig" -}}
{{- $key := include "regosched.verificationKey" . -}}
apiVersion: kubescheduler.config.k8s.io/v1
kind: KubeSchedulerConfiguration
leaderElection:
  leaderElect: true
  # Own lease, so it never competes with the default scheduler's
  # kube-system/kube-scheduler lease.
  resourceNamespace: {{ .Release.Namespace }}
  resourceName: {{ include "regosched.schedulerFullname" . }}
profiles:
  # Only pods with spec.schedulerName: {{ .Values.schedulerName }} are placed by this
  # scheduler; everything else stays with the default scheduler.
  - schedulerName: {{ .Values.schedulerName }}
    plugins:
      multiPoint:
        enabled:
          # regosched's rules at PreFilter/Filter (hard rules, seen by
          # default preemption's dry run), Score (soft rules) and Reserve,
          # and default preemption at PostFilter, never evicting a pod the
          # policy protects. The weight applies to Score: the soft rules'
          # share of the node ranking, as the extender's weight.
          - name: Regosched
            weight: {{ int .Values.plugin.weight }}
        disabled:
          # The stock one would evict protected pods: Regosched's PostFilter
          # runs default preemption in its place.
          - name: DefaultPreemption
    pluginConfig:
      - name: Regosched
        # regosched serve's flags of the same names; an unknown arg stops
        # the scheduler.
        args:
          {{- with .Values.policy.url }}
          policy: {{ . | quote }}
          {{- end }}
          {{- with .Values.policy.shadowUrl }}
          # Judged beside policy, never enforced (docs/operations.md#shadow-rollout).
          shadowPolicy: {{ . | quote }}
          {{- end }}
          {{- if .Values.policyData }}
          # ConfigMap {{ include "regosched.fullname" . }}-policy-data.
          policyData: /etc/regosched/policy-data/data.json
          {{- end }}
          {{- if .Values.policy.bearerToken.existingSecret }}
          policyBearerTokenFile: /etc/regosched/policy-bearer-token/{{ .Values.policy.bearerToken.secretKey }}
          {{- end }}
          {{- if .Values.policy.insecure }}
          policyInsecure: true
          {{- end }}
          {{- if $key }}
          policyVerificationKey: /etc/regosched/policy-verification-key/{{ .Values.policy.verificationKey.secretKey }}
          {{- with .Values.policy.verificationKey.keyId }}
          policyVerificationKeyID: {{ . | quote }}
          {{- end }}
          {{- with .Values.policy.verificationKey.signingAlg }}
          policySigningAlg: {{ . | quote }}
          {{- end }}
          {{- with .Values.policy.verificationKey.scope }}
          policyScope: {{ . | quote }}
          {{- end }}
          {{- end }}
          logLevel: {{ .Values.logLevel | quote }}
          {{- with .Values.decisionLog }}
          {{- if .target }}
          # Decision logs, sent off the scheduling cycles (docs/decision-logs.md);
          # plugin.args.decisionLog adds the HTTP settings.
          decisionLog:
            {{- include "regosched.pluginDecisionLog" $ | nindent 12 }}
          {{- end }}
          {{- end }}
          {{- with omit .Values.plugin.args "decisionLog" }}
          {{- toYaml . | nindent 10 }}
          {{- end }}
{{- end -}}

{{/*
The plugin arg decisionLog (mode plugin): decisionLog.*, as the
companion's --decision-log* flags in mode extender, and the settings
plugin.args.decisionLog adds (HTTP: timeout, maxRetries, uploadLimitBytes,
caCert, bearerTokenFile, insecure; maskMode), which extraArgs gives the
companion in mode extender.
*/}}
{{- define "regosched.pluginDecisionLog" -}}
{{- $dl := .Values.decisionLog -}}
{{- $args := dict "target" $dl.target "sample" $dl.sample "bufferSize" (int $dl.bufferSize) "flushInterval" $dl.flushInterval -}}
{{- with $dl.maskLabels }}
{{- $_ := set $args "maskLabels" . }}
{{- end }}
{{- range $k, $v := .Values.plugin.args.decisionLog | default dict }}
{{- $_ := set $args $k $v }}
{{- end }}
{{- toYaml $args }}
{{- end -}}

{{/*
Values that mean nothing with mode plugin are refused rather than ignored:
each would look set and do nothing.
*/}}
{{- define "regosched.checkMode" -}}
{{- if include "regosched.plugin" . }}
{{- /* regosched-scheduler is kube-scheduler v1.37, which the version skew
policy forbids against an older API server (against 1.36 its informers
never sync: docs/compatibility.md). */}}
{{- if not (semverCompare ">=1.37.0-0" .Capabilities.KubeVersion.Version) }}
{{- fail (printf "mode plugin runs regosched-scheduler, a kube-scheduler v1.37, which must not be newer than the API server (Kubernetes %s): use mode extender on this cluster (docs/compatibility.md)" .Capabilities.KubeVersion.Version) }}
{{- end }}
{{- if include "regosched.tls" . }}
{{- fail "tls: mode plugin has no connection to protect (regosched-scheduler decides in process and calls no extender; the companion serves no verbs): unset tls.enabled and tls.certManager.enabled" }}
{{- end }}
{{- if ne .Values.softRules "filter" }}
{{- fail (printf "softRules=%s: mode plugin has no extender verbs; the Regosched plugin scores the soft rules itself, weighed by plugin.weight: unset softRules" .Values.softRules) }}
{{- end }}
{{- if and .Values.plugin.args.decisionLog (not .Values.decisionLog.target) }}
{{- fail "plugin.args.decisionLog: set decisionLog.target (and decisionLog.*): plugin.args.decisionLog only adds settings to them" }}
{{- end }}
{{- $ext := .Values.scheduler.extender }}
{{- if or (ne (int $ext.weight) 5) (ne (toString $ext.httpTimeout) "5s") $ext.ignorable }}
{{- fail "scheduler.extender: mode plugin has no extender entry; set plugin.weight for the Regosched plugin's Score weight and leave scheduler.extender at its defaults (weight 5, httpTimeout 5s, ignorable false): the plugin cannot fail open, its rules run in the scheduler's process" }}
{{- end }}
{{- $img := .Values.scheduler.image }}
{{- if or $img.tag (ne $img.repository "registry.k8s.io/kube-scheduler") (ne $img.pullPolicy "IfNotPresent") }}
{{- fail "scheduler.image is the stock kube-scheduler's; mode plugin runs regosched-scheduler: set regoschedScheduler.image instead" }}
{{- end }}
{{- range $arg, $from := include "regosched.derivedPluginArgs" . | fromYaml }}
{{- if hasKey $.Values.plugin.args $arg }}
{{- fail (printf "plugin.args.%s: the chart sets it from %s, as the companion's flag" $arg $from) }}
{{- end }}
{{- end }}
{{- $paths := dict }}
{{- with .Values.policy.url }}
{{- if not (regexMatch "^https?://" .) }}
{{- $_ := set $paths "policy.url" . }}
{{- end }}
{{- end }}
{{- with .Values.policy.shadowUrl }}
{{- if not (regexMatch "^https?://" .) }}
{{- $_ := set $paths "policy.shadowUrl" . }}
{{- end }}
{{- end }}
{{- with .Values.plugin.args.policyCACert }}
{{- $_ := set $paths "plugin.args.policyCACert" . }}
{{- end }}
{{- with .Values.decisionLog.target }}
{{- if and (ne . "stdout") (not (regexMatch "^https?://" .)) }}
{{- $_ := set $paths "decisionLog.target" . }}
{{- end }}
{{- end }}
{{- with .Values.plugin.args.decisionLog }}
{{- with .caCert }}
{{- $_ := set $paths "plugin.args.decisionLog.caCert" . }}
{{- end }}
{{- with .bearerTokenFile }}
{{- $_ := set $paths "plugin.args.decisionLog.bearerTokenFile" . }}
{{- end }}
{{- end }}
{{- range $name, $path := $paths }}
{{- $mounted := false }}
{{- range $.Values.scheduler.extraVolumeMounts }}
{{- if hasPrefix (printf "%s/" (trimSuffix "/" .mountPath)) $path }}
{{- $mounted = true }}
{{- end }}
{{- end }}
{{- if not $mounted }}
{{- fail (printf "%s=%s is a file the scheduler reads with mode plugin: mount it into the scheduler with scheduler.extraVolumes and scheduler.extraVolumeMounts (extraVolumes mount into the companion only)" $name $path) }}
{{- end }}
{{- end }}
{{- end }}
{{- end -}}

{{/*
ConfigMaps of --redis-roles' memory and of --repair's repairs, and Lease of
--leader-elect: regosched's defaults (regosched-redis-roles,
regosched-repairs, regosched) for release "regosched", names
of the release's own otherwise, so two releases in one namespace do not
share them. The flags are passed only when they differ from the defaults.
*/}}
{{- define "regosched.redisRolesConfigMap" -}}
{{ include "regosched.fullname" . }}-redis-roles
{{- end -}}
{{- define "regosched.repairsConfigMap" -}}
{{ include "regosched.fullname" . }}-repairs
{{- end -}}
{{- define "regosched.leaderLease" -}}
{{ include "regosched.fullname" . }}
{{- end -}}

{{/*
--repair: repair.mode, off, plan or on. Unquoted in a values file, YAML
reads off and on as booleans: false is off, true is on.
*/}}
{{- define "regosched.repairMode" -}}
{{- $m := .Values.repair.mode -}}
{{- if kindIs "bool" $m -}}
{{- ternary "on" "off" $m -}}
{{- else -}}
{{- $m -}}
{{- end -}}
{{- end -}}
{{/* Repairs are planned or made: any repair.mode but off. */}}
{{- define "regosched.repair" -}}
{{- if ne (include "regosched.repairMode" .) "off" }}true{{ end -}}
{{- end -}}

{{/* Secret of --policy-verification-key: an existing one, or the chart's. */}}
{{- define "regosched.verificationKeySecret" -}}
{{- .Values.policy.verificationKey.existingSecret | default (printf "%s-policy-verification-key" (include "regosched.fullname" .)) -}}
{{- end -}}
{{- define "regosched.verificationKey" -}}
{{- if or .Values.policy.verificationKey.existingSecret .Values.policy.verificationKey.value }}true{{ end -}}
{{- end -}}

{{/*
--tls-allowed-client-names: tls.allowedClientNames, else the CN of the
scheduler's client certificate (certificates.yaml, deploy/README.md).
*/}}
{{- define "regosched.allowedClientNames" -}}
{{- if .Values.tls.allowedClientNames -}}
{{- join "," .Values.tls.allowedClientNames -}}
{{- else -}}
{{- include "regosched.schedulerFullname" . -}}
{{- end -}}
{{- end -}}

{{/* The extender ServiceAccount's user name, as admission sees it. */}}
{{- define "regosched.serviceAccountUser" -}}
system:serviceaccount:{{ .Release.Namespace }}:{{ include "regosched.fullname" . }}
{{- end -}}

{{/*
Objects of custom resources (cert-manager's, the Prometheus operator's) are
rendered only for a cluster that serves them: a value that asks for one on a
cluster without it fails with what to install, rather than being skipped (a
skipped PrometheusRule or ServiceMonitor is an alert that never fires, a
skipped Certificate pods that wait for ever). helm install and upgrade read
the served APIs from the cluster; helm template must be told them with
--api-versions; helm lint ignores fail, and lints the objects. Call with (dict "ctx" $ "value" "monitoring.podMonitor.enabled"
"apis" (list "monitoring.coreos.com/v1/PodMonitor") "install" "...").
*/}}
{{- define "regosched.requireAPIs" -}}
{{- $missing := list -}}
{{- range .apis -}}
{{- if not ($.ctx.Capabilities.APIVersions.Has .) -}}
{{- $missing = append $missing . -}}
{{- end -}}
{{- end -}}
{{- if $missing -}}
{{- fail (printf "%s: the cluster does not serve %s: install %s first, or set %s=false. With helm template, pass --api-versions %s" .value (join ", " $missing) .install .value (join " --api-versions " $missing)) -}}
{{- end -}}
{{- end -}}

{{/*
Monitoring values that changed: refused with what to set instead, rather
than ignored. Empty is accepted, as helm upgrade --reuse-values carries the
old defaults ({}).
*/}}
{{- define "regosched.checkMonitoring" -}}
{{- $m := .Values.monitoring -}}
{{- range $old := list "serviceMonitor" "prometheusRule" -}}
{{- with (get (get $m $old) "labels") -}}
{{- fail (printf "monitoring.%s.labels is replaced by monitoring.labels, one set of labels for the ServiceMonitors, PodMonitors and the PrometheusRule (default release: kube-prometheus-stack): move %s there" $old (toJson .)) -}}
{{- end -}}
{{- end -}}
{{- if and $m.serviceMonitor.enabled $m.podMonitor.enabled -}}
{{- fail "monitoring.serviceMonitor.enabled and monitoring.podMonitor.enabled scrape the same pods twice (every series doubled, every alert counted twice): enable one" -}}
{{- end -}}
{{- end -}}
