//go:build e2e

package e2e

import (
	"context"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/regosched/regosched/test/fixture"
	"github.com/regosched/regosched/test/localredis/fakeredis"
	ls "github.com/regosched/regosched/test/localstack"
)

// A tenant's pod whose Redis answers INFO with a header claiming 1 TiB and
// ROLE with 2^32 elements: the real binary stays up, counts a protocol
// error, and leaves the pod's labels as they were.
func TestHostileRedisPodSurvived(t *testing.T) {
	const ns = "e2e-redis-hostile"
	ctx := setup(t, ns)
	n := nodes(t, ctx, 1)
	hostile, err := fakeredis.Start(fakeredis.HostileAnswer)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(hostile.Close)
	// A replica of Bitnami's redis chart (release evil), whose container
	// port named redis is the hostile listener.
	pod := fixture.MakePod().Namespace(ns).Name("evil-redis-replicas-0").Redis("evil", "replica", "").StatefulSetPodName().Label(labelRole, "replica").
		Schedulable().StatefulSet("evil-redis-replicas", ls.BitnamiStatefulSetUID).ContainerPort("redis", int32(hostile.Port())).Obj()
	bind(t, ctx, pod, n[0])

	const sample = `regosched_redis_role_errors_total{reason="protocol"}`
	err = wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, roleWait, true, func(ctx context.Context) (bool, error) {
		if len(hostile.Commands()) == 0 {
			return false, nil
		}
		v, err := stack.Sample(ctx, sample)
		return err == nil && v > 0, nil
	})
	if err != nil {
		t.Fatalf("%s never rose above 0 (commands the listener read: %v)", sample, hostile.Commands())
	}
	select {
	case <-stack.ExtenderProcess().Done():
		t.Fatalf("regosched exited: %v", stack.ExtenderProcess().Err())
	default:
	}
	got, err := stack.Client().CoreV1().Pods(ns).Get(ctx, pod.Name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	// The API server adds labels of its own (PodTopologyLabels copies the
	// node's zone): compared are the labels the pod was created with and
	// every label regosched writes.
	kept := maps.Clone(got.Labels)
	maps.DeleteFunc(kept, func(k, _ string) bool {
		_, created := pod.Labels[k]
		return !created && !strings.HasPrefix(k, "regosched.io/")
	})
	if diff := cmp.Diff(pod.Labels, kept); diff != "" {
		t.Errorf("the hostile pod's labels changed (-want +got):\n%s", diff)
	}
	v, _ := stack.Sample(ctx, sample)
	t.Logf("%s = %d; the listener read %d commands; regosched still serving", sample, v, len(hostile.Commands()))
}

// The shared password (--redis-password-file) reaches a listed namespace's
// Redis and never a listener in another namespace labelled like Redis.
func TestSharedRedisPasswordOnlyToListedNamespaces(t *testing.T) {
	const listed, evil, password = "e2e-redis-pw-listed", "e2e-redis-pw-evil", "shared-e2e-s3cret"
	ctx := setup(t, listed, evil)
	n := nodes(t, ctx, 2)
	file := filepath.Join(t.TempDir(), "redis-password")
	if err := os.WriteFile(file, []byte(password+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	args := append(slices.Clone(deployedArgs), "--redis-password-file="+file,
		"--redis-password-namespaces="+listed, "--redis-password-insecure")
	withVariant(t, ctx, ls.Variant{ExtenderArgs: args})

	good, err := fakeredis.Start(fakeredis.MasterAnswer)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(good.Close)
	recorder, err := fakeredis.Start(fakeredis.MasterAnswer)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(recorder.Close)
	// Replicas of Bitnami's redis chart, whose container port named redis
	// is a listener on 127.0.0.1.
	bind(t, ctx, fixture.MakePod().Namespace(listed).Name("cache-redis-replicas-0").Redis("cache", "replica", "").StatefulSetPodName().
		Schedulable().StatefulSet("cache-redis-replicas", ls.BitnamiStatefulSetUID).ContainerPort("redis", int32(good.Port())).Obj(), n[0])
	bind(t, ctx, fixture.MakePod().Namespace(evil).Name("evil-redis-replicas-0").Redis("evil", "replica", "").StatefulSetPodName().
		Schedulable().StatefulSet("evil-redis-replicas", ls.BitnamiStatefulSetUID).ContainerPort("redis", int32(recorder.Port())).Obj(), n[1])

	// Both are asked and labelled: the listed one with the password, the
	// other without.
	for ns, name := range map[string]string{listed: "cache-redis-replicas-0", evil: "evil-redis-replicas-0"} {
		err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, roleWait, true, func(ctx context.Context) (bool, error) {
			p, err := stack.Client().CoreV1().Pods(ns).Get(ctx, name, metav1.GetOptions{})
			return err == nil && p.Labels[labelRole] == "master", nil
		})
		if err != nil {
			t.Fatalf("%s/%s was never labelled master", ns, name)
		}
	}
	sent := func(f *fakeredis.Server) bool {
		for _, cmd := range f.Commands() {
			if slices.Contains(cmd, password) {
				return true
			}
		}
		return false
	}
	if !sent(good) {
		t.Errorf("the listed namespace's Redis never received the shared password; commands: %v", good.Commands())
	}
	if sent(recorder) {
		t.Errorf("a listener in %s received the shared password", evil)
	}
	var names []string
	for _, cmd := range recorder.Commands() {
		names = append(names, strings.ToUpper(cmd[0]))
	}
	t.Logf("the listener in %s read %s, no password", evil, strings.Join(slices.Compact(names), ", "))
}
