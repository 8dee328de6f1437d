package snapshot

import (
	"path/filepath"
	"slices"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
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
