//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/yaml"

	"github.com/regosched/regosched/internal/plumbing/leader"
)

// haManifests are the extender's objects as deploy/ha renders them, moved
// to a test namespace.
type haManifests struct {
	Deployment *appsv1.Deployment
	Service    *corev1.Service
	PDB        *policyv1.PodDisruptionBudget
}

// renderHA renders deploy/ha with the cluster's kubectl and returns its
// Deployment, Service and PodDisruptionBudget "regosched" in namespace ns.
func renderHA(t *testing.T, ctx context.Context, ns string) haManifests {
	t.Helper()
	rendered, err := stack.Cluster().Kubectl(ctx, "kustomize", filepath.Join(stack.RepoRoot(), "deploy/ha"))
	if err != nil {
		t.Fatal(err)
	}
	var m haManifests
	for _, doc := range strings.Split(string(rendered), "\n---\n") {
		var o object
		if err := yaml.Unmarshal([]byte(doc), &o); err != nil {
			t.Fatalf("parsing deploy/ha: %v", err)
		}
		if o.Metadata.Name != "regosched" {
			continue
		}
		var into interface{ SetNamespace(string) }
		switch o.Kind {
		case "Deployment":
			m.Deployment = &appsv1.Deployment{}
			into = m.Deployment
		case "Service":
			m.Service = &corev1.Service{}
			into = m.Service
		case "PodDisruptionBudget":
			m.PDB = &policyv1.PodDisruptionBudget{}
			into = m.PDB
		default:
			continue
		}
		if err := yaml.Unmarshal([]byte(doc), into); err != nil {
			t.Fatalf("parsing %s regosched of deploy/ha: %v", o.Kind, err)
		}
		into.SetNamespace(ns)
	}
	if m.Deployment == nil || m.Service == nil || m.PDB == nil {
		t.Fatalf("deploy/ha lacks the Deployment, Service or PodDisruptionBudget regosched: %+v", m)
	}
	if got := m.Service.Spec.Selector[leader.Label]; got != "true" {
		t.Fatalf("deploy/ha's Service selects %v, want %s=true among its labels", m.Service.Spec.Selector, leader.Label)
	}
	if !slices.Contains(m.Deployment.Spec.Template.Spec.Containers[0].Args, "--leader-elect") {
		t.Fatalf("deploy/ha's extender runs %q, without --leader-elect", m.Deployment.Spec.Template.Spec.Containers[0].Args)
	}
	return m
}

// haState is what the tests check, each list sorted by pod name.
type haState struct {
	ready     []string          // pods whose process answers /readyz 200 on its health port
	leaders   []string          // pods whose process answers filter 200
	refusing  []string          // pods whose process answers filter 503 "not the leader"
	apiReady  []string          // pods whose Ready condition is True in the API
	labelled  []string          // pods that carry the leader label in the API
	endpoints []string          // pods in the Service's EndpointSlices ("name (not ready)" if so)
	ports     map[string]string // pod -> its ready endpoint's port http
}

func (s haState) String() string {
	return fmt.Sprintf("ready %v, leading %v, refusing %v, Ready in the API %v, labelled %v, endpoints %v",
		s.ready, s.leaders, s.refusing, s.apiReady, s.labelled, s.endpoints)
}

// state observes the processes, the pods and, if svc is not empty, the
// EndpointSlices of Service svc.
func (k *haKubelet) state(ctx context.Context, svc string) (haState, error) {
	var s haState
	k.mu.Lock()
	procs := make([]*haProc, 0, len(k.procs))
	for _, p := range k.procs {
		procs = append(procs, p)
	}
	k.mu.Unlock()
	for _, p := range procs {
		if p.r.Exited() {
			continue
		}
		if get(ctx, p.health+"/readyz") == http.StatusOK {
			s.ready = append(s.ready, p.pod)
		}
		code, body, err := call(ctx, nil, http.MethodPost, p.verb+"/scheduler/filter")
		switch {
		case err != nil:
		case code == http.StatusOK:
			s.leaders = append(s.leaders, p.pod)
		case code == http.StatusServiceUnavailable && strings.Contains(body, "not the leader"):
			s.refusing = append(s.refusing, p.pod)
		}
	}
	pods, err := stack.Client().CoreV1().Pods(k.ns).List(ctx, metav1.ListOptions{LabelSelector: haSelector})
	if err != nil {
		return s, err
	}
	for _, p := range pods.Items {
		if p.Labels[leader.Label] == "true" {
			s.labelled = append(s.labelled, p.Name)
		}
		if podReady(&p) {
			s.apiReady = append(s.apiReady, p.Name)
		}
	}
	if svc != "" {
		if s.endpoints, s.ports, err = endpointsOf(ctx, k.ns, svc); err != nil {
			return s, err
		}
	}
	for _, l := range [][]string{s.ready, s.leaders, s.refusing, s.apiReady, s.labelled, s.endpoints} {
		slices.Sort(l)
	}
	return s, nil
}

// endpointsOf returns the pods the EndpointSlice controller put behind
// Service svc, and the port http of each ready one.
func endpointsOf(ctx context.Context, ns, svc string) ([]string, map[string]string, error) {
	list, err := stack.Client().DiscoveryV1().EndpointSlices(ns).List(ctx, metav1.ListOptions{LabelSelector: discoveryv1.LabelServiceName + "=" + svc})
	if err != nil {
		return nil, nil, fmt.Errorf("listing EndpointSlices of %s: %w", svc, err)
	}
	var pods []string
	ports := map[string]string{}
	for _, sl := range list.Items {
		port := ""
		for _, p := range sl.Ports {
			if p.Name != nil && *p.Name == "http" && p.Port != nil {
				port = strconv.Itoa(int(*p.Port))
			}
		}
		for _, e := range sl.Endpoints {
			if e.TargetRef == nil {
				continue
			}
			name := e.TargetRef.Name
			if e.Conditions.Ready == nil || !*e.Conditions.Ready {
				name += " (not ready)"
			} else if port != "" {
				ports[e.TargetRef.Name] = port
			}
			pods = append(pods, name)
		}
	}
	return pods, ports, nil
}

// waitState polls the state until done says so, and fails the test with
// the last state seen after timeout.
func (k *haKubelet) waitState(ctx context.Context, what, svc string, timeout time.Duration, done func(haState) bool) haState {
	k.t.Helper()
	var last haState
	start := time.Now()
	err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, timeout, true, func(ctx context.Context) (bool, error) {
		s, err := k.state(ctx, svc)
		if err != nil {
			k.t.Logf("observing: %v", err)
			return false, nil
		}
		last = s
		return done(s), nil
	})
	if err != nil {
		k.t.Fatalf("waiting %s for %s: %v; last seen: %s", timeout, what, err, last)
	}
	k.t.Logf("%s after %s: %s", what, time.Since(start).Round(time.Millisecond), last)
	return last
}

// one reports whether l holds exactly name.
func one(l []string, name string) bool { return len(l) == 1 && l[0] == name }

// setLabel sets (value non-nil) or removes the leader label on a pod.
func setLabel(ctx context.Context, ns, pod string, value *string) error {
	patch := fmt.Appendf(nil, `{"metadata":{"labels":{%q:null}}}`, leader.Label)
	if value != nil {
		patch = fmt.Appendf(nil, `{"metadata":{"labels":{%q:%q}}}`, leader.Label, *value)
	}
	_, err := stack.Client().CoreV1().Pods(ns).Patch(ctx, pod, types.MergePatchType, patch, metav1.PatchOptions{})
	return err
}

// leaseHolder returns the holder of Lease name, "" when released.
func leaseHolder(ctx context.Context, ns, name string) (string, error) {
	l, err := stack.Client().CoordinationV1().Leases(ns).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return "", err
	}
	if l.Spec.HolderIdentity == nil {
		return "", nil
	}
	return *l.Spec.HolderIdentity, nil
}

func podReady(p *corev1.Pod) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// deleteQuietly deletes an object in a clean-up, reporting errors other
// than "not found".
func deleteQuietly(t *testing.T, what string, del func(context.Context) error) {
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), cleanupTimeout)
		defer cancel()
		if err := del(ctx); err != nil && !apierrors.IsNotFound(err) {
			t.Errorf("clean-up: deleting %s: %v", what, err)
		}
	})
}

// get returns the status of a GET of url, 0 when it fails.
func get(ctx context.Context, url string) int {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	code, _, err := call(ctx, nil, http.MethodGet, url)
	if err != nil {
		return 0
	}
	return code
}

// freeAddr returns a loopback address with a port free right now.
func freeAddr() (string, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	defer l.Close()
	return l.Addr().String(), nil
}

// unexpectedExits returns what processes that exited by themselves logged.
func (k *haKubelet) unexpectedExits() []string {
	k.mu.Lock()
	defer k.mu.Unlock()
	return append([]string(nil), k.exits...)
}

func (k *haKubelet) dump() {
	k.mu.Lock()
	defer k.mu.Unlock()
	for name, p := range k.procs {
		k.t.Logf("end of the log of %s's process (%s):\n%s", name, p.r.LogPath, p.r.LogTail(20))
	}
	for _, e := range k.exits {
		k.t.Log(e)
	}
	for _, p := range stack.Cluster().Processes() {
		if p.Name == "kube-controller-manager" && !p.Exited() {
			k.t.Logf("end of %s:\n%s", p.LogPath, p.LogTail(20))
		}
	}
}
