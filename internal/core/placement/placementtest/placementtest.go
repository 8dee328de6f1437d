// Package placementtest starts placement caches for tests, as
// net/http/httptest starts servers.
package placementtest

import (
	"context"
	"io"
	"testing"

	"github.com/sirupsen/logrus"
	"k8s.io/client-go/kubernetes"

	"github.com/regosched/regosched/internal/core/placement"
)

// Start returns a placement cache over client (a fake clientset, usually)
// that keys describes, started and synced; it stops when tb ends.
func Start(tb testing.TB, client kubernetes.Interface, keys placement.KeyFunc) *placement.Cache {
	tb.Helper()
	log := logrus.New()
	log.SetOutput(io.Discard)
	cache, err := placement.New(client, keys, log)
	if err != nil {
		tb.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	// The informers stop only once ctx is cancelled: cancel, then wait.
	tb.Cleanup(func() { cancel(); cache.Shutdown() })
	cache.Start(ctx)
	if !cache.WaitForSync(ctx) {
		tb.Fatal("the placement cache did not sync")
	}
	return cache
}
