package serve

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/prometheus/client_golang/prometheus"
	logtest "github.com/sirupsen/logrus/hooks/test"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes/fake"
	extenderv1 "k8s.io/kube-scheduler/extender/v1"

	"github.com/regosched/regosched/internal/core/bundles"
	"github.com/regosched/regosched/internal/core/placement"
	"github.com/regosched/regosched/internal/core/policy"
	"github.com/regosched/regosched/internal/frontend/decision"
	"github.com/regosched/regosched/internal/frontend/extender"
)

// policyVariant copies the default policy to a new directory at revision
// rev, with edit applied to its data.json.
func policyVariant(t *testing.T, rev string, edit func(string) string) string {
	t.Helper()
	dst := t.TempDir()
	err := filepath.WalkDir("../../../rego", func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel("../../../rego", p)
		if d.IsDir() {
			return os.MkdirAll(filepath.Join(dst, rel), 0o755)
		}
		raw, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		if rel == filepath.Join("regosched", "config", "data.json") {
			raw = []byte(edit(string(raw)))
		}
		return os.WriteFile(filepath.Join(dst, rel), raw, 0o600)
	})
	if err != nil {
		t.Fatal(err)
	}
	manifest := `{"revision": "` + rev + `", "roots": ["regosched"]}`
	if err := os.WriteFile(filepath.Join(dst, ".manifest"), []byte(manifest), 0o600); err != nil {
		t.Fatal(err)
	}
	return dst
}

// TestPolicySwapUnderLoad drives filter requests through the real HTTP
// handler while the active policy is swapped 300 times among two good
// bundles that decide differently and a broken one. Every answer must be
// exactly one good policy's answer, and the active revision always a good
// one.
func TestPolicySwapUnderLoad(t *testing.T) {
	const swaps = 300
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()

	withMasters := policyVariant(t, "with-masters", func(s string) string { return s })
	// Without the redis-masters rule two masters of a cluster may share a node.
	withoutMasters := policyVariant(t, "without-masters", func(s string) string {
		const rule = `{
          "name": "redis-masters",
          "role": "master",
          "peer_role": "master",
          "scope": "cluster"
        },`
		if !strings.Contains(s, rule) {
			t.Fatal("data.json has no redis-masters rule to remove")
		}
		return strings.Replace(s, rule, "", 1)
	})
	broken := policyVariant(t, "broken", func(s string) string { return s })
	if err := os.WriteFile(filepath.Join(broken, "regosched", "broken.rego"), []byte("package regosched.broken\n\nx := {"), 0o600); err != nil {
		t.Fatal(err)
	}
	var opts bundles.Options
	compiled := map[string]*policy.Policy{}
	for _, dir := range []string{withMasters, withoutMasters} {
		p, err := opts.Load(ctx, dir)
		if err != nil {
			t.Fatal(err)
		}
		compiled[p.Revision()] = p
	}

	reg := prometheus.NewRegistry()
	active, err := bundles.NewActive(reg)
	if err != nil {
		t.Fatal(err)
	}
	active.Store(compiled["with-masters"])
	log, _ := logtest.NewNullLogger()
	keys := policy.Describer(active.Load)
	redis := func(name, shard, node string) *corev1.Pod {
		return &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: name, UID: types.UID("uid-" + name), Labels: map[string]string{
				"app.kubernetes.io/name": "redis", "app.kubernetes.io/instance": "cache",
				"app.kubernetes.io/component": "master", "regosched.io/shard": shard,
			}},
			Spec:   corev1.PodSpec{NodeName: node},
			Status: corev1.PodStatus{Phase: corev1.PodRunning},
		}
	}
	var objs []runtime.Object
	nodes := []string{"node-1", "node-2", "node-3"}
	for _, n := range nodes {
		objs = append(objs, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: n}})
	}
	objs = append(objs, redis("cache-0", "0", "node-1"))
	cache, err := placement.New(fake.NewClientset(objs...), keys, log)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { cancel(); cache.Shutdown() }() // the informers stop only once ctx is cancelled
	cache.Start(ctx)
	if !cache.WaitForSync(ctx) {
		t.Fatal("cache did not sync")
	}
	d, err := decision.New(cache, active, log, reg, decision.Options{})
	if err != nil {
		t.Fatal(err)
	}
	h, err := extender.New(extender.Config{
		URLPrefix: "/scheduler", Decider: d, Ready: func() error { return nil }, Registerer: reg, Gatherer: reg, Log: log,
		Version: func() any { return active.Status() },
	})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(h)
	defer srv.Close()

	body, err := json.Marshal(&extenderv1.ExtenderArgs{Pod: redis("cache-1", "1", ""), NodeNames: &nodes})
	if err != nil {
		t.Fatal(err)
	}
	filter := func() (string, error) {
		resp, err := http.Post(srv.URL+"/scheduler/filter", "application/json", bytes.NewReader(body)) //nolint:noctx // test
		if err != nil {
			return "", err
		}
		defer func() { _ = resp.Body.Close() }()
		raw, err := io.ReadAll(resp.Body)
		if err != nil {
			return "", fmt.Errorf("filter: reading the answer: %w", err)
		}
		if resp.StatusCode != http.StatusOK {
			return "", fmt.Errorf("filter: %d %s", resp.StatusCode, raw)
		}
		return string(raw), nil
	}
	revision := func() (string, error) {
		resp, err := http.Get(srv.URL + "/version") //nolint:noctx // test
		if err != nil {
			return "", err
		}
		defer func() { _ = resp.Body.Close() }()
		var st bundles.Status
		if err := json.NewDecoder(resp.Body).Decode(&st); err != nil {
			return "", err
		}
		return st.Revision, nil
	}

	// Each good policy's answer, and that they differ as the rules say.
	want := map[string]string{}
	for rev, p := range compiled {
		active.Store(p)
		if want[rev], err = filter(); err != nil {
			t.Fatal(err)
		}
	}
	var withRes, withoutRes extenderv1.ExtenderFilterResult
	_ = json.Unmarshal([]byte(want["with-masters"]), &withRes)
	_ = json.Unmarshal([]byte(want["without-masters"]), &withoutRes)
	if diff := cmp.Diff([]string{"node-2", "node-3"}, *withRes.NodeNames); diff != "" {
		t.Fatalf("with the redis-masters rule, node-1 must be refused (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(nodes, *withoutRes.NodeNames); diff != "" {
		t.Fatalf("without the redis-masters rule, every node passes (-want +got):\n%s", diff)
	}

	var (
		stop           atomic.Bool
		requests, errs atomic.Int64
		seen           sync.Map // answer revision -> count
		mu             sync.Mutex
		problems       []string
	)
	report := func(format string, a ...any) {
		mu.Lock()
		defer mu.Unlock()
		if len(problems) < 10 {
			problems = append(problems, fmt.Sprintf(format, a...))
		}
	}
	var wg sync.WaitGroup
	for range 3 {
		wg.Go(func() {
			for i := 0; !stop.Load(); i++ {
				got, err := filter()
				requests.Add(1)
				if err != nil {
					errs.Add(1)
					report("request failed: %v", err)
					continue
				}
				switch got {
				case want["with-masters"], want["without-masters"]:
					rev := map[bool]string{true: "with-masters", false: "without-masters"}[got == want["with-masters"]]
					n, _ := seen.LoadOrStore(rev, new(atomic.Int64))
					n.(*atomic.Int64).Add(1)
				default:
					report("answer of neither good policy: %s", got)
				}
				if i%5 == 0 {
					if rev, err := revision(); err != nil || compiled[rev] == nil {
						report("/version revision %q (%v), want a good one", rev, err)
					}
				}
			}
		})
	}

	order := []string{"with-masters", "broken", "without-masters", "broken"}
	for i := range swaps {
		switch rev := order[i%len(order)]; rev {
		case "broken":
			// The same path as a reload: a bundle that fails to load is
			// recorded and never stored.
			_, err := opts.Load(ctx, broken)
			if err == nil {
				t.Fatal("broken bundle accepted")
			}
			active.Failed(err, time.Now())
		default:
			next := compiled[rev]
			if err := cache.SetKeyFunc(ctx, policy.Describer(func() *policy.Policy { return next }), func() { active.Store(next) }); err != nil {
				t.Fatal(err)
			}
			active.Replaced()
		}
		if rev := active.Status().Revision; compiled[rev] == nil {
			t.Errorf("active revision %q after swap %d, want a good one", rev, i)
		}
		time.Sleep(2 * time.Millisecond)
	}
	stop.Store(true)
	wg.Wait()

	for _, p := range problems {
		t.Error(p)
	}
	if errs.Load() != 0 {
		t.Errorf("%d of %d requests failed, want none", errs.Load(), requests.Load())
	}
	for _, rev := range []string{"with-masters", "without-masters"} {
		n, ok := seen.Load(rev)
		if !ok || n.(*atomic.Int64).Load() == 0 {
			t.Errorf("no answer of %s among %d requests: the swaps did not overlap the requests", rev, requests.Load())
		}
	}
	t.Logf("%d requests during %d swaps", requests.Load(), swaps)
}
