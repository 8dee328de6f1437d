#!/usr/bin/env bash
# Builds and vets every package for the OSes developers use besides Linux
# (macOS, Windows), with and without the e2e build tag, so that code which
# compiles on Linux alone (syscall.Kill, Pdeathsig, ...) is caught on Linux.
# The local control plane itself runs on Linux only: outside Linux it returns
# localcluster.CheckOS's error at run time instead of failing to compile.
#   bash hack/cross-vet.sh            # darwin and windows, amd64
#   GOOSES="darwin" bash hack/cross-vet.sh
set -euo pipefail
cd "$(dirname "$0")/.."

GO="${GO:-go}"
fail=0
for goos in ${GOOSES:-darwin windows}; do
	for tags in "" e2e; do
		what="GOOS=$goos${tags:+ -tags $tags}"
		if GOOS="$goos" "$GO" build ${tags:+-tags "$tags"} ./... &&
			GOOS="$goos" "$GO" vet ${tags:+-tags "$tags"} ./...; then
			echo "ok   build and vet $what"
		else
			echo "FAIL build or vet $what"
			fail=1
		fi
	done
done
exit "$fail"
