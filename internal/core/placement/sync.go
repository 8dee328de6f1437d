package placement

import (
	"context"
	"errors"
	"fmt"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
)

// SyncWithin is WaitForSync for one-shot commands (explain, audit): it
// fails fast and clearly when the API server behind client is unreachable
// or refuses to list pods or nodes (informers would only retry in silence),
// then waits at most timeout for the cache's initial lists.
func (c *Cache) SyncWithin(ctx context.Context, client kubernetes.Interface, timeout time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	one := metav1.ListOptions{Limit: 1}
	if _, err := client.CoreV1().Nodes().List(ctx, one); err != nil {
		return fmt.Errorf("listing nodes from the API server: %w", err)
	}
	if _, err := client.CoreV1().Pods(metav1.NamespaceAll).List(ctx, one); err != nil {
		return fmt.Errorf("listing pods from the API server: %w", err)
	}
	if !c.WaitForSync(ctx) {
		if err := context.Cause(ctx); !errors.Is(err, context.DeadlineExceeded) {
			return fmt.Errorf("waiting for the placement cache: %w", err)
		}
		return fmt.Errorf("the placement cache did not sync with the API server within %s", timeout)
	}
	return nil
}
