package redisroles

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/sirupsen/logrus"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/regosched/regosched/internal/core/policy"
	"github.com/regosched/regosched/test/fixture"
)

// Recall trusts what the API server says of a pod (the controller's
// informer), never the pod object a /filter request carries: a forged
// request naming the remembered owner recalls nothing.
func TestRecallTrustsOnlyTheAPIServer(t *testing.T) {
	pol := defaultPolicy(t)
	c, err := New(Config{Client: fake.NewClientset(), Policy: func() *policy.Policy { return pol },
		Registerer: prometheus.NewRegistry(), Log: logrus.New()})
	if err != nil {
		t.Fatal(err)
	}
	c.recallWait = 20 * time.Millisecond
	c.memory.set("shop", "cache-1", remembered{Role: Master, Shard: "slot-0", Owner: "sts", Seen: time.Now()})
	chart := map[string]string{"app.kubernetes.io/name": "redis", "app.kubernetes.io/instance": "cache"}
	recalled := map[string]string{"app.kubernetes.io/name": "redis", "app.kubernetes.io/instance": "cache",
		"regosched.io/role": "master", "regosched.io/shard": "slot-0"}
	// cache-1 of StatefulSet sts, as recreated, and as forged or changed.
	owned := fixture.MakePod().Namespace("shop").Name("cache-1").UID("cache-1-uid").Labels(chart).StatefulSet("cache", "sts").Obj()
	ofOther := fixture.MakePod().Namespace("shop").Name("cache-1").UID("cache-1-uid").Labels(chart).StatefulSet("cache", "other").Obj()
	forgedUID := fixture.MakePod().Namespace("shop").Name("cache-1").UID("forged").Labels(chart).StatefulSet("cache", "sts").Obj()
	hostNetwork := fixture.MakePod().Namespace("shop").Name("cache-1").UID("cache-1-uid").Labels(chart).StatefulSet("cache", "sts").Obj()
	hostNetwork.Spec.HostNetwork = true
	hostIP := fixture.MakePod().Namespace("shop").Name("cache-1").UID("cache-1-uid").Labels(chart).StatefulSet("cache", "sts").PodIP("10.0.0.1").Obj()
	hostIP.Status.HostIP = "10.0.0.1"
	labelled := fixture.MakePod().Namespace("shop").Name("cache-1").UID("cache-1-uid").Label("regosched.io/role", "replica").StatefulSet("cache", "sts").Obj()
	tests := []struct {
		name    string
		stored  *corev1.Pod // what the API server says; nil: no such pod
		request *corev1.Pod
		want    map[string]string // nil: no recall
	}{
		{"recreated by its owner", owned, owned, recalled},
		{"forged owner, the API's pod has another", ofOther, owned, nil},
		{"forged pod, none in the API", nil, owned, nil},
		{"forged UID, the API's pod is another incarnation", owned, forgedUID, nil},
		{"the API's pod is already labelled", labelled, owned, nil},
		{"the request hides the owner the API knows", owned, ofOther, recalled},
		// Its role is never guessed: it may have been read from another Redis.
		{"the API's pod is hostNetwork", hostNetwork, owned, nil},
		{"the API's pod's IP is its node's", hostIP, owned, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			store := c.pods.GetStore()
			for _, obj := range store.List() {
				if err := store.Delete(obj); err != nil {
					t.Fatal(err)
				}
			}
			if tt.stored != nil {
				if err := store.Add(tt.stored); err != nil {
					t.Fatal(err)
				}
			}
			labels, ok := c.Recall(tt.request)
			var got map[string]string
			if ok {
				got = labels.Map()
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("Recall() mismatch (-want +got):\n%s", diff)
			}
		})
	}
}
