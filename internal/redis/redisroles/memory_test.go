package redisroles

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/sirupsen/logrus"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/regosched/regosched"
	"github.com/regosched/regosched/internal/core/bundles"
	"github.com/regosched/regosched/internal/core/policy"
	"github.com/regosched/regosched/test/fixture"
)

func defaultPolicy(t *testing.T) *policy.Policy {
	t.Helper()
	p, err := bundles.Options{}.LoadFS(context.Background(), regosched.DefaultPolicy(), "default policy")
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// The memory survives a restart through its ConfigMap, and a recreated pod
// of the same owner is decided with its last known role.
func TestMemoryRecall(t *testing.T) {
	ctx := context.Background()
	client := fake.NewClientset()
	pol := defaultPolicy(t)
	newController := func() *Controller {
		c, err := New(Config{Client: client, Policy: func() *policy.Policy { return pol },
			MemoryNamespace: "regosched-system", MemoryName: "regosched-redis-roles",
			Registerer: prometheus.NewRegistry(), Log: logrus.New()})
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	first := newController()
	first.memory.set("shop", "cache-1", remembered{Role: Replica, Shard: "slot-5461", Owner: "sts", Seen: time.Now()})
	if err := first.memory.save(ctx, time.Now()); err != nil {
		t.Fatal(err)
	}

	restarted := newController()
	if err := restarted.memory.load(ctx); err != nil {
		t.Fatal(err)
	}
	chart := map[string]string{"app.kubernetes.io/name": "redis", "app.kubernetes.io/instance": "cache"}
	tests := []struct {
		name string
		pod  *corev1.Pod
		want map[string]string
	}{
		{"recreated by its owner", fixture.MakePod().Namespace("shop").Name("cache-1").UID("cache-1-uid").Labels(chart).StatefulSet("cache", "sts").Obj(),
			map[string]string{"app.kubernetes.io/name": "redis", "app.kubernetes.io/instance": "cache", "regosched.io/role": "replica", "regosched.io/shard": "slot-5461"}},
		{"same name, another owner", fixture.MakePod().Namespace("shop").Name("cache-1").UID("cache-1-uid").Labels(chart).StatefulSet("cache", "other").Obj(), chart},
		{"not remembered", fixture.MakePod().Namespace("shop").Name("cache-2").UID("cache-2-uid").Labels(chart).StatefulSet("cache", "sts").Obj(), chart},
		{"already labelled", fixture.MakePod().Namespace("shop").Name("cache-1").UID("cache-1-uid").Label("regosched.io/role", "master").StatefulSet("cache", "sts").Obj(),
			map[string]string{"regosched.io/role": "master"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			// The API server has the pod as the request says.
			if err := restarted.pods.GetStore().Update(tt.pod); err != nil {
				t.Fatal(err)
			}
			got := tt.pod.Labels
			if labels, ok := restarted.Recall(ctx, tt.pod); ok {
				got = labels.Map()
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("Recall() mismatch (-want +got):\n%s", diff)
			}
		})
	}

	// recall writes the remembered role onto the recreated pod itself.
	pod := fixture.MakePod().Namespace("shop").Name("cache-1").UID("cache-1-uid").Labels(chart).StatefulSet("cache", "sts").Obj()
	if _, err := client.CoreV1().Pods("shop").Create(ctx, pod, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	labels, _ := pol.LiveLabels()
	restarted.recall(ctx, infoOf(pod), labels, logrus.New())
	got, err := client.CoreV1().Pods("shop").Get(ctx, "cache-1", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{"regosched.io/role": "replica", "regosched.io/shard": "slot-5461", SourceAnnotation: "remembered"}
	gotLabels := map[string]string{"regosched.io/role": got.Labels["regosched.io/role"], "regosched.io/shard": got.Labels["regosched.io/shard"], SourceAnnotation: got.Annotations[SourceAnnotation]}
	if diff := cmp.Diff(want, gotLabels); diff != "" {
		t.Errorf("recalled pod mismatch (-want +got):\n%s", diff)
	}
}

// At its cap the memory keeps the most recently seen pods, within both its
// number of entries and the bytes of its ConfigMap, and counts the others.
func TestMemoryCap(t *testing.T) {
	ctx := context.Background()
	long := strings.Repeat("n", 200) // pod names make most of an entry's bytes
	tests := []struct {
		name       string
		maxEntries int
		pods       int
		podName    func(i int) string
		wantKept   int
	}{
		{"entries", 100, 130, func(i int) string { return fmt.Sprintf("cache-%d", i) }, 100},
		{"bytes", 100_000, 5000, func(i int) string { return fmt.Sprintf("%s-%d", long, i) }, -1},
		{"under the cap", 100, 60, func(i int) string { return fmt.Sprintf("cache-%d", i) }, 60},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			client := fake.NewClientset()
			evictions := prometheus.NewCounter(prometheus.CounterOpts{Name: "evictions"})
			m := newMemory(client, "regosched-system", "roles")
			m.maxEntries, m.evictions, m.log = tt.maxEntries, evictions, logrus.New()
			start := time.Now().Add(-time.Hour)
			for i := range tt.pods {
				m.set("shop", tt.podName(i), remembered{Role: Master, Owner: "sts", Seen: start.Add(time.Duration(i) * time.Second)})
			}
			if err := m.save(ctx, time.Now()); err != nil {
				t.Fatal(err)
			}
			cm, err := client.CoreV1().ConfigMaps("regosched-system").Get(ctx, "roles", metav1.GetOptions{})
			if err != nil {
				t.Fatal(err)
			}
			size := 0
			for k, v := range cm.Data {
				size += len(k) + len(v)
			}
			if size > memoryMaxBytes {
				t.Errorf("ConfigMap data of %d bytes, over %d", size, memoryMaxBytes)
			}
			kept := len(cm.Data)
			if tt.wantKept >= 0 && kept != tt.wantKept {
				t.Errorf("kept %d entries, want %d", kept, tt.wantKept)
			}
			if got := testutil.ToFloat64(evictions); int(got) != tt.pods-kept {
				t.Errorf("evictions = %v, want %d", got, tt.pods-kept)
			}
			// The newest are kept: the last pod set, not the first.
			if _, ok := cm.Data[memoryKey("shop", tt.podName(tt.pods-1))]; !ok {
				t.Error("the most recently seen pod was dropped")
			}
			if _, ok := cm.Data[memoryKey("shop", tt.podName(0))]; ok && kept < tt.pods {
				t.Error("the least recently seen pod was kept while others were dropped")
			}
			t.Logf("%d pods: kept %d in %d bytes", tt.pods, kept, size)
		})
	}
}

// Only pods with a controller are remembered: no other is ever recalled.
func TestMemoryOnlyOwnedPods(t *testing.T) {
	m := newMemory(fake.NewClientset(), "", "")
	m.set("shop", "bare", remembered{Role: Master, Seen: time.Now()})
	if _, ok := m.get("shop", "bare"); ok {
		t.Error("a pod without an owner was remembered")
	}
}
