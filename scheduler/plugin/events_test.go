package plugin

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/klog/v2"
	fwk "k8s.io/kube-scheduler/framework"

	"github.com/regosched/regosched/test/fixture"
)

func TestQueueingHints(t *testing.T) {
	f := newHarness(t)
	pending := fixture.MakePod().Namespace(ns).Name("cache-2-master").Redis("cache", "master", "2").Priority(500).Obj()
	peer := fixture.MakePod().Namespace(ns).Name("cache-0-master").Redis("cache", "master", "0").Priority(100).Node("n1").Obj()
	stranger := fixture.MakePod().Namespace("other").Name("store-0-master").Redis("store", "master", "0").Schedulable().Node("n1").Obj()
	plain := fixture.MakePod().Namespace(ns).Name("web").Schedulable().Node("n1").Obj()
	joined := plain.DeepCopy()
	joined.Labels = peer.Labels
	tests := []struct {
		name           string
		pod            *corev1.Pod
		oldObj, newObj any
		want           fwk.QueueingHint
	}{
		{"a peer deleted", pending, peer, nil, fwk.Queue},
		{"a peer relabelled", pending, peer, fixture.MakePod().Namespace(ns).Name("cache-0-master").Redis("cache", "replica", "0").Priority(100).Node("n1").Obj(), fwk.Queue},
		{"a pod relabelled into a group of the pod", pending, plain, joined, fwk.Queue},
		{"a pod of another cluster deleted", pending, stranger, nil, fwk.QueueSkip},
		{"a pod in no group deleted", pending, plain, nil, fwk.QueueSkip},
		{"the pending pod in no group", fixture.MakePod().Namespace(ns).Name("batch").Schedulable().Obj(), peer, nil, fwk.QueueSkip},
		{"an object that is no pod", pending, "?", nil, fwk.Queue},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := f.pl.isPeerChange(klog.Background(), tt.pod, tt.oldObj, tt.newObj)
			if err != nil {
				t.Fatal(err)
			}
			if got != tt.want {
				t.Errorf("hint = %v, want %v", got, tt.want)
			}
		})
	}
}
