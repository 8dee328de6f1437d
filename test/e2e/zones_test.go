//go:build e2e

package e2e

import (
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/regosched/regosched/test/fixture"
)

// The local cluster's nodes take zones a, b, c in turn: node-01 and
// node-04 share zone-a, node-02 is in zone-b.
const (
	zoneA1, zoneA2, zoneB = "node-01", "node-04", "node-02"
)

// A replica is kept out of its master's zone, not only off its node: of
// the other node of zone-a and a node of zone-b it takes the latter, and
// offered zone-a alone it is refused, naming the zone.
func TestReplicaKeptOutOfItsMastersZone(t *testing.T) {
	const ns = "e2e-zones-redis"
	ctx := setup(t, ns)
	place(t, ctx, fixture.MakePod().Namespace(ns).Name("cache-0-master").Redis("cache", "master", "0").Schedulable().OnNodes(zoneA1).Obj())
	got := place(t, ctx, fixture.MakePod().Namespace(ns).Name("cache-0-replica").Redis("cache", "replica", "0").Schedulable().OnNodes(zoneA2, zoneB).Obj())
	if got != zoneB {
		t.Errorf("the replica went to %s, want %s, out of its master's zone", got, zoneB)
	}
	reason := refuse(t, ctx, fixture.MakePod().Namespace(ns).Name("cache-0-replica-1").Redis("cache", "replica", "0").Schedulable().OnNodes(zoneA2).Obj())
	if want := "already in zone zone-a"; !strings.Contains(reason, want) {
		t.Errorf("FailedScheduling message %q does not contain %q", reason, want)
	}
	noViolations(t, ctx, ns)
}

// The size of a group of master-eligible pods comes from their
// StatefulSet: with three replicas a zone may hold one, so the second pod
// is refused the first one's zone although only one member exists yet.
func TestQuorumSizeFromTheStatefulSet(t *testing.T) {
	const ns = "e2e-zones-es"
	ctx := setup(t, ns)
	labels := fixture.ElasticsearchLabels("logs", "master")
	set, err := stack.Client().AppsV1().StatefulSets(ns).Create(ctx, fixture.StatefulSet(ns, "logs-master", 3, labels), metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	// No StatefulSet controller runs here: the pods are made as it would.
	member := func(name string) *fixture.PodWrapper {
		return fixture.MakePod().Namespace(ns).Name(name).Labels(labels).StatefulSet(set.Name, set.UID)
	}
	place(t, ctx, member("logs-master-0").Schedulable().OnNodes(zoneA1).Obj())
	reason := refuse(t, ctx, member("logs-master-1").Schedulable().OnNodes(zoneA2).Obj())
	if want := "with this pod 2 of 3 there, fewer than half may be"; !strings.Contains(reason, want) {
		t.Errorf("FailedScheduling message %q does not contain %q", reason, want)
	}
	if got := place(t, ctx, member("logs-master-2").Schedulable().OnNodes(zoneA2, zoneB).Obj()); got != zoneB {
		t.Errorf("logs-master-2 went to %s, want %s", got, zoneB)
	}
	noViolations(t, ctx, ns)
}

// Two of three Redis masters bound in one zone (by hand, as a failover
// leaves them): regosched audit reports the quorum at risk.
func TestAuditReportsQuorumAtRisk(t *testing.T) {
	const ns = "e2e-zones-quorum"
	ctx := setup(t, ns)
	for i, node := range []string{zoneA1, zoneA2, zoneB} {
		shard := string(rune('0' + i))
		pod := fixture.MakePod().Namespace(ns).Name("cache-"+shard+"-master").Redis("cache", "master", shard).Schedulable().Obj()
		pod.UID = types.UID("")
		pod.Spec.NodeName = node // bound by hand, past the scheduler
		if _, err := stack.Client().CoreV1().Pods(ns).Create(ctx, pod, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	out, code := runBinary(t, ctx, "audit", "--kubeconfig", stack.Cluster().KubeconfigPath(), "-n", ns)
	if code != 1 {
		t.Errorf("regosched audit exited %d, want 1:\n%s", code, out)
	}
	for _, w := range []string{"redis-masters-quorum", "cache-0-master,cache-1-master", "2 of 3 there"} {
		if !strings.Contains(out, w) {
			t.Errorf("regosched audit output lacks %q:\n%s", w, out)
		}
	}
	t.Logf("regosched audit:\n%s", out)
	v, err := stack.Violations(ctx, ns)
	if err != nil {
		t.Fatal(err)
	}
	if len(v) != 1 || !strings.Contains(v[0], "2 of the 3 redis masters") {
		t.Errorf("the independent check found %q, want the quorum at risk in zone-a", v)
	}
}
