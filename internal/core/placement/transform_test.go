package placement

import (
	"strings"
	"testing"
	"unsafe"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/cache"

	"github.com/regosched/regosched/internal/core/model"
	"github.com/regosched/regosched/test/fixture"
)

// TestStripPodSharesNamespaceAndNode: two decoded pods of one namespace on
// one node keep one copy of each name between them.
func TestStripPodSharesNamespaceAndNode(t *testing.T) {
	record := func(name string) *podRecord {
		p := fixture.MakePod().Namespace(strings.Clone("shop")).Name(name).Node(strings.Clone("node-1")).Obj()
		r, err := stripPod(p)
		if err != nil {
			t.Fatal(err)
		}
		return r.(*podRecord)
	}
	a, b := record("a"), record("b")
	if unsafe.StringData(a.namespace) != unsafe.StringData(b.namespace) {
		t.Error("each record keeps its own copy of the namespace")
	}
	if unsafe.StringData(a.nodeName) != unsafe.StringData(b.nodeName) {
		t.Error("each record keeps its own copy of the node name")
	}
}

func TestStripPod(t *testing.T) {
	prio := int32(100)
	labels := fixture.RedisLabels("cache", "master", "")
	full := &corev1.Pod{
		TypeMeta: metav1.TypeMeta{Kind: "Pod", APIVersion: "v1"},
		ObjectMeta: metav1.ObjectMeta{
			Name:            "cache-0",
			Namespace:       "shop",
			UID:             "uid-cache-0",
			ResourceVersion: "42",
			Generation:      3,
			Labels:          labels,
			Annotations:     map[string]string{"kubectl.kubernetes.io/last-applied-configuration": strings.Repeat("x", 1000)},
			OwnerReferences: []metav1.OwnerReference{{Kind: "StatefulSet", Name: "cache", UID: "uid-sts"}},
			Finalizers:      []string{"example.com/finalizer"},
			ManagedFields:   []metav1.ManagedFieldsEntry{{Manager: "kubelet", Operation: metav1.ManagedFieldsOperationUpdate}},
		},
		Spec: corev1.PodSpec{
			NodeName:          "node-1",
			Priority:          &prio,
			PriorityClassName: "high",
			SchedulerName:     "regosched",
			Containers:        []corev1.Container{{Name: "redis", Image: "redis:8", Env: []corev1.EnvVar{{Name: "A", Value: "b"}}}},
			Volumes:           []corev1.Volume{{Name: "data"}},
			Tolerations:       []corev1.Toleration{{Key: "k", Operator: corev1.TolerationOpExists}},
			NodeSelector:      map[string]string{"disk": "ssd"},
		},
		Status: corev1.PodStatus{
			Phase:             corev1.PodRunning,
			Conditions:        []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}},
			PodIP:             "10.0.0.1",
			HostIP:            "192.168.0.1",
			ContainerStatuses: []corev1.ContainerStatus{{Name: "redis", Ready: true}},
		},
	}
	want := &podRecord{
		namespace:       "shop",
		name:            "cache-0",
		uid:             "uid-cache-0",
		resourceVersion: "42",
		labels:          model.NewLabels(labels),
		nodeName:        "node-1",
		priority:        prio,
	}
	tombstone := cache.DeletedFinalStateUnknown{Key: "shop/cache-0", Obj: full}
	tests := []struct {
		name string
		in   any
		want any
	}{
		{"full pod", full, want},
		{"pending pod, no priority", &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "ns"}}, &podRecord{namespace: "ns", name: "p"}},
		{"failed pod", &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "ns"}, Status: corev1.PodStatus{Phase: corev1.PodFailed}},
			&podRecord{namespace: "ns", name: "p", terminal: true}},
		{"tombstone unchanged", tombstone, tombstone},
		{"node unchanged", fixture.MakeNode().Name("n").Obj(), fixture.MakeNode().Name("n").Obj()},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := stripPod(tt.in)
			if err != nil {
				t.Fatalf("stripPod() error = %v", err)
			}
			if diff := cmp.Diff(tt.want, got, cmp.AllowUnexported(podRecord{})); diff != "" {
				t.Errorf("stripPod() mismatch (-want +got):\n%s", diff)
			}
			if r, ok := got.(*podRecord); ok {
				if diff := cmp.Diff(r, r.DeepCopyObject(), cmp.AllowUnexported(podRecord{})); diff != "" {
					t.Errorf("DeepCopyObject() mismatch (-want +got):\n%s", diff)
				}
				m, err := meta.Accessor(r)
				if err != nil {
					t.Fatalf("meta.Accessor() error = %v", err)
				}
				if got, want := [4]string{m.GetNamespace(), m.GetName(), string(m.GetUID()), m.GetResourceVersion()},
					[4]string{r.namespace, r.name, string(r.uid), r.resourceVersion}; got != want {
					t.Errorf("meta.Accessor() = %q, want %q", got, want)
				}
			}
		})
	}
}

func TestStripNode(t *testing.T) {
	labels := map[string]string{"topology.kubernetes.io/zone": "a"}
	full := &corev1.Node{
		TypeMeta: metav1.TypeMeta{Kind: "Node", APIVersion: "v1"},
		ObjectMeta: metav1.ObjectMeta{
			Name:            "node-1",
			UID:             "uid-node-1",
			ResourceVersion: "7",
			Labels:          labels,
			Annotations:     map[string]string{"node.alpha.kubernetes.io/ttl": "0"},
			ManagedFields:   []metav1.ManagedFieldsEntry{{Manager: "kubelet"}},
		},
		Spec: corev1.NodeSpec{PodCIDR: "10.0.0.0/24", Taints: []corev1.Taint{{Key: "k", Effect: corev1.TaintEffectNoSchedule}}},
		Status: corev1.NodeStatus{
			Conditions: []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue}},
			Images:     []corev1.ContainerImage{{Names: []string{"redis:8"}, SizeBytes: 1 << 20}},
			Addresses:  []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: "192.168.0.1"}},
		},
	}
	want := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "node-1", UID: "uid-node-1", ResourceVersion: "7", Labels: labels}}
	tombstone := cache.DeletedFinalStateUnknown{Key: "node-1", Obj: full}
	pod := fixture.MakePod().Namespace("ns").Name("p").Obj()
	tests := []struct {
		name string
		in   any
		want any
	}{
		{"full node", full, want},
		{"tombstone unchanged", tombstone, tombstone},
		{"pod unchanged", pod, pod},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := stripNode(tt.in)
			if err != nil {
				t.Fatalf("stripNode() error = %v", err)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("stripNode() mismatch (-want +got):\n%s", diff)
			}
		})
	}
}
