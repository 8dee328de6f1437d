package redisroles

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/sirupsen/logrus"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/regosched/regosched/internal/core/policy"
	"github.com/regosched/regosched/test/fixture"
)

// Recall trusts what the API server says of a pod (the controller's
// informer, else the API server itself), never the pod object a /filter
// request carries: a forged request naming the remembered owner recalls
// nothing.
func TestRecallTrustsOnlyTheAPIServer(t *testing.T) {
	pol := defaultPolicy(t)
	client := fake.NewClientset()
	c, err := New(Config{Client: client, Policy: func() *policy.Policy { return pol },
		Registerer: prometheus.NewRegistry(), Log: logrus.New()})
	if err != nil {
		t.Fatal(err)
	}
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
		// unseen: the informer has not seen the API server's pod yet.
		unseen bool
	}{
		{"recreated by its owner", owned, owned, recalled, false},
		// No wait on the informer, which lags on a busy machine: the API
		// server is asked.
		{"recreated, not yet in the informer", owned, owned, recalled, true},
		{"forged UID, not yet in the informer", owned, forgedUID, nil, true},
		{"forged owner, not yet in the informer", ofOther, owned, nil, true},
		{"forged owner, the API's pod has another", ofOther, owned, nil, false},
		{"forged pod, none in the API", nil, owned, nil, false},
		{"forged UID, the API's pod is another incarnation", owned, forgedUID, nil, false},
		{"the API's pod is already labelled", labelled, owned, nil, false},
		{"the request hides the owner the API knows", owned, ofOther, recalled, false},
		// Its role is never guessed: it may have been read from another Redis.
		{"the API's pod is hostNetwork", hostNetwork, owned, nil, false},
		{"the API's pod's IP is its node's", hostIP, owned, nil, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			store := c.pods.GetStore()
			for _, obj := range store.List() {
				if err := store.Delete(obj); err != nil {
					t.Fatal(err)
				}
			}
			pods := client.CoreV1().Pods("shop")
			_ = pods.Delete(t.Context(), "cache-1", metav1.DeleteOptions{})
			if tt.stored != nil {
				if _, err := pods.Create(t.Context(), tt.stored, metav1.CreateOptions{}); err != nil {
					t.Fatal(err)
				}
				if !tt.unseen {
					if err := store.Add(tt.stored); err != nil {
						t.Fatal(err)
					}
				}
			}
			labels, ok := c.Recall(t.Context(), tt.request)
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
