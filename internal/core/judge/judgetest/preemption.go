package judgetest

import (
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/regosched/regosched/test/fixture"
)

// PreemptionCase is a pending pod that fits nowhere for want of resources,
// among pods of lower priority: which of them a front end may evict.
type PreemptionCase struct {
	Name    string
	Nodes   []*corev1.Node
	Bound   []*corev1.Pod
	Pending *corev1.Pod
	// Candidates are the victims kube-scheduler's own dry run picks by
	// node, knowing nothing of the policy: what the extender's preempt verb
	// is handed.
	Candidates map[string][]string
	// Spared are the pods no front end may evict: the extender drops a
	// node whose victims include one, the plugin's preemption never picks
	// one.
	Spared []string
	// Victims are what the plugin evicts instead; none leaves the pod
	// pending.
	Victims []string
}

// PreemptionCases are the conformance table of preemption for resources.
func PreemptionCases() []PreemptionCase {
	return []PreemptionCase{
		{
			// Default preemption alone reprieves web (of higher priority)
			// and evicts the master.
			Name:  "a master is never a victim to free resources",
			Nodes: []*corev1.Node{CPUNode("n1", "2")},
			Bound: []*corev1.Pod{
				WithCPU(fixture.MakePod().Namespace(Namespace).Name("cache-0-master").Redis("cache", "master", "0").Priority(100).Node("n1"), "1"),
				WithCPU(fixture.MakePod().Namespace(Namespace).Name("web").Label("app", "web").Priority(500).Node("n1"), "1"),
			},
			Pending:    WithCPU(fixture.MakePod().Namespace(Namespace).Name("batch").Label("app", "batch").Priority(1000), "1"),
			Candidates: map[string][]string{"n1": {"cache-0-master"}},
			Spared:     []string{"cache-0-master"},
			Victims:    []string{"web"},
		},
	}
}

// CPUNode is a node in zone-a with cpu CPUs allocatable.
func CPUNode(name, cpu string) *corev1.Node {
	n := fixture.MakeNode().Name(name).Hostname().Zone("zone-a").Obj()
	n.Status.Allocatable = corev1.ResourceList{
		corev1.ResourceCPU:    resource.MustParse(cpu),
		corev1.ResourceMemory: resource.MustParse("8Gi"),
		corev1.ResourcePods:   resource.MustParse("110"),
	}
	n.Status.Capacity = n.Status.Allocatable.DeepCopy()
	return n
}

// WithCPU is p with one container that requests cpu.
func WithCPU(p *fixture.PodWrapper, cpu string) *corev1.Pod {
	return p.Container(corev1.Container{Name: "main", Resources: corev1.ResourceRequirements{
		Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(cpu)},
	}}).Obj()
}
