//go:build e2e

package redisroles

import (
	"testing"
	"time"

	"k8s.io/client-go/kubernetes/fake"

	"github.com/regosched/regosched/test/localredis"
	"github.com/regosched/regosched/test/localredis/fakeredis"
)

// Forty pods that accept and never answer do not delay the labels of a
// real Redis: after a promotion, its pods follow within a few intervals.
func TestTarpitsDoNotDelayAnsweringPods(t *testing.T) {
	const interval = 200 * time.Millisecond
	ctx := t.Context()
	repl, err := localredis.StartReplication(ctx, localredis.Options{Dir: t.TempDir()}, 1)
	if err != nil {
		t.Fatal(err)
	}
	defer repl.Stop()
	ports := repl.Ports()
	client := fake.NewClientset()
	createPods(t, client, listenerPod("shop", "master", ports[0]), listenerPod("shop", "replica", ports[1]))
	for i := range 40 {
		tarpit, err := fakeredis.Start(nil)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(tarpit.Close)
		createPods(t, client, listenerPod("tenant", "tarpit-"+string(rune('a'+i%26))+string(rune('a'+i/26)), tarpit.Port()))
	}
	runController(t, client, Config{Interval: interval})
	want := map[string]string{"master": "master/", "replica": "replica/"}
	took := waitLabels(t, ctx, client, want)
	t.Logf("labels matched ROLE %v after the controller started", took.Round(time.Millisecond))
	// Let the tarpits fail a few rounds, as they would in a cluster.
	time.Sleep(10 * interval)

	if err := repl.Promote(ctx, ports[1]); err != nil {
		t.Fatal(err)
	}
	took = waitLabels(t, ctx, client, map[string]string{"master": "replica/", "replica": "master/"})
	t.Logf("labels followed the promotion %v after it completed (interval %v, 40 tarpits)", took.Round(time.Millisecond), interval)
	if limit := 3 * interval; took > limit {
		t.Errorf("labels followed after %v, want within %v (3 intervals)", took.Round(time.Millisecond), limit)
	}
}
