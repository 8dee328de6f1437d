#!/usr/bin/env bash
# Renders the kustomizations without a cluster or kubectl and checks the
# wiring that is easy to break. Needs only Go (kustomize comes through the
# Go module proxy, outside the project's go.mod).
#   bash deploy/validate.sh
set -euo pipefail
cd "$(dirname "$0")/.."

# v5.8.3 and later need Go >= 1.27.
KUSTOMIZE="${KUSTOMIZE:-go run sigs.k8s.io/kustomize/kustomize/v5@v5.8.2}"
out="$(mktemp -d)"
trap 'rm -rf "$out"' EXIT

$KUSTOMIZE build deploy/ >"$out/deploy.yaml"
$KUSTOMIZE build deploy/examples >"$out/examples.yaml"
$KUSTOMIZE build deploy/ha >"$out/ha.yaml"

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
check "scheduler image matches client libraries" \
	grep -q 'image: registry.k8s.io/kube-scheduler:v1.37.2' "$out/deploy.yaml"
check "config keeps clientConnection out (in-cluster)" \
	bash -c '! grep -q "^clientConnection:" deploy/scheduler/kube-scheduler-config.yaml'
check "examples use schedulerName regosched" \
	test "$(grep -c 'schedulerName: regosched' "$out/examples.yaml")" -eq 7
check "verb port closed to all but the scheduler (NetworkPolicy)" \
	grep -q '^kind: NetworkPolicy' "$out/deploy.yaml"
check "health, /version and /metrics on the health port" \
	grep -q -- '- --health-listen=:8081' "$out/deploy.yaml"
check "probes on the health port" \
	test "$(grep -A2 'httpGet:' "$out/deploy.yaml" | grep -c 'port: health')" -ge 2
check "HA Service selects the leader's label" \
	grep -q 'regosched.io/leader: "true"' "$out/ha.yaml"
check "HA extender gets its pod name for the label" \
	grep -q 'fieldPath: metadata.name' "$out/ha.yaml"

echo "kinds in deploy/:"
grep '^kind:' "$out/deploy.yaml" | sort | uniq -c
exit "$fail"
