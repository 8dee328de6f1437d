package placement

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"

	"github.com/regosched/regosched/internal/core/model"
	"github.com/regosched/regosched/test/fixture"
)

// TestPendingIgnoresOtherSchedulersPods: a pending pod of another
// scheduler is neither described nor taken for one of the profile's, even
// when the API server lets it through its field selector (a fake one
// ignores field selectors).
func TestPendingIgnoresOtherSchedulersPods(t *testing.T) {
	ours := fixture.MakePod().Namespace("shop").Name("cache-0").Redis("cache", "master", "").Phase(corev1.PodPending).SchedulerName("regosched").Obj()
	theirs := fixture.MakePod().Namespace("shop").Name("cache-1").Redis("cache", "master", "").
		Phase(corev1.PodPending).SchedulerName("default-scheduler").Obj()
	p, _ := startPending(t, describeAs(policyA), ours, theirs)
	got := map[string]bool{"cache-0": p.Is(model.PodFromObject(ours)), "cache-1": p.Is(model.PodFromObject(theirs))}
	if diff := cmp.Diff(map[string]bool{"cache-0": true, "cache-1": false}, got); diff != "" {
		t.Errorf("Is() (-want +got):\n%s", diff)
	}
	if _, _, ok := p.Described(model.PodFromObject(theirs), policyA); ok {
		t.Error("Described() found the other scheduler's pod")
	}
}
