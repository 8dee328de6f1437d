//go:build e2e

package e2e

import (
	"context"
	"os"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/regosched/regosched/test/fixture"
)

// TestZonesInThePlugin: the rules per zone hold in regosched-scheduler as
// in the extender (test/e2e/zones_test.go), on four nodes in zones a, b,
// c, a: a replica is kept out of its master's zone, and a master-eligible
// pod out of a zone holding as many of its StatefulSet's three as a
// quorum allows.
func TestZonesInThePlugin(t *testing.T) {
	pc := startPluginCluster(t, 4)
	ctx := t.Context()
	sched, err := pc.c.StartSchedulerBinary(ctx, pc.bin, pc.cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		sched.Stop()
		if t.Failed() {
			if b, err := os.ReadFile(sched.LogPath); err == nil {
				t.Logf("regosched-scheduler log (tail):\n%s", tail(b, 4000))
			}
		}
	})
	client := pc.c.Client()
	if _, err := client.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	const zoneA1, zoneA2, zoneB = "node-01", "node-04", "node-02"

	waitBound(t, client, create(t, client, fixture.MakePod().Namespace(ns).Name("cache-0-master").Redis("cache", "master", "0").Schedulable().OnNodes(zoneA1).Obj()))
	replica := create(t, client, fixture.MakePod().Namespace(ns).Name("cache-0-replica").Redis("cache", "replica", "0").Schedulable().OnNodes(zoneA2, zoneB).Obj())
	if got := waitBound(t, client, replica); got != zoneB {
		t.Errorf("the replica went to %s, want %s, out of its master's zone", got, zoneB)
	}

	labels := fixture.ElasticsearchLabels("logs", "master")
	set, err := client.AppsV1().StatefulSets(ns).Create(ctx, fixture.StatefulSet(ns, "logs-master", 3, labels), metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	member := func(name string, on ...string) *corev1.Pod {
		return fixture.MakePod().Namespace(ns).Name(name).Labels(labels).StatefulSet(set.Name, set.UID).Schedulable().OnNodes(on...).Obj()
	}
	waitBound(t, client, create(t, client, member("logs-master-0", zoneA1)))
	second := create(t, client, member("logs-master-1", zoneA2))
	err = wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, waitLimit, true, func(context.Context) (bool, error) {
		return failedScheduling(t, client, second) != "", nil
	})
	if reason := failedScheduling(t, client, second); err != nil || !strings.Contains(reason, "with this pod 2 of 3 there, fewer than half may be") {
		t.Errorf("logs-master-1's FailedScheduling %q (%v) does not name the quorum of 3", reason, err)
	}
	staysPending(t, client, second)
	if got := waitBound(t, client, create(t, client, member("logs-master-2", zoneA2, zoneB))); got != zoneB {
		t.Errorf("logs-master-2 went to %s, want %s", got, zoneB)
	}
}
