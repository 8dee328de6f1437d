package redisroles

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/sirupsen/logrus"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/regosched/regosched/internal/core/policy"
	"github.com/regosched/regosched/test/fixture"
)

// The source annotation follows what last confirmed the labels: a
// remembered role that Redis confirms is from Redis, though no label
// changes (it stayed "remembered", against its documented meaning).
func TestWriteSaysWhereTheRoleCameFrom(t *testing.T) {
	pol := defaultPolicy(t)
	labels, _ := pol.LiveLabels()
	tests := []struct {
		name       string
		role       string // the pod's role label; "" none
		source     string // its annotation; "" none
		obs        Observation
		wantRole   string
		wantSource string
		wantChange float64
	}{
		{"remembered, then confirmed", "replica", "remembered", Observation{Role: Replica}, "replica", "redis", 0},
		{"confirmed again: nothing written", "replica", "redis", Observation{Role: Replica}, "replica", "redis", 0},
		{"labels from elsewhere, confirmed", "master", "", Observation{Role: Master}, "master", "redis", 0},
		{"remembered, then changed", "replica", "remembered", Observation{Role: Master}, "master", "redis", 1},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			w := fixture.MakePod().Namespace("shop").Name("cache-0").UID("cache-0-uid")
			if tc.role != "" {
				w = w.Label(labels.Role, tc.role)
			}
			pod := w.Obj()
			if tc.source != "" {
				pod.Annotations = map[string]string{SourceAnnotation: tc.source}
			}
			client := fake.NewClientset(pod)
			c, err := New(Config{Client: client, Policy: func() *policy.Policy { return pol },
				Registerer: prometheus.NewRegistry(), Log: logrus.New()})
			if err != nil {
				t.Fatal(err)
			}
			stripped, err := stripPod(pod)
			if err != nil {
				t.Fatal(err)
			}
			c.write(t.Context(), infoOf(stripped.(*corev1.Pod)), labels, tc.obs, "redis", logrus.New())
			got, err := client.CoreV1().Pods("shop").Get(t.Context(), "cache-0", metav1.GetOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff([2]string{tc.wantRole, tc.wantSource}, [2]string{got.Labels[labels.Role], got.Annotations[SourceAnnotation]}); diff != "" {
				t.Errorf("role and source (-want +got):\n%s", diff)
			}
			if n := testutil.ToFloat64(c.changesTotal); n != tc.wantChange {
				t.Errorf("regosched_redis_role_changes_total = %v, want %v", n, tc.wantChange)
			}
		})
	}
}
