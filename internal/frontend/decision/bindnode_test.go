package decision

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	extenderv1 "k8s.io/kube-scheduler/extender/v1"

	"github.com/regosched/regosched/test/fixture"
)

// addNode creates node in the API and waits until d's cache knows it.
func addNode(t *testing.T, d *Decider, client interface {
	Create(context.Context, *v1.Node, metav1.CreateOptions) (*v1.Node, error)
}, node *v1.Node) {
	t.Helper()
	if _, err := client.Create(context.Background(), node, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		if _, ok := d.placements.NodeLabels(node.Name); ok {
			return
		}
	}
	t.Fatalf("node %s never reached the cache", node.Name)
}

// A bind the scheduler did not filter is checked against the pod's hard
// node constraints: a node its nodeSelector or required affinity rules
// out, with a taint it does not tolerate, or cordoned, is refused.
func TestBindChecksTheNodeAgainstThePod(t *testing.T) {
	ctx := context.Background()
	nodes := []*v1.Node{
		{ObjectMeta: metav1.ObjectMeta{Name: "ssd-1", Labels: map[string]string{"disk": "ssd"}}},
		{ObjectMeta: metav1.ObjectMeta{Name: "gpu-1", Labels: map[string]string{"disk": "ssd"}},
			Spec: v1.NodeSpec{Taints: []v1.Taint{{Key: "dedicated", Value: "gpu", Effect: v1.TaintEffectNoSchedule}}}},
		{ObjectMeta: metav1.ObjectMeta{Name: "soft-1", Labels: map[string]string{"disk": "ssd"}},
			Spec: v1.NodeSpec{Taints: []v1.Taint{{Key: "dedicated", Value: "gpu", Effect: v1.TaintEffectPreferNoSchedule}}}},
		{ObjectMeta: metav1.ObjectMeta{Name: "cordoned-1", Labels: map[string]string{"disk": "ssd"}}, Spec: v1.NodeSpec{Unschedulable: true}},
	}
	ssd := func(p *v1.Pod) { p.Spec.NodeSelector = map[string]string{"disk": "ssd"} }
	zoneB := func(p *v1.Pod) {
		p.Spec.Affinity = &v1.Affinity{NodeAffinity: &v1.NodeAffinity{RequiredDuringSchedulingIgnoredDuringExecution: &v1.NodeSelector{
			NodeSelectorTerms: []v1.NodeSelectorTerm{{MatchExpressions: []v1.NodeSelectorRequirement{
				{Key: "topology.kubernetes.io/zone", Operator: v1.NodeSelectorOpIn, Values: []string{"zone-b"}},
			}}},
		}}}
	}
	tolerateGPU := func(p *v1.Pod) {
		p.Spec.Tolerations = []v1.Toleration{{Key: "dedicated", Operator: v1.TolerationOpEqual, Value: "gpu", Effect: v1.TaintEffectNoSchedule}}
	}
	tests := []struct {
		name    string
		spec    []func(*v1.Pod)
		node    string
		wantErr string // empty: bound
	}{
		{"node selector matched", []func(*v1.Pod){ssd}, "ssd-1", ""},
		{"node selector not matched", []func(*v1.Pod){ssd}, "node-1", "does not match the pod's node selector or required node affinity"},
		{"required affinity matched", []func(*v1.Pod){zoneB}, "node-2", ""},
		{"required affinity not matched", []func(*v1.Pod){zoneB}, "node-1", "does not match the pod's node selector or required node affinity"},
		{"untolerated NoSchedule taint", nil, "gpu-1", "does not tolerate the node's taint dedicated=gpu:NoSchedule"},
		{"tolerated taint", []func(*v1.Pod){tolerateGPU}, "gpu-1", ""},
		{"PreferNoSchedule taint", nil, "soft-1", ""},
		{"cordoned node", nil, "cordoned-1", "the node is unschedulable"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d, client := newDecider(t, nil, prometheus.NewRegistry())
			bindLikeAPIServer(client)
			for _, n := range nodes {
				addNode(t, d, client.CoreV1().Nodes(), n)
			}
			p := fixture.MakePod().Namespace("shop").Name("web-0").Model()
			obj := profilePod(p, testScheduler)
			for _, f := range tt.spec {
				f(obj)
			}
			if _, err := client.CoreV1().Pods(p.Namespace).Create(ctx, obj, metav1.CreateOptions{}); err != nil {
				t.Fatal(err)
			}
			err := d.Bind(ctx, &extenderv1.ExtenderBindingArgs{PodName: p.Name, PodNamespace: p.Namespace, PodUID: p.UID, Node: tt.node})
			want := tt.node
			if tt.wantErr != "" {
				if !errors.Is(err, ErrRefused) || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("Bind() error = %v, want a refusal containing %q", err, tt.wantErr)
				}
				want = ""
			} else if err != nil {
				t.Fatalf("Bind() error = %v", err)
			}
			if got := nodeOf(t, client, p); got != want {
				t.Errorf("pod on %q, want %q", got, want)
			}
		})
	}
}
