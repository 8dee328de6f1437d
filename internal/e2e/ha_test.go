//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"

	ls "github.com/regosched/regosched/internal/localstack"
)

// takeoverTimeout bounds a standby's take-over after the leader dies
// without releasing its Lease: the lease lasts 15 s, and the standby retries
// every 2 s.
const takeoverTimeout = 25 * time.Second

// Two replicas with --leader-elect: exactly one is ready and answers the
// verbs, the other answers 503. Killing the leader (SIGKILL, so its Lease
// is not released) makes the standby ready once the Lease lapses.
func TestLeaderElectionOneReadyReplica(t *testing.T) {
	ctx := t.Context()
	lease := fmt.Sprintf("regosched-e2e-%d", time.Now().UnixNano())
	args := []string{"--leader-elect", "--leader-elect-namespace", "default", "--leader-elect-name", lease}
	var replicas []*ls.Replica
	for i := range 2 {
		r, err := stack.StartReplica(ctx, fmt.Sprintf("regosched-ha-%d", i), args...)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(r.Stop)
		replicas = append(replicas, r)
	}
	client := &http.Client{Timeout: 2 * time.Second}
	status := func(r *ls.Replica, method, path string) int {
		var body *strings.Reader
		if method == http.MethodPost {
			body = strings.NewReader(`{"Pod":{"metadata":{"name":"x","namespace":"default"}},"NodeNames":["node-01"]}`)
		} else {
			body = strings.NewReader("")
		}
		req, err := http.NewRequestWithContext(ctx, method, r.BaseURL+path, body)
		if err != nil {
			return 0
		}
		resp, err := client.Do(req)
		if err != nil {
			return 0 // not serving yet, or dead
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	ready := func() []int {
		var idx []int
		for i, r := range replicas {
			if status(r, http.MethodGet, "/readyz") == http.StatusOK {
				idx = append(idx, i)
			}
		}
		return idx
	}
	dump := func() {
		for _, r := range replicas {
			t.Logf("end of %s:\n%s", r.LogPath, r.LogTail(15))
		}
	}

	// One becomes the leader...
	start := time.Now()
	var leader int
	err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, takeoverTimeout, true, func(ctx context.Context) (bool, error) {
		r := ready()
		if len(r) > 1 {
			return false, fmt.Errorf("replicas %v ready at once", r)
		}
		if len(r) == 1 {
			leader = r[0]
			return true, nil
		}
		return false, nil
	})
	if err != nil {
		dump()
		t.Fatalf("waiting for a leader: %v", err)
	}
	t.Logf("replica %d leads after %s", leader, time.Since(start).Round(time.Millisecond))
	standby := 1 - leader

	// ...and stays the only ready one, the other refusing the verbs.
	until := time.Now().Add(3 * time.Second)
	for time.Now().Before(until) {
		if r := ready(); len(r) != 1 || r[0] != leader {
			dump()
			t.Fatalf("ready replicas %v, want only %d", r, leader)
		}
		time.Sleep(200 * time.Millisecond)
	}
	if code := status(replicas[standby], http.MethodPost, "/scheduler/filter"); code != http.StatusServiceUnavailable {
		t.Errorf("standby answered filter with %d, want 503", code)
	}
	if code := status(replicas[leader], http.MethodPost, "/scheduler/filter"); code != http.StatusOK {
		t.Errorf("leader answered filter with %d, want 200", code)
	}

	// Kill the leader the hard way: no lease release.
	killed := time.Now()
	if err := replicas[leader].Kill(); err != nil {
		t.Fatal(err)
	}
	err = wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, takeoverTimeout, true, func(ctx context.Context) (bool, error) {
		r := ready()
		return len(r) == 1 && r[0] == standby, nil
	})
	if err != nil {
		dump()
		t.Fatalf("standby not ready %s after the leader was killed: %v", takeoverTimeout, err)
	}
	t.Logf("standby %d ready %s after the leader was killed", standby, time.Since(killed).Round(time.Millisecond))
	if code := status(replicas[standby], http.MethodPost, "/scheduler/filter"); code != http.StatusOK {
		t.Errorf("new leader answered filter with %d, want 200", code)
	}
}
