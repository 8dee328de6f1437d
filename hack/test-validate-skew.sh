#!/usr/bin/env bash
# Tests deploy/validate.sh's version-skew checks: runs it against clusters
# and extender types around the scheduler image of deploy/ and expects each
# to pass, or to fail on the named check.
#   bash hack/test-validate-skew.sh
set -euo pipefail
cd "$(dirname "$0")/.."

tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
# kustomize once, at validate.sh's pinned version, instead of a go run per case.
if [ -z "${KUSTOMIZE:-}" ]; then
	mod="$(grep -o 'sigs.k8s.io/kustomize/kustomize/v5@v[0-9.]*' deploy/validate.sh | head -1)"
	GOBIN="$tmp" GOWORK=off go install "$mod"
	export KUSTOMIZE="$tmp/kustomize"
fi

image="$(grep -o 'image: registry.k8s.io/kube-scheduler:v[0-9.]*' deploy/scheduler/deployment.yaml | sed 's/.*:v//')"
IFS=. read -r maj min patch <<<"$image"
types() { printf 'module x\n\nrequire (\n\tk8s.io/kube-scheduler v0.%s\n)\n' "$1" >"$tmp/go.mod.$1"; echo "$tmp/go.mod.$1"; }

fail=0
# case NAME WANT(pass|"FAIL text") ENV...
case_() {
	local name="$1" want="$2"; shift 2
	local out rc=0
	out="$(env "$@" bash deploy/validate.sh 2>&1)" || rc=$?
	if [ "$want" = pass ]; then
		if [ "$rc" -eq 0 ]; then echo "ok   $name: passes"; else
			echo "FAIL $name: want a pass, got exit $rc:"; grep FAIL <<<"$out" | sed 's/^/     /'; fail=1
		fi
	elif [ "$rc" -ne 0 ] && grep -qF "FAIL $want" <<<"$out"; then
		echo "ok   $name: fails on \"$want\""
	else
		echo "FAIL $name: want a failure on \"$want\", got exit $rc:"; grep -E '^(ok|FAIL)' <<<"$out" | sed 's/^/     /'; fail=1
	fi
}

case_ "cluster of go.mod's version (default)" pass KUBE_VERSION=
case_ "cluster at the image's minor, older patch" pass KUBE_VERSION="v$maj.$min.0"
case_ "cluster one minor newer than the image" pass KUBE_VERSION="$maj.$((min + 1))"
case_ "cluster one minor older than the image" "scheduler image v$image not newer than the cluster" \
	KUBE_VERSION="v$maj.$((min - 1)).9"
case_ "cluster two minors newer than the image" "scheduler image v$image at most one minor older than the cluster" \
	KUBE_VERSION="v$maj.$((min + 2)).0"
case_ "KUBE_VERSION not a version" "cluster version is a Kubernetes version" KUBE_VERSION=latest
case_ "extender types one minor newer than the image" pass KUBE_VERSION="v$image" GOMOD="$(types "$((min + 1)).0")"
case_ "extender types one minor older than the image" pass KUBE_VERSION="v$image" GOMOD="$(types "$((min - 1)).3")"
case_ "extender types two minors older than the image" "extender types k8s.io/kube-scheduler v0.$((min - 2)).0" \
	KUBE_VERSION="v$image" GOMOD="$(types "$((min - 2)).0")"
exit "$fail"
