package plugin

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/klog/v2"
	fwk "k8s.io/kube-scheduler/framework"

	ls "github.com/regosched/regosched/test/localstack"
)

func TestQueueingHints(t *testing.T) {
	f := newFixture(t)
	pending := redis("cache-2-master", "master", "2", 500, "")
	peer := redis("cache-0-master", "master", "0", 100, "n1")
	stranger := ls.RedisPod("other", "store", "store-0-master", "master", "0")
	stranger.Spec.NodeName = "n1"
	plain := ls.PlainPod(ns, "web")
	plain.Spec.NodeName = "n1"
	joined := plain.DeepCopy()
	joined.Labels = peer.Labels
	tests := []struct {
		name           string
		pod            *corev1.Pod
		oldObj, newObj any
		want           fwk.QueueingHint
	}{
		{"a peer deleted", pending, peer, nil, fwk.Queue},
		{"a peer relabelled", pending, peer, redis("cache-0-master", "replica", "0", 100, "n1"), fwk.Queue},
		{"a pod relabelled into a group of the pod", pending, plain, joined, fwk.Queue},
		{"a pod of another cluster deleted", pending, stranger, nil, fwk.QueueSkip},
		{"a pod in no group deleted", pending, plain, nil, fwk.QueueSkip},
		{"the pending pod in no group", ls.PlainPod(ns, "batch"), peer, nil, fwk.QueueSkip},
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
