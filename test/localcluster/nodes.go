package localcluster

import (
	"context"
	"fmt"

	"golang.org/x/sync/errgroup"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/regosched/regosched/test/fixture"
)

// Labels set on every fake node.
const (
	LabelHostname = "kubernetes.io/hostname"
	LabelZone     = "topology.kubernetes.io/zone"
)

// nodeWorkers bounds concurrent node creation: enough to hide request
// latency, few enough not to swamp a small apiserver.
const nodeWorkers = 8

// AddNodes creates n more ready nodes, numbered after those created so far
// (node-01, node-02, ...), with zones assigned round robin by number, and
// returns their names.
func (c *Cluster) AddNodes(ctx context.Context, n int) ([]string, error) {
	c.mu.Lock()
	first := c.nodeCount + 1
	c.nodeCount += n
	c.mu.Unlock()

	names := make([]string, 0, n)
	zones := make([]string, 0, n)
	for i := first; i < first+n; i++ {
		names = append(names, fmt.Sprintf("node-%02d", i))
		zones = append(zones, c.zones[(i-1)%len(c.zones)])
	}
	return names, c.CreateNodes(ctx, names, zones)
}

// CreateNodes creates a ready node per name, labelled with the zone of the
// same index. Names must not exist yet; AddNodes does not know about them.
func (c *Cluster) CreateNodes(ctx context.Context, names, zones []string) error {
	if len(names) != len(zones) {
		return fmt.Errorf("creating nodes: %d names but %d zones", len(names), len(zones))
	}
	g, ctx := errgroup.WithContext(ctx)
	workers := nodeWorkers
	if c.nodeWorkers > 0 {
		workers = c.nodeWorkers
	}
	g.SetLimit(workers)
	for i := range names {
		g.Go(func() error { return c.createNode(ctx, names[i], zones[i]) })
	}
	if err := g.Wait(); err != nil {
		return err
	}
	if len(names) > 0 {
		c.log.WithField("count", len(names)).Info("nodes created")
	}
	return nil
}

// createNode creates the Node, then fills in its status the way a kubelet
// would: status is a subresource, so the create call drops it.
func (c *Cluster) createNode(ctx context.Context, name, zone string) error {
	nodes := c.client.CoreV1().Nodes()
	node, err := nodes.Create(ctx, fixture.MakeNode().Name(name).UID("").Hostname().Zone(zone).Obj(), metav1.CreateOptions{})
	if err != nil {
		return fmt.Errorf("creating node %s: %w", name, err)
	}
	node.Status = fakeNodeStatus()
	if _, err := nodes.UpdateStatus(ctx, node, metav1.UpdateOptions{}); err != nil {
		return fmt.Errorf("setting status of node %s: %w", name, err)
	}
	return nil
}

func fakeNodeStatus() corev1.NodeStatus {
	resources := corev1.ResourceList{
		corev1.ResourceCPU:    resource.MustParse("32"),
		corev1.ResourceMemory: resource.MustParse("128Gi"),
		// Without a pod count the scheduler considers the node full.
		corev1.ResourcePods: resource.MustParse("110"),
	}
	now := metav1.Now()
	return corev1.NodeStatus{
		Capacity:    resources,
		Allocatable: resources.DeepCopy(),
		// No node lifecycle controller runs, so nothing ever marks these
		// nodes NotReady for a stale heartbeat.
		Conditions: []corev1.NodeCondition{{
			Type:               corev1.NodeReady,
			Status:             corev1.ConditionTrue,
			Reason:             "KubeletReady",
			Message:            "fake node managed by localcluster",
			LastHeartbeatTime:  now,
			LastTransitionTime: now,
		}},
		Phase: corev1.NodeRunning,
	}
}
