package audit

import (
	"context"
	"fmt"
	"io/fs"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	logtest "github.com/sirupsen/logrus/hooks/test"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/regosched/regosched"
	"github.com/regosched/regosched/internal/core/bundles"
	"github.com/regosched/regosched/internal/core/model"
	"github.com/regosched/regosched/internal/core/placement"
	"github.com/regosched/regosched/internal/core/placement/placementtest"
	"github.com/regosched/regosched/internal/core/policy"
)

func redisLabels(cluster, role, shard string) map[string]string {
	return map[string]string{
		"app.kubernetes.io/name":      "redis",
		"app.kubernetes.io/instance":  cluster,
		"app.kubernetes.io/component": role,
		"regosched.io/shard":          shard,
	}
}

func esLabels(cluster string) map[string]string {
	return map[string]string{
		"app.kubernetes.io/name":      "elasticsearch",
		"app.kubernetes.io/instance":  cluster,
		"app.kubernetes.io/component": "data",
	}
}

// bound is a running pod on node whose UID is "uid-<namespace>-<name>".
func bound(ns, name, node string, labels map[string]string) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, UID: types.UID("uid-" + ns + "-" + name), Labels: labels},
		Spec:       corev1.PodSpec{NodeName: node},
		Status:     corev1.PodStatus{Phase: corev1.PodRunning},
	}
}

func nodes(names ...string) []runtime.Object {
	objs := make([]runtime.Object, len(names))
	for i, n := range names {
		objs[i] = &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: n, Labels: map[string]string{
			"topology.kubernetes.io/zone": fmt.Sprintf("zone-%d", i%3),
		}}}
	}
	return objs
}

// defaultPolicy is the policy regosched ships.
func defaultPolicy(t testing.TB) *policy.Policy {
	t.Helper()
	return loadFS(t, regosched.DefaultPolicy(), "default")
}

// loadFS reads and compiles the bundle in fsys, as regosched loads it.
func loadFS(t testing.TB, fsys fs.FS, name string) *policy.Policy {
	t.Helper()
	pol, err := bundles.Options{}.LoadFS(context.Background(), fsys, name)
	if err != nil {
		t.Fatal(err)
	}
	return pol
}

// event is what the recorder was asked to record.
type event struct {
	Regarding, Related, Type, Reason, Action, Note string
}

// recorder is an events.EventRecorder that keeps what it is given, with
// the objects' names (the client-go fake keeps only the message).
type recorder struct {
	mu     sync.Mutex
	events []event
}

func (r *recorder) Eventf(regarding, related runtime.Object, eventtype, reason, action, note string, args ...any) {
	name := func(o runtime.Object) string {
		if ref, ok := o.(*corev1.ObjectReference); ok {
			return ref.Namespace + "/" + ref.Name
		}
		return fmt.Sprint(o)
	}
	e := event{Regarding: name(regarding), Type: eventtype, Reason: reason, Action: action, Note: fmt.Sprintf(note, args...)}
	if related != nil {
		e.Related = name(related)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.events = append(r.events, e)
}

// take returns the events recorded since the last take.
func (r *recorder) take() []event {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := r.events
	r.events = nil
	return out
}

// fixture is an Auditor over a real placement cache fed by a fake clientset.
type fixture struct {
	client   *fake.Clientset
	cache    *placement.Cache
	auditor  *Auditor
	recorder *recorder
	reg      *prometheus.Registry
}

func newFixture(t *testing.T, objs ...runtime.Object) *fixture {
	t.Helper()
	return newFixtureWith(t, defaultPolicy(t), objs...)
}

// newFixtureWith is newFixture under pol.
func newFixtureWith(t *testing.T, pol *policy.Policy, objs ...runtime.Object) *fixture {
	t.Helper()
	current := func() *policy.Policy { return pol }
	log, _ := logtest.NewNullLogger()
	f := &fixture{client: fake.NewClientset(objs...), recorder: &recorder{}, reg: prometheus.NewRegistry()}
	f.cache = placementtest.Start(t, f.client, policy.Describer(current))
	var err error
	f.auditor, err = New(Config{Cache: f.cache, Policies: current, Recorder: f.recorder, Log: log, Registerer: f.reg})
	if err != nil {
		t.Fatal(err)
	}
	return f
}

// apply creates or updates pod in the API and waits until the cache shows
// it on its node with its labels.
func (f *fixture) apply(t *testing.T, pod *corev1.Pod) {
	t.Helper()
	ctx := context.Background()
	pods := f.client.CoreV1().Pods(pod.Namespace)
	if _, err := pods.Update(ctx, pod, metav1.UpdateOptions{}); err != nil {
		if _, err := pods.Create(ctx, pod, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	want := model.NewLabels(pod.Labels)
	f.eventually(t, func() bool {
		p, ok := f.cache.PodByUID(pod.UID)
		return ok && p.Node == pod.Spec.NodeName && p.Labels.Equal(want)
	})
}

// remove deletes pod and waits until the cache drops it.
func (f *fixture) remove(t *testing.T, pod *corev1.Pod) {
	t.Helper()
	if err := f.client.CoreV1().Pods(pod.Namespace).Delete(context.Background(), pod.Name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	f.eventually(t, func() bool {
		_, ok := f.cache.PodByUID(pod.UID)
		return !ok
	})
}

func (f *fixture) eventually(t *testing.T, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); !cond(); {
		if time.Now().After(deadline) {
			t.Fatal("the placement cache did not catch up")
		}
		time.Sleep(time.Millisecond)
	}
}

func (f *fixture) run(t *testing.T) Report {
	t.Helper()
	r, err := f.auditor.Run(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return r
}
