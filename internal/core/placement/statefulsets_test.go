package placement

import (
	"errors"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	kruntime "k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/utils/ptr"

	"github.com/regosched/regosched/test/fixture"
)

// TestReplicas: both feeds read StatefulSets' replicas (nil is the API
// server's default of one); one the cache does not hold is unknown, never 0.
func TestReplicas(t *testing.T) {
	sets := []*appsv1.StatefulSet{
		{ObjectMeta: metav1.ObjectMeta{Namespace: "logs", Name: "es-master"}, Spec: appsv1.StatefulSetSpec{Replicas: ptr.To[int32](3)}},
		{ObjectMeta: metav1.ObjectMeta{Namespace: "logs", Name: "es-default"}},
	}
	for _, feed := range feeds {
		t.Run(feed.name, func(t *testing.T) {
			c, _ := feed.start(t, byInstance, nil, sets[0], sets[1], fixture.MakeNode().Name("n1").Obj())
			for _, tt := range []struct {
				namespace, name string
				want            int
				known           bool
			}{
				{"logs", "es-master", 3, true},
				{"logs", "es-default", 1, true},
				{"shop", "es-master", 0, false},
				{"logs", "", 0, false},
			} {
				if n, ok := c.Replicas(tt.namespace, tt.name); n != tt.want || ok != tt.known {
					t.Errorf("Replicas(%s, %s) = %d, %t; want %d, %t", tt.namespace, tt.name, n, ok, tt.want, tt.known)
				}
			}
		})
	}
}

// TestStatefulSetsForbidden: credentials that may not list StatefulSets
// leave the cache serving (synced), sizes unknown, not waiting forever.
func TestStatefulSetsForbidden(t *testing.T) {
	client := fake.NewClientset(fixture.MakeNode().Name("n1").Obj())
	client.PrependReactor("list", "statefulsets", func(k8stesting.Action) (bool, kruntime.Object, error) {
		return true, nil, apierrors.NewForbidden(appsv1.Resource("statefulsets"), "", errors.New("no"))
	})
	c, err := New(client, byInstance, quiet(nil))
	if err != nil {
		t.Fatal(err)
	}
	run(t, c, nil) // fails the test unless the cache syncs
	if n, ok := c.Replicas("logs", "es-master"); ok {
		t.Errorf("Replicas() = %d, known; want unknown", n)
	}
}
