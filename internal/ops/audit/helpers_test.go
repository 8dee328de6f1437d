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
	"k8s.io/client-go/kubernetes/fake"

	"github.com/regosched/regosched"
	"github.com/regosched/regosched/internal/core/bundles"
	"github.com/regosched/regosched/internal/core/model"
	"github.com/regosched/regosched/internal/core/placement"
	"github.com/regosched/regosched/internal/core/placement/placementtest"
	"github.com/regosched/regosched/internal/core/policy"
	"github.com/regosched/regosched/test/fixture"
)

// nodes are the cluster's nodes, in zones zone-0 to zone-2 in turn.
func nodes(names ...string) []runtime.Object {
	objs := make([]runtime.Object, len(names))
	for i, n := range names {
		objs[i] = fixture.MakeNode().Name(n).Zone(fmt.Sprintf("zone-%d", i%3)).Obj()
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

// harness is an Auditor over a real placement cache fed by a fake clientset.
type harness struct {
	client   *fake.Clientset
	cache    *placement.Cache
	auditor  *Auditor
	recorder *recorder
	reg      *prometheus.Registry
}

func newHarness(t *testing.T, objs ...runtime.Object) *harness {
	t.Helper()
	return newHarnessWith(t, defaultPolicy(t), objs...)
}

// newHarnessWith is newHarness under pol.
func newHarnessWith(t *testing.T, pol *policy.Policy, objs ...runtime.Object) *harness {
	t.Helper()
	current := func() *policy.Policy { return pol }
	log, _ := logtest.NewNullLogger()
	f := &harness{client: fake.NewClientset(objs...), recorder: &recorder{}, reg: prometheus.NewRegistry()}
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
func (f *harness) apply(t *testing.T, pod *corev1.Pod) {
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
func (f *harness) remove(t *testing.T, pod *corev1.Pod) {
	t.Helper()
	if err := f.client.CoreV1().Pods(pod.Namespace).Delete(context.Background(), pod.Name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	f.eventually(t, func() bool {
		_, ok := f.cache.PodByUID(pod.UID)
		return !ok
	})
}

func (f *harness) eventually(t *testing.T, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); !cond(); {
		if time.Now().After(deadline) {
			t.Fatal("the placement cache did not catch up")
		}
		time.Sleep(time.Millisecond)
	}
}

func (f *harness) run(t *testing.T) Report {
	t.Helper()
	r, err := f.auditor.Run(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return r
}
