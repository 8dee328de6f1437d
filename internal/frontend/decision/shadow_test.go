package decision

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/prometheus/client_golang/prometheus"
	logtest "github.com/sirupsen/logrus/hooks/test"
	extenderv1 "k8s.io/kube-scheduler/extender/v1"

	"github.com/regosched/regosched/internal/core/model"
	"github.com/regosched/regosched/internal/core/policy/policytest"
	"github.com/regosched/regosched/internal/ops/shadow"
	"github.com/regosched/regosched/test/fixture"
)

// TestShadowNeverChangesTheAnswer: a shadow policy that denies more is
// counted and logged, and filter answers as without it.
func TestShadowNeverChangesTheAnswer(t *testing.T) {
	candidates := []string{"node-1", "node-2", "node-3", "node-4"}
	tests := []struct {
		name             string
		pod              *model.Pod
		peers            []*model.Pod
		wantDisagreement float64
	}{
		{
			name: "the shadow also denies another shard's replica",
			pod:  fixture.MakePod().Namespace("shop").Name("cache-0-master").Redis("cache", "master", "0").Model(),
			peers: []*model.Pod{
				fixture.MakePod().Namespace("shop").Name("cache-1-master").Redis("cache", "master", "1").Node("node-2").Model(),
				fixture.MakePod().Namespace("shop").Name("cache-1-replica").Redis("cache", "replica", "1").Node("node-3").Model(),
			},
			// node-2 both deny; node-3 the shadow alone.
			wantDisagreement: 1,
		},
		{
			name:             "both allow a pod without peers",
			pod:              fixture.MakePod().Namespace("shop").Name("cache-0-master").Redis("cache", "master", "0").Model(),
			wantDisagreement: 0,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctx := context.Background()
			args := func() *extenderv1.ExtenderArgs {
				return &extenderv1.ExtenderArgs{Pod: pendingPod(tt.pod), NodeNames: names(candidates...)}
			}
			plain, _ := newDecider(t, tt.peers, prometheus.NewRegistry())
			want, err := plain.FilterAnswer(ctx, args())
			if err != nil {
				t.Fatal(err)
			}

			reg := prometheus.NewRegistry()
			log, hook := logtest.NewNullLogger()
			sh, err := shadow.New(shadow.Config{
				Policies: staticPolicies{policytest.Variant(t, policytest.KeepClusterApart)}, Nodes: fixture.Nodes{},
				Registerer: reg, Log: log,
			})
			if err != nil {
				t.Fatal(err)
			}
			rctx, cancel := context.WithCancel(ctx)
			done := make(chan struct{})
			go func() { sh.Run(rctx); close(done) }()
			t.Cleanup(func() { cancel(); <-done })
			shadowed, _ := newDeciderWith(t, tt.peers, prometheus.NewRegistry(), Options{Shadow: sh})
			got, err := shadowed.FilterAnswer(ctx, args())
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("FilterAnswer() with a shadow (-want +got):\n%s", diff)
			}

			deadline := time.Now().Add(5 * time.Second)
			for counter(t, reg, "regosched_shadow_disagreements_total", "verb", "filter") < tt.wantDisagreement && time.Now().Before(deadline) {
				time.Sleep(5 * time.Millisecond)
			}
			if got := counter(t, reg, "regosched_shadow_disagreements_total", "verb", "filter"); got != tt.wantDisagreement {
				t.Errorf("disagreements = %v, want %v", got, tt.wantDisagreement)
			}
			var lines []string
			for _, e := range hook.AllEntries() {
				lines = append(lines, fmt.Sprintf("%s %s active=%s shadow-denies=%t", e.Data["pod"], e.Data["node"], e.Data["active"],
					strings.HasPrefix(fmt.Sprint(e.Data["shadow"]), "denied: ")))
			}
			var wantLines []string
			if tt.wantDisagreement > 0 {
				wantLines = []string{"shop/cache-0-master node-3 active=allowed shadow-denies=true"}
			}
			if diff := cmp.Diff(wantLines, lines); diff != "" {
				t.Errorf("log (-want +got):\n%s", diff)
			}
		})
	}
}
