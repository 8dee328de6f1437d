//go:build e2e

package e2e

import (
	"context"
	"strconv"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"

	ls "github.com/regosched/regosched/test/localstack"
)

// The whole eviction loop, with kwok as the kubelets of two nodes of its
// own (zone-a and zone-b; the stack's nodes and the other tests' pods are
// not kwok's). A Redis master and its own replica of one StatefulSet, real
// redis-servers on the pods' IPs, stand on the zone-a node, placed before
// regosched ran. regosched's repair (--repair=on) evicts the replica
// through the Eviction API under the set's PodDisruptionBudget; kwok
// completes the eviction, the statefulset-controller recreates the pod,
// and kube-scheduler, calling regosched, places it on the zone-b node: the
// extender judges it by its last role, replica of shard slot-0, which
// regosched recalls (at filter, and as "remembered" labels) before its
// Redis answers, so its master's node and zone are refused. kwok runs
// it with a new IP, its new redis-server rejoins the shard as a replica,
// redis-roles labels it, and `regosched audit` finds nothing. One
// eviction does it.
func TestKwokEvictionLoop(t *testing.T) {
	const ns = "e2e-kwok-loop"
	ctx := setup(t, ns)
	// The disruption controller computes the budget's allowed disruptions.
	if _, err := stack.ControllerManager(ctx); err != nil {
		t.Fatal(err)
	}
	ssc, err := stack.StatefulSetController(ctx)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(ssc.Stop)
	kwok, err := stack.Kwok(ctx)
	if err != nil {
		t.Fatal(err)
	}
	// A bare pod of a StatefulSet that does not exist, as other tests make
	// them, on a node that is not kwok's: both must leave it alone.
	bare := ls.BitnamiClusterPod(ns, "sessions-redis-cluster-0", 6379).Node(nodes(t, ctx, 1)[0]).Obj()
	if bare, err = stack.Client().CoreV1().Pods(ns).Create(ctx, bare, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	// Names of this run only: the repairer's log and its state ConfigMap
	// would outlive it into a run with -count.
	run := "kwok-repair-" + strconv.FormatInt(time.Now().UnixNano(), 36)
	var repairer *ls.Replica
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("end of kwok's log:\n%s", kwok.LogTail(40))
			t.Logf("end of the statefulset-controller's log:\n%s", ssc.LogTail(20))
			if repairer != nil {
				t.Logf("end of the repairing regosched's log:\n%s", repairer.LogTail(60))
			}
		}
		if repairer != nil {
			repairer.Stop()
		}
	})
	res, err := ls.RunEvictionLoop(ctx, ls.EvictionLoop{
		Client: stack.Client(), Kwok: kwok, Namespace: ns, Dir: t.TempDir(),
		Regosched: stack.Binary(), Kubeconfig: stack.Cluster().KubeconfigPath(),
		StartRepair: func(ctx context.Context, sc ls.EvictionScene) (string, error) {
			// The stack's regosched recalls the replica's role when its pod
			// comes back only if it read that role before.
			err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, roleWait, true, func(ctx context.Context) (bool, error) {
				got, err := roleLabels(ctx, ns)
				return err == nil && got[sc.Master] == "master/slot-0" && got[sc.Replica] == "replica/slot-0", nil
			})
			if err != nil {
				t.Errorf("the stack's regosched never labelled %s and %s with their roles: %v", sc.Master, sc.Replica, err)
			}
			listen, err := freeAddr()
			if err != nil {
				return "", err
			}
			repairer, err = stack.StartReplicaAt(ctx, run, listen,
				"--redis-roles", "--redis-roles-interval=1s", "--audit-interval=2s",
				"--repair=on", "--repair-cooldown=1s", "--repair-max-per-hour=100", "--repair-timeout=1m",
				"--leader-elect-namespace="+ns, "--redis-roles-configmap=", "--repair-configmap="+run)
			if err != nil {
				return "", err
			}
			return repairer.BaseURL, nil
		},
		Logf: t.Logf,
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("KWOK EVICTION LOOP (extender): %s", res)
	for _, p := range res.Problems() {
		t.Error(p)
	}
	got, err := stack.Client().CoreV1().Pods(ns).Get(ctx, bare.Name, metav1.GetOptions{})
	if err != nil || got.UID != bare.UID || !equality.Semantic.DeepEqual(got.OwnerReferences, bare.OwnerReferences) || got.Status.Phase != corev1.PodPending {
		t.Errorf("the bare pod %s: %v, owners %v, phase %s; want it as created, pending", bare.Name, err, got.OwnerReferences, got.Status.Phase)
	}
}
