package placement

import (
	"context"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/sirupsen/logrus"
	logtest "github.com/sirupsen/logrus/hooks/test"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	kruntime "k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/regosched/regosched/internal/core/model"
	"github.com/regosched/regosched/test/fixture"
)

const (
	instanceLabel  = "app.kubernetes.io/instance"
	componentLabel = "app.kubernetes.io/component"
	nameLabel      = "app.kubernetes.io/name"
)

// testOrigin stands for the policy that describes the pods of these tests.
var testOrigin = &model.Origin{Revision: "test"}

// labelOf is the value of label key on p, "" when p has none.
func labelOf(p *model.Pod, key string) string {
	v, _ := p.Labels.Get(key)
	return v
}

// roleClaims are the claims of a bound pod of role under origin: a mark
// naming its role, so that a pod that changes role changes claims.
func roleClaims(origin *model.Origin, role string) *model.Claims {
	return model.NewClaims(origin, model.MarksPart, []model.Mark{{Token: "role=" + role, What: "{pod} is a " + role}}, nil, nil, nil)
}

// claimsView is what tests compare of claims: their origin's revision and
// their marks' tokens, readable in a diff.
func claimsView(c *model.Claims) string {
	if c == nil {
		return "<nil>"
	}
	var tokens []string
	c.EachMark(func(token, _ string) bool {
		tokens = append(tokens, token)
		return true
	})
	return c.Origin().Revision + ": " + strings.Join(tokens, ",")
}

// sameClaims compares claims as the cache does, since their fields are
// unexported.
var sameClaims = cmp.Comparer(func(a, b *model.Claims) bool { return a.Same(b) })

// instanceUnder groups pods by their instance label, namespace-qualified,
// and gives them their role's claims under origin.
func instanceUnder(origin *model.Origin) KeyFunc {
	return func(_ context.Context, p *model.Pod) ([]string, *model.Claims, error) {
		inst := labelOf(p, instanceLabel)
		if inst == "" {
			return nil, nil, nil
		}
		return []string{p.Namespace + "/" + inst}, roleClaims(origin, labelOf(p, componentLabel)), nil
	}
}

// byInstance groups pods by instance under testOrigin.
func byInstance(ctx context.Context, p *model.Pod) ([]string, *model.Claims, error) {
	return instanceUnder(testOrigin)(ctx, p)
}

// byInstanceAndRole puts a pod in two groups: its instance, and its role
// within that instance.
func byInstanceAndRole(ctx context.Context, p *model.Pod) ([]string, *model.Claims, error) {
	keys, c, _ := byInstance(ctx, p)
	if len(keys) == 0 {
		return nil, nil, nil
	}
	if role := labelOf(p, componentLabel); role != "" {
		keys = append(keys, keys[0]+"/"+role)
	}
	return keys, c, nil
}

// startCache runs a cache with informers of its own (New) over a fake
// clientset holding objs, waits for its initial sync, and stops it at the
// end of the test.
func startCache(t testing.TB, keys KeyFunc, log logrus.FieldLogger, objs ...kruntime.Object) (*Cache, *fake.Clientset) {
	t.Helper()
	client := fake.NewClientset(objs...)
	c, err := New(client, keys, quiet(log))
	if err != nil {
		t.Fatalf("New() error = %v", err)
	}
	run(t, c, nil)
	return c, client
}

// startShared is startCache for a cache fed by a shared informer factory
// that the test owns, as kube-scheduler's is (NewFromInformers).
func startShared(t testing.TB, keys KeyFunc, log logrus.FieldLogger, objs ...kruntime.Object) (*Cache, *fake.Clientset) {
	t.Helper()
	client := fake.NewClientset(objs...)
	c, factory := newShared(t, client, keys, log)
	run(t, c, factory)
	return c, client
}

// newShared is a cache fed by a new shared informer factory over client,
// neither started.
func newShared(t testing.TB, client kubernetes.Interface, keys KeyFunc, log logrus.FieldLogger) (*Cache, informers.SharedInformerFactory) {
	t.Helper()
	factory := informers.NewSharedInformerFactory(client, 0)
	c, err := NewFromInformers(factory.Core().V1().Pods().Informer(), factory.Core().V1().Nodes().Informer(), keys, quiet(log),
		WithStatefulSets(factory.Apps().V1().StatefulSets().Informer()))
	if err != nil {
		t.Fatalf("NewFromInformers() error = %v", err)
	}
	return c, factory
}

// startFunc starts a cache over a fake clientset holding objs: startCache
// or startShared.
type startFunc func(t testing.TB, keys KeyFunc, log logrus.FieldLogger, objs ...kruntime.Object) (*Cache, *fake.Clientset)

// feeds are the ways a cache is fed, for tests that hold for both.
var feeds = []struct {
	name  string
	start startFunc
}{
	{"own informers", startCache},
	{"shared informers", startShared},
}

// run starts c and owner (the factory of c's informers, nil when c has
// its own), waits for c's initial sync, and stops both at the end of the
// test.
func run(t testing.TB, c *Cache, owner informers.SharedInformerFactory) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	c.Start(ctx)
	if owner != nil {
		owner.Start(ctx.Done())
	}
	t.Cleanup(func() {
		cancel()
		c.Shutdown()
		if owner != nil {
			owner.Shutdown()
		}
	})
	syncCtx, syncCancel := context.WithTimeout(ctx, 30*time.Second)
	defer syncCancel()
	if !c.WaitForSync(syncCtx) {
		t.Fatal("cache did not sync within 30s")
	}
}

// copies deep-copies objs, so that each test case starts from its own.
func copies(objs []kruntime.Object) []kruntime.Object {
	out := make([]kruntime.Object, len(objs))
	for i, o := range objs {
		out[i] = o.DeepCopyObject()
	}
	return out
}

// quiet is log, or a logger that discards when log is nil.
func quiet(log logrus.FieldLogger) logrus.FieldLogger {
	if log == nil {
		l, _ := logtest.NewNullLogger()
		return l
	}
	return log
}

// names returns namespace/name of pods, in order.
func names(pods []*model.Pod) []string {
	out := make([]string, 0, len(pods))
	for _, p := range pods {
		out = append(out, p.Namespace+"/"+p.Name)
	}
	return out
}

// eventually polls cond until it holds or a deadline passes.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	err := wait.PollUntilContextTimeout(context.Background(), 5*time.Millisecond, 30*time.Second, true,
		func(context.Context) (bool, error) { return cond(), nil })
	if err != nil {
		t.Fatalf("waiting for %s: %v", what, err)
	}
}

var barrierSeq atomic.Int64

// flush makes sure every pod event sent before it has been handled: it
// creates a marker pod, waits until the cache indexed it, deletes it and
// waits until it is gone. The informer handles events in order. It needs a
// key function that groups by instance.
func flush(t *testing.T, c *Cache, client kubernetes.Interface) {
	t.Helper()
	ctx := context.Background()
	name := fmt.Sprintf("barrier-%d", barrierSeq.Add(1))
	p := fixture.MakePod().Namespace("zz-barrier").Name(name).Label(instanceLabel, name).Node("node-barrier").Obj()
	key := []string{"zz-barrier/" + name}
	if _, err := client.CoreV1().Pods(p.Namespace).Create(ctx, p, metav1.CreateOptions{}); err != nil {
		t.Fatalf("creating barrier pod: %v", err)
	}
	eventually(t, "barrier pod indexed", func() bool { return len(c.Peers(key, "")) == 1 })
	if err := client.CoreV1().Pods(p.Namespace).Delete(ctx, name, metav1.DeleteOptions{}); err != nil {
		t.Fatalf("deleting barrier pod: %v", err)
	}
	eventually(t, "barrier pod removed", func() bool { return len(c.Peers(key, "")) == 0 })
}
