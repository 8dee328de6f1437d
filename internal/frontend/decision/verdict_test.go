package decision

import (
	"context"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/prometheus/client_golang/prometheus"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	extenderv1 "k8s.io/kube-scheduler/extender/v1"

	"github.com/regosched/regosched/internal/core/model"
	"github.com/regosched/regosched/test/fixture"
)

// TestVerdictAnswers: Answer copies the passing candidates and leaves the
// request alone; AnswerInPlace, for the owner of the request, gives the same
// answer from the request's own list.
func TestVerdictAnswers(t *testing.T) {
	failed := extenderv1.FailedNodesMap{"n2": "a master of shop/cache is on the node"}
	unresolvable := extenderv1.FailedNodesMap{"n4": "the master of shard 0 is on the node"}
	nodes := func(names ...string) *v1.NodeList {
		l := &v1.NodeList{ListMeta: metav1.ListMeta{ResourceVersion: "7"}}
		for _, n := range names {
			l.Items = append(l.Items, v1.Node{ObjectMeta: metav1.ObjectMeta{Name: n}})
		}
		return l
	}
	tests := []struct {
		name string
		args func() *extenderv1.ExtenderArgs
		want *extenderv1.ExtenderFilterResult
	}{
		{
			name: "node names",
			args: func() *extenderv1.ExtenderArgs {
				return &extenderv1.ExtenderArgs{NodeNames: names("n1", "n2", "n3", "n4", "n5")}
			},
			want: &extenderv1.ExtenderFilterResult{NodeNames: names("n1", "n3", "n5"), FailedNodes: failed, FailedAndUnresolvableNodes: unresolvable},
		},
		{
			name: "full nodes",
			args: func() *extenderv1.ExtenderArgs {
				return &extenderv1.ExtenderArgs{Nodes: nodes("n1", "n2", "n3", "n4", "n5")}
			},
			want: &extenderv1.ExtenderFilterResult{Nodes: nodes("n1", "n3", "n5"), FailedNodes: failed, FailedAndUnresolvableNodes: unresolvable},
		},
		{
			name: "every candidate fails",
			args: func() *extenderv1.ExtenderArgs { return &extenderv1.ExtenderArgs{NodeNames: names("n2", "n4")} },
			want: &extenderv1.ExtenderFilterResult{NodeNames: &[]string{}, FailedNodes: failed, FailedAndUnresolvableNodes: unresolvable},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			args, before := tt.args(), tt.args()
			v := NewFilterAnswer(args, failed, unresolvable)
			if diff := cmp.Diff(tt.want, v.Answer(args)); diff != "" {
				t.Errorf("Answer() mismatch (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(before, args); diff != "" {
				t.Errorf("Answer() changed the request (-before +after):\n%s", diff)
			}
			if diff := cmp.Diff(tt.want, v.AnswerInPlace(args)); diff != "" {
				t.Errorf("AnswerInPlace() mismatch (-want +got):\n%s", diff)
			}
		})
	}
}

// TestPrioritizeScoresOnce: the scores are a sequence over the request's
// candidates that gives them once, and stops when its caller stops.
func TestPrioritizeScoresOnce(t *testing.T) {
	d, _ := newDecider(t, []*model.Pod{
		fixture.MakePod().Namespace("shop").Name("cache-0-master").Redis("cache", "master", "0").Node("node-1").Model(),
		fixture.MakePod().Namespace("shop").Name("cache-1-master").Redis("cache", "master", "1").Node("node-2").Model(),
	}, prometheus.NewRegistry())
	pod := fixture.MakePod().Namespace("shop").Name("cache-0-replica").Redis("cache", "replica", "0").Model()
	args := &extenderv1.ExtenderArgs{Pod: pendingPod(pod), NodeNames: names("node-1", "node-2", "node-3", "node-4")}
	scores, err := d.Prioritize(context.Background(), args)
	if err != nil {
		t.Fatal(err)
	}
	var first []string
	for host := range scores {
		first = append(first, host)
		break
	}
	if diff := cmp.Diff([]string{"node-2"}, first); diff != "" {
		t.Errorf("first score mismatch (-want +got):\n%s", diff)
	}
	for host := range scores {
		t.Errorf("a second range gave %s, want nothing", host)
	}
}
