package decision

import (
	"context"
	"errors"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/sirupsen/logrus"
	logtest "github.com/sirupsen/logrus/hooks/test"
	"k8s.io/client-go/kubernetes/fake"
	extenderv1 "k8s.io/kube-scheduler/extender/v1"

	"github.com/regosched/regosched/internal/core/model"
	"github.com/regosched/regosched/internal/core/placement"
	"github.com/regosched/regosched/test/fixture"
)

func TestNoPolicy(t *testing.T) {
	cache, err := placement.New(fake.NewClientset(), nil, logrus.New())
	if err != nil {
		t.Fatal(err)
	}
	d, err := New(cache, staticPolicies{}, logrus.New(), prometheus.NewRegistry(), Options{})
	if err != nil {
		t.Fatal(err)
	}
	pod := fixture.MakePod().Namespace("logs").Name("es-data-0").Elasticsearch("es", "data").Model()
	args := &extenderv1.ExtenderArgs{Pod: pendingPod(pod), NodeNames: names("node-1")}
	if _, err := d.FilterAnswer(context.Background(), args); !errors.Is(err, ErrNoPolicy) {
		t.Errorf("Filter() error = %v, want ErrNoPolicy", err)
	}
	if _, err := d.PrioritizeList(context.Background(), args); !errors.Is(err, ErrNoPolicy) {
		t.Errorf("Prioritize() error = %v, want ErrNoPolicy", err)
	}
}

// TestDenialsAreLogged: every hard denial leaves a structured decision log
// entry (pod, node, rule, reason, peer, policy revision), in filter and in
// bind's commit-time check alike.
func TestDenialsAreLogged(t *testing.T) {
	d, client := newDecider(t,
		[]*model.Pod{fixture.MakePod().Namespace("logs").Name("es-data-0").Elasticsearch("es", "data").Node("node-1").Model()},
		prometheus.NewRegistry(),
	)
	bindLikeAPIServer(client)
	log, hook := logtest.NewNullLogger()
	d.log = log
	if err := d.newJudge(nil); err != nil {
		t.Fatal(err)
	}
	pending := fixture.MakePod().Namespace("logs").Name("es-data-1").Elasticsearch("es", "data").Model()
	createPending(t, client, pending)
	if _, err := d.FilterAnswer(context.Background(), &extenderv1.ExtenderArgs{
		Pod: pendingPod(pending), NodeNames: names("node-1", "node-2"),
	}); err != nil {
		t.Fatal(err)
	}
	if err := d.Bind(context.Background(), bindArgs(pending, "node-1")); !errors.Is(err, ErrRefused) {
		t.Fatalf("Bind() error = %v, want ErrRefused", err)
	}
	const reason = "elasticsearch: data logs/es-data-0 of cluster es already on this node"
	revision := d.policies.Load().Revision()
	want := []logrus.Fields{
		{"verb": "filter", "pod": "logs/es-data-1", "node": "node-1", "rule": "elasticsearch-data", "reason": reason,
			"peer": "logs/es-data-0", "resolvable": false, "policyRevision": revision},
		{"verb": "bind", "pod": "logs/es-data-1", "node": "node-1", "rule": "elasticsearch-data", "reason": reason,
			"peer": "logs/es-data-0", "resolvable": false, "policyRevision": revision},
	}
	var got []logrus.Fields
	for _, e := range hook.AllEntries() {
		if e.Message == "denied" {
			if e.Level != logrus.InfoLevel {
				t.Errorf("denial logged at %v, want info", e.Level)
			}
			got = append(got, e.Data)
		}
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("decision log (-want +got):\n%s", diff)
	}
}
