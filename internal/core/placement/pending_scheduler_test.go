package placement

import (
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/regosched/regosched/internal/core/model"
)

// TestPendingIgnoresOtherSchedulersPods: a pending pod of another
// scheduler is neither described nor taken for one of the profile's, even
// when the API server lets it through its field selector (a fake one
// ignores field selectors).
func TestPendingIgnoresOtherSchedulersPods(t *testing.T) {
	ours := pendingPod("cache-0", redis("cache", "master"))
	theirs := pendingPod("cache-1", redis("cache", "master"), forScheduler("default-scheduler"))
	p, _ := startPending(t, describeAs(policyA), ours, theirs)
	got := map[string]bool{"cache-0": p.Is(model.PodFromObject(ours)), "cache-1": p.Is(model.PodFromObject(theirs))}
	if diff := cmp.Diff(map[string]bool{"cache-0": true, "cache-1": false}, got); diff != "" {
		t.Errorf("Is() (-want +got):\n%s", diff)
	}
	if _, _, ok := p.Described(model.PodFromObject(theirs), policyA); ok {
		t.Error("Described() found the other scheduler's pod")
	}
}
