package plugin

import (
	"context"
	"testing"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/regosched/regosched/test/fixture"
)

// Reserve makes the pod a peer of the next one at once; Unreserve takes
// that back. The pod's pending view reaches the placement cache's informer
// after Reserve, every run: the fake API server ignores the informer's
// field selector, as a real one does not, and that view must not take the
// reserved pod out (it did about one run in 40, when it happened to land
// after Reserve).
func TestReserveAndUnreserve(t *testing.T) {
	f := newHarnessWith(t, options{unprotected: true})
	ctx := context.Background()
	first := fixture.MakePod().Namespace(ns).Name("cache-2-master").Redis("cache", "master", "2").Priority(500).Obj()
	next := fixture.MakePod().Namespace(ns).Name("cache-3-master").Redis("cache", "master", "3").Priority(500).Obj()

	cs, _ := f.preFilter(t, first)
	if st := f.pl.Reserve(ctx, cs, first, "n3"); !st.IsSuccess() {
		t.Fatalf("Reserve = %v", st)
	}
	// Reserved, the pod is not bound yet, and not in the snapshot of this
	// test; the API server has it, pending.
	if _, err := f.client.CoreV1().Pods(ns).Create(ctx, first, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	f.sync(t)
	nextCS, _ := f.preFilter(t, next)
	want := map[string]string{"n1": unsched, "n2": unresolvable, "n3": unresolvable}
	if diff := cmp.Diff(want, f.filter(t, nextCS, next)); diff != "" {
		t.Errorf("after Reserve, Filter (-want +got):\n%s", diff)
	}

	f.pl.Unreserve(ctx, cs, first, "n3")
	nextCS, _ = f.preFilter(t, next)
	want = map[string]string{"n1": unsched, "n2": unresolvable, "n3": ok}
	if diff := cmp.Diff(want, f.filter(t, nextCS, next)); diff != "" {
		t.Errorf("after Unreserve, Filter (-want +got):\n%s", diff)
	}
}
