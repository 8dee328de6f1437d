// Package e2e holds regosched's end-to-end tests: the real extender binary,
// a real kube-scheduler configured from deploy/scheduler and a real
// kube-apiserver with etcd, all on loopback (see test/localstack). The
// tests need the build tag e2e:
//
//	go test -tags e2e -count=1 ./test/e2e/
//
// The first run builds etcd, kube-apiserver, kube-scheduler and kubectl
// into a cache folder, which takes many minutes; later runs only rebuild
// regosched.
//
// REGOSCHED_E2E_POLICY=<bundle directory> runs regosched with that policy
// instead of the embedded one; a deliberately broken copy of rego/ must make
// tests fail.
package e2e
