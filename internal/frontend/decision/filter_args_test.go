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

// nodeList is the Node objects a scheduler without nodeCacheCapable sends
// for names.
func nodeList(names ...string) *v1.NodeList {
	l := &v1.NodeList{ListMeta: metav1.ListMeta{ResourceVersion: "7"}}
	for _, n := range names {
		l.Items = append(l.Items, *fixture.MakeNode().Name(n).Labels(zones[n]).Obj())
	}
	return l
}

// keptNames is the candidates a filter result keeps, in either form.
func keptNames(r *extenderv1.ExtenderFilterResult) []string {
	switch {
	case r.NodeNames != nil:
		return *r.NodeNames
	case r.Nodes != nil:
		var out []string
		for _, n := range r.Nodes.Items {
			out = append(out, n.Name)
		}
		return out
	}
	return nil
}

// overwrite writes over every entry of r's kept list, as a caller that owns
// the result may.
func overwrite(r *extenderv1.ExtenderFilterResult) {
	if r.NodeNames != nil {
		for i := range *r.NodeNames {
			(*r.NodeNames)[i] = "overwritten"
		}
	}
	if r.Nodes != nil {
		for i := range r.Nodes.Items {
			r.Nodes.Items[i].Name = "overwritten"
		}
	}
}

// TestFilterLeavesArgsAsTheyCame: Filter keeps its candidates in a list of
// its own, so that the caller may still read (and recycle) the request's
// list after the decision, whatever the result's owner does with it.
func TestFilterLeavesArgsAsTheyCame(t *testing.T) {
	candidates := []string{"node-1", "node-2", "node-3", "node-4"}
	// es-data-1 may not share a node with its peers on node-1 and node-3:
	// kept candidates that do not start the list would be moved in place.
	peers := []*model.Pod{
		fixture.MakePod().Namespace("logs").Name("es-data-0").Elasticsearch("es", "data").Node("node-1").Model(),
		fixture.MakePod().Namespace("logs").Name("es-data-2").Elasticsearch("es", "data").Node("node-3").Model(),
	}
	pod := pendingPod(fixture.MakePod().Namespace("logs").Name("es-data-1").Elasticsearch("es", "data").Model())
	tests := []struct {
		name     string
		peers    []*model.Pod
		opts     Options
		args     *extenderv1.ExtenderArgs
		wantKept []string
	}{
		{
			name:     "node names, some failed",
			peers:    peers,
			args:     &extenderv1.ExtenderArgs{Pod: pod, NodeNames: names(candidates...)},
			wantKept: []string{"node-2", "node-4"},
		},
		{
			name:     "nodes, some failed",
			peers:    peers,
			args:     &extenderv1.ExtenderArgs{Pod: pod, Nodes: nodeList(candidates...)},
			wantKept: []string{"node-2", "node-4"},
		},
		{
			name:     "node names, every candidate kept",
			args:     &extenderv1.ExtenderArgs{Pod: pod, NodeNames: names(candidates...)},
			wantKept: candidates,
		},
		{
			name:     "nodes, every candidate kept",
			args:     &extenderv1.ExtenderArgs{Pod: pod, Nodes: nodeList(candidates...)},
			wantKept: candidates,
		},
		{
			// node-4 shares zone-a with the peer on node-1: soft rules demote it.
			name:     "node names, soft rules in filter",
			peers:    peers,
			opts:     Options{SoftInFilter: true},
			args:     &extenderv1.ExtenderArgs{Pod: pod, NodeNames: names(candidates...)},
			wantKept: []string{"node-2"},
		},
		{
			name:     "node names, every candidate failed",
			peers:    peers,
			args:     &extenderv1.ExtenderArgs{Pod: pod, NodeNames: names("node-1", "node-3")},
			wantKept: []string{},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d, _ := newDeciderWith(t, tt.peers, prometheus.NewRegistry(), tt.opts)
			before := tt.args.DeepCopy()
			got, err := d.FilterAnswer(context.Background(), tt.args)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(before, tt.args); diff != "" {
				t.Errorf("args after Filter() (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tt.wantKept, keptNames(got)); diff != "" {
				t.Errorf("Filter() kept (-want +got):\n%s", diff)
			}
			overwrite(got)
			if diff := cmp.Diff(before, tt.args); diff != "" {
				t.Errorf("args after writing over the result (-want +got):\n%s", diff)
			}
		})
	}
}
