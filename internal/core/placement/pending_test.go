package placement

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	logtest "github.com/sirupsen/logrus/hooks/test"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	kruntime "k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"

	"github.com/regosched/regosched/internal/core/model"
	"github.com/regosched/regosched/test/fixture"
)

// Policies that describe pending pods: distinct origins, of which a
// description made under one is not taken for another's.
var (
	policyA = &model.Origin{Revision: "A"}
	policyB = &model.Origin{Revision: "B"}
)

// describeAs groups by instance, as byInstance does, under the policy by.
func describeAs(by *model.Origin) DescribeFunc {
	return func(ctx context.Context, p *model.Pod) ([]string, *model.Claims, *model.Origin, error) {
		keys, described, err := instanceUnder(by)(ctx, p)
		return keys, described, by, err
	}
}

// startPending runs a Pending over a fake clientset holding objs and waits
// for its initial list.
func startPending(t *testing.T, describe DescribeFunc, objs ...kruntime.Object) (*Pending, *fake.Clientset) {
	t.Helper()
	log, _ := logtest.NewNullLogger()
	client := fake.NewClientset(objs...)
	p, err := NewPending(client, "regosched", describe, log)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	p.Start(ctx)
	t.Cleanup(func() { cancel(); p.Shutdown() })
	syncCtx, syncCancel := context.WithTimeout(ctx, 30*time.Second)
	defer syncCancel()
	if !p.WaitForSync(syncCtx) {
		t.Fatal("pending pods not synced within 30s")
	}
	return p, client
}

func TestPendingDescribed(t *testing.T) {
	master := fixture.MakePod().Namespace("shop").Name("cache-0").Redis("cache", "master", "").Phase(corev1.PodPending).SchedulerName("regosched").Obj()
	p, _ := startPending(t, describeAs(policyA), master)
	asRequested := model.PodFromObject(master)

	relabelled := model.PodFromObject(master)
	relabelled.Labels = model.NewLabels(fixture.RedisLabels("cache", "replica", ""))
	otherPriority := fixture.MakePod().Namespace("shop").Name("cache-0").Redis("cache", "master", "").
		Phase(corev1.PodPending).SchedulerName("regosched").Priority(1000).Model()
	replaced := model.PodFromObject(master)
	replaced.UID = "uid-other"
	type described struct {
		Keys   []string
		Claims string
		OK     bool
	}
	none := described{Claims: claimsView(nil)}
	tests := []struct {
		name string
		pod  *model.Pod
		by   *model.Origin
		want described
	}{
		{"the pod as created", asRequested, policyA, described{[]string{"shop/cache"}, "A: role=master", true}},
		{"under another policy", asRequested, policyB, none},
		// Policies are told apart by identity: two bundles may share a revision.
		{"under another policy of the same revision", asRequested, &model.Origin{Revision: "A"}, none},
		{"labels changed since", relabelled, policyA, none},
		{"priority changed since", otherPriority, policyA, none},
		{"another pod of the same name", replaced, policyA, none},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			keys, c, ok := p.Described(tt.pod, tt.by)
			if diff := cmp.Diff(tt.want, described{keys, claimsView(c), ok}); diff != "" {
				t.Errorf("Described() mismatch (-want +got):\n%s", diff)
			}
		})
	}
}

// TestPendingFollowsThePod: a pod is described again when what a policy
// reads changes, and forgotten once bound or deleted.
func TestPendingFollowsThePod(t *testing.T) {
	ctx := context.Background()
	p, client := startPending(t, describeAs(policyA))
	pods := client.CoreV1().Pods("shop")
	described := func(pod *corev1.Pod) bool {
		_, _, ok := p.Described(model.PodFromObject(pod), policyA)
		return ok
	}

	pod := fixture.MakePod().Namespace("shop").Name("cache-0").Redis("cache", "master", "").Phase(corev1.PodPending).SchedulerName("regosched").Obj()
	if _, err := pods.Create(ctx, pod, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the new pod described", func() bool { return described(pod) })

	pod.Labels = fixture.RedisLabels("cache", "replica", "")
	if _, err := pods.Update(ctx, pod, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the relabelled pod described again", func() bool { return described(pod) })
	if _, c, _ := p.Described(model.PodFromObject(pod), policyA); claimsView(c) != "A: role=replica" {
		t.Errorf("claims after relabelling = %s, want A: role=replica", claimsView(c))
	}

	// The fake API server ignores field selectors: a bound pod still reaches
	// the informer, and must be forgotten.
	pod.Spec.NodeName = "node-1"
	if _, err := pods.Update(ctx, pod, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the bound pod forgotten", func() bool { return p.Len() == 0 })

	other := fixture.MakePod().Namespace("shop").Name("cache-1").Redis("cache", "replica", "").Phase(corev1.PodPending).SchedulerName("regosched").Obj()
	if _, err := pods.Create(ctx, other, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "another pod described", func() bool { return described(other) })
	if err := pods.Delete(ctx, other.Name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the deleted pod forgotten", func() bool { return p.Len() == 0 })
}

// TestPendingSelectsTheProfilesPendingPods: the API server is asked for
// the pending, unfinished pods of the one profile, so that other
// schedulers' and bound pods never reach regosched.
func TestPendingSelectsTheProfilesPendingPods(t *testing.T) {
	_, client := startPending(t, describeAs(policyA))
	var got []string
	for _, a := range client.Actions() {
		if l, ok := a.(k8stesting.ListAction); ok && a.GetResource().Resource == "pods" {
			got = append(got, l.GetListRestrictions().Fields.String())
		}
	}
	want := []string{"spec.nodeName=,spec.schedulerName=regosched,status.phase!=Failed,status.phase!=Succeeded"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("pod list field selectors (-want +got):\n%s", diff)
	}
}

// TestPendingNewPolicy: SetDescribeFunc describes every pending pod again
// before it returns; a pod the policy cannot describe is left to its
// filter call.
func TestPendingNewPolicy(t *testing.T) {
	pods := []kruntime.Object{
		fixture.MakePod().Namespace("shop").Name("cache-0").Redis("cache", "master", "").Phase(corev1.PodPending).SchedulerName("regosched").Obj(),
		fixture.MakePod().Namespace("shop").Name("cache-1").Redis("cache", "replica", "").Phase(corev1.PodPending).SchedulerName("regosched").Obj(),
	}
	p, _ := startPending(t, describeAs(policyA), pods...)
	if p.Len() != 2 {
		t.Fatalf("%d pods described, want 2", p.Len())
	}
	p.SetDescribeFunc(context.Background(), describeAs(policyB))
	for _, o := range pods {
		pod := model.PodFromObject(o.(*corev1.Pod))
		if _, _, ok := p.Described(pod, policyB); !ok {
			t.Errorf("%s not described under the new policy", pod.Key())
		}
		if _, _, ok := p.Described(pod, policyA); ok {
			t.Errorf("%s still described under the old policy", pod.Key())
		}
	}
	p.SetDescribeFunc(context.Background(), func(context.Context, *model.Pod) ([]string, *model.Claims, *model.Origin, error) {
		return nil, nil, &model.Origin{Revision: "C"}, errors.New("broken")
	})
	if p.Len() != 0 {
		t.Errorf("%d descriptions kept after the policy failed on every pod, want 0", p.Len())
	}
}
