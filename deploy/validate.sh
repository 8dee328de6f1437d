#!/usr/bin/env bash
# Renders the kustomizations without a cluster or kubectl and checks the
# wiring that is easy to break, and the version skew between the cluster,
# the scheduler image and regosched's extender types. Needs only Go
# (kustomize comes through the Go module proxy, outside the project's go.mod).
#   bash deploy/validate.sh
#   KUBE_VERSION=v1.38.0 bash deploy/validate.sh   # the cluster to deploy to
# KUBE_VERSION is the target cluster's (kube-apiserver's) version, e.g.
# v1.37.2 or 1.37; default: the version of k8s.io/kube-scheduler in go.mod
# (v0.37.2 -> v1.37.2).
set -euo pipefail
cd "$(dirname "$0")/.."

# v5.8.3 and later need Go >= 1.27.
KUSTOMIZE="${KUSTOMIZE:-go run sigs.k8s.io/kustomize/kustomize/v5@v5.8.2}"
out="$(mktemp -d)"
trap 'rm -rf "$out"' EXIT

$KUSTOMIZE build deploy/ >"$out/deploy.yaml"
$KUSTOMIZE build deploy/examples >"$out/examples.yaml"
$KUSTOMIZE build deploy/ha >"$out/ha.yaml"
$KUSTOMIZE build deploy/plugin >"$out/plugin.yaml"
$KUSTOMIZE build deploy/tls >"$out/tls.yaml"

fail=0
check() { # description, command...
	local what="$1"; shift
	if "$@"; then echo "ok   $what"; else echo "FAIL $what"; fail=1; fi
}

cm="$(awk '/^kind: ConfigMap/{f=1} f&&/^  name: regosched-scheduler-config-/{print $2; exit}' "$out/deploy.yaml")"
check "scheduler ConfigMap has a content hash ($cm)" test -n "$cm"
check "scheduler Deployment mounts $cm" grep -q "name: ${cm:-none}\$" <(grep -A1 'configMap:' "$out/deploy.yaml")
check "kube-system RoleBinding kept in kube-system" \
	grep -q 'namespace: kube-system' "$out/deploy.yaml"

# Version skew (https://kubernetes.io/releases/version-skew-policy/):
# kube-scheduler "must not be newer than the kube-apiserver instances" it
# talks to, and "may be up to one minor version older (to allow live
# upgrades)". The rule is on minor versions: any patch of an allowed minor
# is fine. regosched's wire types (k8s.io/kube-scheduler/extender/v1) are a
# stable v1 API: fields are only added, and both sides decode JSON ignoring
# fields they do not know, so the wire stays compatible across minors; the
# check holds go.mod's types to one minor either side of the scheduler
# image, the window the e2e suite (a kube-scheduler of go.mod's version)
# and the skew policy's one-minor steps keep tested.
minor_of() { # vX.Y[.Z] or X.Y[.Z] -> "X Y"; fails on anything else
	[[ "$1" =~ ^v?([0-9]+)\.([0-9]+)(\.[0-9]+)?([-+].*)?$ ]] || return 1
	echo "${BASH_REMATCH[1]} ${BASH_REMATCH[2]}"
}
is_version() { minor_of "$1" >/dev/null; }
# GOMOD: another go.mod to read the extender types from (for tests).
types="$(awk '$1 == "k8s.io/kube-scheduler" {print $2; exit}
	$1 == "require" && $2 == "k8s.io/kube-scheduler" {print $3; exit}' "${GOMOD:-go.mod}")"
kube="${KUBE_VERSION:-${types/#v0./v1.}}"
images="$({ grep -ho 'image: registry.k8s.io/kube-scheduler:[^[:space:]]*' "$out/deploy.yaml" "$out/ha.yaml" || true; } |
	sed 's/.*://' | sort -u)"
image="${images%%$'\n'*}"
from="from KUBE_VERSION"
[ -n "${KUBE_VERSION:-}" ] || from="from go.mod; set KUBE_VERSION to the cluster's"
check "cluster version is a Kubernetes version ($kube $from)" is_version "$kube"
check "go.mod requires k8s.io/kube-scheduler (${types:-none})" is_version "$types"
check "deploy/ and deploy/ha run one kube-scheduler image (${images//$'\n'/, })" \
	test "$(wc -w <<<"$images")" -eq 1
if km="$(minor_of "$kube")" && tm="$(minor_of "$types")" && im="$(minor_of "$image")"; then
	read -r kmaj kmin <<<"$km"
	read -r tmaj tmin <<<"$tm"
	read -r imaj imin <<<"$im"
	check "scheduler image $image not newer than the cluster $kube (minor versions)" \
		test "$imaj" -eq "$kmaj" -a "$imin" -le "$kmin"
	check "scheduler image $image at most one minor older than the cluster $kube" \
		test "$imaj" -eq "$kmaj" -a "$imin" -ge $((kmin - 1))
	if ! [ "$imaj" -eq "$kmaj" -a "$imin" -le "$kmin" -a "$imin" -ge $((kmin - 1)) ]; then
		echo "     the scheduler image follows the cluster: set it to a v$kmaj.$kmin.x release" \
			"in deploy/scheduler/deployment.yaml"
	fi
	check "extender types k8s.io/kube-scheduler $types within one minor of the scheduler image $image" \
		test "$tmaj" -eq 0 -a "$imaj" -eq 1 -a "$tmin" -ge $((imin - 1)) -a "$tmin" -le $((imin + 1))
else
	check "versions to compare (cluster $kube, scheduler image ${image:-none}, types ${types:-none})" false
fi
check "config keeps clientConnection out (in-cluster)" \
	bash -c '! grep -q "^clientConnection:" deploy/scheduler/kube-scheduler-config.yaml'
check "examples use schedulerName regosched" \
	test "$(grep -c 'schedulerName: regosched' "$out/examples.yaml")" -eq 7
check "verb port closed to all but the scheduler (NetworkPolicy)" \
	grep -q '^kind: NetworkPolicy' "$out/deploy.yaml"
check "health port open to the monitoring namespace only (NetworkPolicy)" \
	bash -c "grep -A4 -- '- key: kubernetes.io/metadata.name' '$out/deploy.yaml' | grep -q -- '- monitoring'"
check "admission policies narrow the extender's ServiceAccount (4 policies, 4 bindings)" \
	test "$(grep -c '^kind: ValidatingAdmissionPolicy$' "$out/deploy.yaml")" -eq 4 -a \
	"$(grep -c '^kind: ValidatingAdmissionPolicyBinding$' "$out/deploy.yaml")" -eq 4
# The policies name the ServiceAccount in CEL, which kustomize does not
# rewrite: a namespace changed in one place only would leave them idle.
check "admission policies match ServiceAccount regosched-system/regosched" \
	test "$(grep -c "request.userInfo.username == 'system:serviceaccount:regosched-system:regosched'" "$out/deploy.yaml")" -eq 4
# --repair=plan evicts with dryRun only, which RBAC authorizes as a create
# of pods/eviction all the same: policy regosched-dry-run-evictions refuses
# the real ones. The leader keeps its repairs in a ConfigMap the admission
# policy must let it create.
check "extender plans repairs (--repair=plan) and may evict, dry-run only (pods/eviction, regosched-dry-run-evictions)" \
	bash -c "grep -q -- '- --repair=plan\$' '$out/deploy.yaml' && grep -q -- '- pods/eviction\$' '$out/deploy.yaml' &&
		grep -q '^  name: regosched-dry-run-evictions\$' '$out/deploy.yaml'"
check "admission policy lets regosched create ConfigMap regosched-repairs" \
	grep -q "''regosched-repairs''\])'\$" "$out/deploy.yaml"
check "mutual TLS accepts the scheduler's client certificate only" \
	grep -q -- '- --tls-allowed-client-names=regosched-scheduler$' "$out/tls.yaml"
check "mutual TLS: the leader rolls the scheduler when its client Secret changes (flags, Role by name, admission policy)" \
	bash -c "grep -q -- '- --scheduler-client-secret=regosched-scheduler-client-tls\$' '$out/tls.yaml' &&
		grep -q -- '- --scheduler-deployment=regosched-scheduler\$' '$out/tls.yaml' &&
		grep -q '^  name: regosched-cert-roll\$' '$out/tls.yaml' && grep -q '^  name: regosched-scheduler-patch\$' '$out/tls.yaml'"
check "health, /version and /metrics on the health port" \
	grep -q -- '- --health-listen=:8081' "$out/deploy.yaml"
check "probes on the health port" \
	test "$(grep -A2 'httpGet:' "$out/deploy.yaml" | grep -c 'port: health')" -ge 2
# replicas_of FILE KIND NAME: spec.replicas of that object of a kustomize
# render (its keys are sorted: metadata's name before spec's replicas).
replicas_of() {
	awk -v kind="$2" -v name="$3" '/^---/{k="";n=""} /^kind: /{k=$2} /^  name: /{n=$2}
		/^  replicas: / && k==kind && n==name {print $2}' "$1"
}
check "HA runs two extender replicas and two scheduler replicas" \
	test "$(replicas_of "$out/ha.yaml" Deployment regosched)$(replicas_of "$out/ha.yaml" Deployment regosched-scheduler)" = 22
check "HA keeps one of each through drains (PodDisruptionBudgets regosched, regosched-scheduler)" \
	test "$(for n in regosched regosched-scheduler; do awk -v n="$n" '/^---/{k=""} /^kind: /{k=$2}
		k=="PodDisruptionBudget" && $0=="  name: " n {print}' "$out/ha.yaml"; done | wc -l)" -eq 2
check "HA replicas prefer distinct nodes (pod anti-affinity on kubernetes.io/hostname, both)" \
	test "$(grep -c 'topologyKey: kubernetes.io/hostname' "$out/ha.yaml")" -eq 2
check "scheduler elects a leader on its own Lease regosched-scheduler" \
	bash -c "grep -A6 '^leaderElection:' deploy/scheduler/kube-scheduler-config.yaml | grep -q '^  resourceName: regosched-scheduler\$'"
check "HA Service selects the leader's label" \
	grep -q 'regosched.io/leader: "true"' "$out/ha.yaml"
check "HA extender gets its pod name for the label" \
	grep -q 'fieldPath: metadata.name' "$out/ha.yaml"
pcm="$(awk '/^kind: ConfigMap/{f=1} f&&/^  name: regosched-scheduler-config-/{print $2; exit}' "$out/plugin.yaml")"
check "plugin overlay mounts its own config ($pcm)" \
	bash -c "test -n '$pcm' && test '$pcm' != '$cm' && grep -A1 'configMap:' '$out/plugin.yaml' | grep -q 'name: $pcm\$'"
check "plugin overlay runs regosched-scheduler" grep -q -- '- /regosched-scheduler' "$out/plugin.yaml"
check "plugin config keeps clientConnection out (in-cluster)" \
	bash -c '! grep -q "^clientConnection:" deploy/plugin/kube-scheduler-config.yaml'
check "plugin config enables the Regosched plugin" grep -q 'name: Regosched' "$out/plugin.yaml"

echo "kinds in deploy/:"
grep '^kind:' "$out/deploy.yaml" | sort | uniq -c
exit "$fail"
