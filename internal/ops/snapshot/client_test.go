package snapshot

import (
	"context"
	"path/filepath"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	logtest "github.com/sirupsen/logrus/hooks/test"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/regosched/regosched/internal/core/model"
	"github.com/regosched/regosched/internal/core/placement"
	fx "github.com/regosched/regosched/test/fixture"
)

func loadFixture(t *testing.T) *Snapshot {
	t.Helper()
	s, err := LoadFile(filepath.Join("..", "..", "..", "testdata", "snapshots", "cluster.yaml"), Limits{})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// TestClientListFieldSelectors shows that lists apply field selectors, which
// client-go's fakes ignore: the placement cache lists bound pods with one.
func TestClientListFieldSelectors(t *testing.T) {
	client := loadFixture(t).Client()
	for _, tc := range []struct {
		name, namespace, fields, labels string
		want                            []string
	}{
		{name: "everything", want: []string{
			"search/logs-elasticsearch-data-0", "search/logs-elasticsearch-data-1", "search/logs-elasticsearch-data-2",
			"search/logs-elasticsearch-data-3", "search/logs-elasticsearch-master-0",
			"shop/cache-redis-master-0", "shop/cache-redis-replicas-0", "shop/cache-redis-replicas-1",
		}},
		// The placement cache's selector (internal/core/placement's boundPods).
		{name: "bound and not finished", fields: "spec.nodeName!=,status.phase!=Succeeded,status.phase!=Failed", want: []string{
			"search/logs-elasticsearch-data-0", "search/logs-elasticsearch-data-1", "search/logs-elasticsearch-master-0",
			"shop/cache-redis-master-0", "shop/cache-redis-replicas-0", "shop/cache-redis-replicas-1",
		}},
		{name: "pending", fields: "spec.nodeName=", want: []string{"search/logs-elasticsearch-data-2"}},
		{name: "on a node", fields: "spec.nodeName=node-b", want: []string{
			"search/logs-elasticsearch-data-0", "search/logs-elasticsearch-data-3", "shop/cache-redis-replicas-0",
		}},
		{name: "namespace", namespace: "shop", fields: "spec.nodeName!=node-a", want: []string{
			"shop/cache-redis-replicas-0", "shop/cache-redis-replicas-1",
		}},
		{name: "fields and labels", fields: "status.phase=Running", labels: "app.kubernetes.io/component=data", want: []string{
			"search/logs-elasticsearch-data-0", "search/logs-elasticsearch-data-1",
		}},
		{name: "by name", fields: "metadata.name=cache-redis-master-0,metadata.namespace=shop", want: []string{"shop/cache-redis-master-0"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			list, err := client.CoreV1().Pods(tc.namespace).List(t.Context(), metav1.ListOptions{FieldSelector: tc.fields, LabelSelector: tc.labels})
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, p := range list.Items {
				got = append(got, p.Namespace+"/"+p.Name)
			}
			slices.Sort(got)
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}

func TestClientNodes(t *testing.T) {
	client := loadFixture(t).Client()
	for _, tc := range []struct {
		name, fields string
		want         []string
	}{
		{name: "everything", want: []string{"node-a", "node-b", "node-c"}},
		{name: "by name", fields: "metadata.name=node-b", want: []string{"node-b"}},
		{name: "schedulable", fields: "spec.unschedulable=false", want: []string{"node-a", "node-b", "node-c"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			list, err := client.CoreV1().Nodes().List(t.Context(), metav1.ListOptions{FieldSelector: tc.fields})
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, n := range list.Items {
				got = append(got, n.Name)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}

func TestClientRefuses(t *testing.T) {
	client := loadFixture(t).Client()
	ctx := t.Context()
	t.Run("unsupported field", func(t *testing.T) {
		_, err := client.CoreV1().Pods("").List(ctx, metav1.ListOptions{FieldSelector: "spec.priority=0"})
		if !apierrors.IsBadRequest(err) {
			t.Errorf("error %v, want BadRequest", err)
		}
	})
	t.Run("create", func(t *testing.T) {
		_, err := client.CoreV1().Pods("shop").Create(ctx, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "x"}}, metav1.CreateOptions{})
		if !apierrors.IsForbidden(err) {
			t.Errorf("error %v, want Forbidden", err)
		}
	})
	t.Run("delete", func(t *testing.T) {
		err := client.CoreV1().Pods("shop").Delete(ctx, "cache-redis-master-0", metav1.DeleteOptions{})
		if !apierrors.IsForbidden(err) {
			t.Errorf("error %v, want Forbidden", err)
		}
		if _, err := client.CoreV1().Pods("shop").Get(ctx, "cache-redis-master-0", metav1.GetOptions{}); err != nil {
			t.Errorf("the pod is gone: %v", err)
		}
	})
	t.Run("label node", func(t *testing.T) {
		node, err := client.CoreV1().Nodes().Get(ctx, "node-a", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		node.Labels["x"] = "y"
		if _, err := client.CoreV1().Nodes().Update(ctx, node, metav1.UpdateOptions{}); !apierrors.IsForbidden(err) {
			t.Errorf("error %v, want Forbidden", err)
		}
	})
}

// setsSnapshot holds Elasticsearch masters' and data pods' StatefulSets of
// two namespaces, with one node and one bound master. The data pods'
// StatefulSet carries its pods' labels, as a chart labels it.
func setsSnapshot() *Snapshot {
	data := fx.StatefulSet("search", "es-data", 2, fx.ElasticsearchLabels("es", "data"))
	data.Labels = fx.ElasticsearchLabels("es", "data")
	return &Snapshot{
		Source: "sets.yaml",
		Nodes:  []*corev1.Node{fx.MakeNode().Name("n1").Hostname().Zone("zone-a").Obj()},
		Bound: []*corev1.Pod{fx.MakePod().Namespace("search").Name("es-master-0").Elasticsearch("es", "master").
			StatefulSet("es-master", "uid-es-master").Node("n1").Obj()},
		StatefulSets: []*appsv1.StatefulSet{
			fx.StatefulSet("search", "es-master", 3, fx.ElasticsearchLabels("es", "master")),
			data,
			fx.StatefulSet("logs", "es-master", 5, fx.ElasticsearchLabels("logs", "master")),
		},
	}
}

// TestClientStatefulSets: lists of StatefulSets by namespace, field and
// label, as the API server serves them (a StatefulSet's only field labels
// are its metadata's).
func TestClientStatefulSets(t *testing.T) {
	client := setsSnapshot().Client()
	for _, tc := range []struct {
		name, namespace, fields, labels string
		want                            []string
		wantBadRequest                  bool
	}{
		{name: "everything", want: []string{"logs/es-master=5", "search/es-data=2", "search/es-master=3"}},
		{name: "namespace", namespace: "search", want: []string{"search/es-data=2", "search/es-master=3"}},
		{name: "by name", fields: "metadata.name=es-master", want: []string{"logs/es-master=5", "search/es-master=3"}},
		{name: "by namespace field", fields: "metadata.namespace=logs", want: []string{"logs/es-master=5"}},
		{name: "by label", labels: "app.kubernetes.io/component=data", want: []string{"search/es-data=2"}},
		{name: "unsupported field", fields: "spec.replicas=3", wantBadRequest: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			list, err := client.AppsV1().StatefulSets(tc.namespace).List(t.Context(), metav1.ListOptions{FieldSelector: tc.fields, LabelSelector: tc.labels})
			if tc.wantBadRequest {
				if !apierrors.IsBadRequest(err) {
					t.Errorf("error %v, want BadRequest", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, s := range list.Items {
				got = append(got, s.Namespace+"/"+s.Name+"="+strconv.Itoa(int(*s.Spec.Replicas)))
			}
			slices.Sort(got)
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}

// TestClientStatefulSetGetWatchWrite: a StatefulSet is read by name and
// watched, and never written.
func TestClientStatefulSetGetWatchWrite(t *testing.T) {
	client := setsSnapshot().Client()
	ctx := t.Context()
	sets := client.AppsV1().StatefulSets("search")
	for _, tc := range []struct {
		name         string
		do           func() error
		wantNotFound bool
		wantDenied   bool
	}{
		{name: "get", do: func() error {
			s, err := sets.Get(ctx, "es-master", metav1.GetOptions{})
			if err == nil && *s.Spec.Replicas != 3 {
				t.Errorf("replicas %d, want 3", *s.Spec.Replicas)
			}
			return err
		}},
		{name: "get a StatefulSet of another namespace", wantNotFound: true, do: func() error {
			_, err := client.AppsV1().StatefulSets("shop").Get(ctx, "es-master", metav1.GetOptions{})
			return err
		}},
		{name: "watch", do: func() error {
			w, err := sets.Watch(ctx, metav1.ListOptions{})
			if err == nil {
				w.Stop()
			}
			return err
		}},
		{name: "scale", wantDenied: true, do: func() error {
			s := fx.StatefulSet("search", "es-master", 1, nil)
			_, err := sets.Update(ctx, s, metav1.UpdateOptions{})
			return err
		}},
		{name: "delete", wantDenied: true, do: func() error {
			return sets.Delete(ctx, "es-data", metav1.DeleteOptions{})
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.do()
			switch {
			case tc.wantNotFound:
				if !apierrors.IsNotFound(err) {
					t.Errorf("error %v, want NotFound", err)
				}
			case tc.wantDenied:
				if !apierrors.IsForbidden(err) {
					t.Errorf("error %v, want Forbidden", err)
				}
			case err != nil:
				t.Errorf("error %v, want none", err)
			}
		})
	}
	if s, err := sets.Get(ctx, "es-master", metav1.GetOptions{}); err != nil || *s.Spec.Replicas != 3 {
		t.Errorf("after the refused writes, es-master is %v (error %v), want 3 replicas", s, err)
	}
}

// TestClientFeedsPlacementReplicas: the placement cache's StatefulSet
// informer, over the snapshot's client, knows the replicas that size a
// quorum; without them the group would be counted from its members.
func TestClientFeedsPlacementReplicas(t *testing.T) {
	for _, tc := range []struct {
		name           string
		namespace, set string
		want           int
		wantKnown      bool
	}{
		{name: "a StatefulSet of the snapshot", namespace: "search", set: "es-master", want: 3, wantKnown: true},
		{name: "one of another namespace", namespace: "logs", set: "es-master", want: 5, wantKnown: true},
		{name: "one not in the snapshot", namespace: "search", set: "es-ingest"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			log, _ := logtest.NewNullLogger()
			client := setsSnapshot().Client()
			none := func(context.Context, *model.Pod) ([]string, *model.Claims, error) { return nil, nil, nil }
			cache, err := placement.New(client, none, log)
			if err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithCancel(t.Context())
			cache.Start(ctx)
			// Shutdown waits for the informers, which stop once ctx ends.
			defer func() { cancel(); cache.Shutdown() }()
			if err := cache.SyncWithin(ctx, client, 10*time.Second); err != nil {
				t.Fatal(err)
			}
			n, known := cache.Replicas(tc.namespace, tc.set)
			if diff := cmp.Diff([]any{tc.want, tc.wantKnown}, []any{n, known}); diff != "" {
				t.Errorf("Replicas(%s, %s) (-want +got):\n%s", tc.namespace, tc.set, diff)
			}
		})
	}
}
