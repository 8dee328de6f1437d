package decision

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/prometheus/client_golang/prometheus"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	extenderv1 "k8s.io/kube-scheduler/extender/v1"

	"github.com/regosched/regosched/internal/core/model"
	"github.com/regosched/regosched/test/fixture"
)

// profilePod is p pending for the regosched profile, as created by a user.
func profilePod(p *model.Pod, scheduler string) *v1.Pod {
	return object(p).SchedulerName(scheduler).Phase(v1.PodPending).Obj()
}

// Callers that are not the scheduler get a clear refusal, and the pod stays
// unbound: a pod of another scheduler, a node nobody knows, a replaced pod.
func TestBindRefusesWhatTheSchedulerWouldNotAsk(t *testing.T) {
	ctx := context.Background()
	tests := []struct {
		name    string
		pod     *v1.Pod
		args    func(p *v1.Pod) *extenderv1.ExtenderBindingArgs
		wantErr string
	}{
		{"a default-scheduler pod in kube-system", profilePod(
			fixture.MakePod().Namespace("kube-system").Name("coredns-1").UID("uid-coredns").Model(),
			"default-scheduler",
		),
			func(p *v1.Pod) *extenderv1.ExtenderBindingArgs {
				return &extenderv1.ExtenderBindingArgs{PodName: p.Name, PodNamespace: p.Namespace, PodUID: p.UID, Node: "node-1"}
			}, `is for scheduler "default-scheduler", not for the profile regosched serves ("regosched")`},
		{"a node that does not exist", profilePod(fixture.MakePod().Namespace("logs").Name("es-data-7").Elasticsearch("es", "data").Model(), "regosched"),
			func(p *v1.Pod) *extenderv1.ExtenderBindingArgs {
				return &extenderv1.ExtenderBindingArgs{PodName: p.Name, PodNamespace: p.Namespace, PodUID: p.UID, Node: "node-nowhere"}
			}, `node "node-nowhere" is not known to regosched`},
		{"another UID", profilePod(fixture.MakePod().Namespace("logs").Name("es-data-8").Elasticsearch("es", "data").Model(), "regosched"),
			func(p *v1.Pod) *extenderv1.ExtenderBindingArgs {
				return &extenderv1.ExtenderBindingArgs{PodName: p.Name, PodNamespace: p.Namespace, PodUID: "forged", Node: "node-1"}
			}, "it was replaced"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d, client := newDecider(t, nil, prometheus.NewRegistry())
			d.opts.SchedulerName = "regosched"
			bindLikeAPIServer(client)
			if _, err := client.CoreV1().Pods(tt.pod.Namespace).Create(ctx, tt.pod, metav1.CreateOptions{}); err != nil {
				t.Fatal(err)
			}
			err := d.Bind(ctx, tt.args(tt.pod))
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Fatalf("Bind() error = %v, want one containing %q", err, tt.wantErr)
			}
			got, err := client.CoreV1().Pods(tt.pod.Namespace).Get(ctx, tt.pod.Name, metav1.GetOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if got.Spec.NodeName != "" {
				t.Errorf("the pod was bound to %s", got.Spec.NodeName)
			}
		})
	}
}

// A forged filter call for a real pending master, without its labels,
// leaves no reservation: the scheduler's bind of that master then judges
// the real pod and refuses the node of the other master.
func TestForgedFilterLeavesNoReservationBindTrusts(t *testing.T) {
	ctx := context.Background()
	m0 := fixture.MakePod().Namespace("shop").Name("cache-0-master").Redis("cache", "master", "0").Node("node-1").Model()
	d, client := newDecider(t, []*model.Pod{m0}, prometheus.NewRegistry())
	d.opts.SchedulerName = "regosched"
	bindLikeAPIServer(client)
	m1 := fixture.MakePod().Namespace("shop").Name("cache-1-master").Redis("cache", "master", "1").Model()
	if _, err := client.CoreV1().Pods("shop").Create(ctx, profilePod(m1, "regosched"), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	forged := profilePod(m1, "regosched")
	forged.Labels = nil
	if _, err := d.FilterAnswer(ctx, &extenderv1.ExtenderArgs{Pod: forged, NodeNames: names("node-1")}); err != nil {
		t.Fatal(err)
	}
	if _, _, _, ok := d.placements.Reserved(m1.UID); ok {
		t.Error("the forged filter call left a reservation")
	}
	err := d.Bind(ctx, bindArgs(m1, "node-1"))
	if !errors.Is(err, ErrRefused) {
		t.Fatalf("Bind() error = %v, want a refusal: the real pod is a master", err)
	}
	got, err := client.CoreV1().Pods("shop").Get(ctx, m1.Name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff("", got.Spec.NodeName); diff != "" {
		t.Errorf("node of the master (-want +got):\n%s", diff)
	}

	// The real filter call of that pod does reserve.
	if _, err := d.FilterAnswer(ctx, &extenderv1.ExtenderArgs{Pod: profilePod(m1, "regosched"), NodeNames: names("node-2")}); err != nil {
		t.Fatal(err)
	}
	if _, _, _, ok := d.placements.Reserved(m1.UID); !ok {
		t.Error("the scheduler's own filter call left no reservation")
	}
}

// With no scheduler name, nothing tells the profile's pods from the others':
// filter leaves no reservation and bind refuses every pod, saying why,
// instead of binding whatever pod a caller names.
func TestEmptySchedulerNameTrustsNothing(t *testing.T) {
	ctx := context.Background()
	tests := []struct {
		name string
		pod  *v1.Pod
	}{
		{"a pod of the profile", profilePod(fixture.MakePod().Namespace("logs").Name("es-data-1").Elasticsearch("es", "data").Model(), testScheduler)},
		{"a pod of another scheduler", profilePod(
			fixture.MakePod().Namespace("kube-system").Name("coredns-1").UID("uid-coredns").Model(),
			"default-scheduler",
		)},
		{"a pod with no scheduler name", profilePod(fixture.MakePod().Namespace("logs").Name("es-data-2").Elasticsearch("es", "data").Model(), "")},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d, client := newDecider(t, nil, prometheus.NewRegistry())
			d.opts.SchedulerName = ""
			bindLikeAPIServer(client)
			if _, err := client.CoreV1().Pods(tt.pod.Namespace).Create(ctx, tt.pod, metav1.CreateOptions{}); err != nil {
				t.Fatal(err)
			}
			if _, err := d.FilterAnswer(ctx, &extenderv1.ExtenderArgs{Pod: tt.pod, NodeNames: names("node-1")}); err != nil {
				t.Fatal(err)
			}
			if _, _, _, ok := d.placements.Reserved(tt.pod.UID); ok {
				t.Error("filter left a reservation with no scheduler name to check the pod against")
			}
			err := d.Bind(ctx, &extenderv1.ExtenderBindingArgs{PodName: tt.pod.Name, PodNamespace: tt.pod.Namespace, PodUID: tt.pod.UID, Node: "node-1"})
			if !errors.Is(err, ErrRefused) || !strings.Contains(err.Error(), "no scheduler name") {
				t.Fatalf("Bind() error = %v, want a refusal that names the missing scheduler name", err)
			}
			got, err := client.CoreV1().Pods(tt.pod.Namespace).Get(ctx, tt.pod.Name, metav1.GetOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff("", got.Spec.NodeName); diff != "" {
				t.Errorf("node of the pod (-want +got):\n%s", diff)
			}
		})
	}
}
