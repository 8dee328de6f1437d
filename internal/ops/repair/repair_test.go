package repair

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	logtest "github.com/sirupsen/logrus/hooks/test"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"

	"github.com/regosched/regosched"
	"github.com/regosched/regosched/internal/core/bundles"
	"github.com/regosched/regosched/internal/core/placement"
	"github.com/regosched/regosched/internal/core/placement/placementtest"
	"github.com/regosched/regosched/internal/core/policy"
	"github.com/regosched/regosched/internal/ops/audit"
)

func TestClusterHealthy(t *testing.T) {
	ok := "cluster_state:ok\r\ncluster_slots_assigned:16384\r\ncluster_slots_ok:16384\r\ncluster_slots_pfail:0\r\n"
	tests := []struct {
		name, info, want string
	}{
		{"healthy", ok, ""},
		{"cluster_state:fail", strings.Replace(ok, "cluster_state:ok", "cluster_state:fail", 1), `cluster_state is "fail", not ok`},
		{"slots unassigned", strings.Replace(ok, "assigned:16384", "assigned:16000", 1), "16000 of 16384 slots assigned"},
		{"a master failing", strings.Replace(ok, "slots_ok:16384", "slots_ok:10923", 1), "10923 served by healthy nodes"},
		{"no slot counts", "cluster_state:ok\r\n", "lacks cluster_slots_assigned"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := clusterHealthy(live{cluster: parseInfo(tc.info)})
			if (tc.want == "") != (got == "") || !strings.Contains(got, tc.want) {
				t.Errorf("clusterHealthy() = %q, want %q", got, tc.want)
			}
		})
	}
}

func TestInSync(t *testing.T) {
	master := live{replication: parseInfo("# Replication\r\nrole:master\r\nmaster_repl_offset:5000\r\n")}
	replica := func(fields string) live {
		return live{replication: parseInfo("role:slave\r\n" + fields)}
	}
	tests := []struct {
		name    string
		replica live
		maxLag  int64
		want    string
	}{
		{"in sync", replica("master_link_status:up\r\nslave_repl_offset:5000\r\n"), 0, ""},
		{"within the lag", replica("master_link_status:up\r\nslave_repl_offset:4000\r\n"), 1000, ""},
		{"behind", replica("master_link_status:up\r\nslave_repl_offset:3999\r\n"), 1000, "1001 bytes behind"},
		{"link down", replica("master_link_status:down\r\nslave_repl_offset:5000\r\n"), 1000, `link to the master is "down"`},
		{"full sync", replica("master_link_status:up\r\nmaster_sync_in_progress:1\r\nslave_repl_offset:5000\r\n"), 1000, "full sync"},
		{"a master", live{replication: parseInfo("role:master\r\nmaster_repl_offset:5000\r\n")}, 1000, `role "master"`},
		{"no offset", replica("master_link_status:up\r\n"), 1000, "lacks slave_repl_offset"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := inSync(tc.replica, master, tc.maxLag)
			if (tc.want == "") != (got == "") || !strings.Contains(got, tc.want) {
				t.Errorf("inSync() = %q, want %q", got, tc.want)
			}
		})
	}
}

func TestHoldReason(t *testing.T) {
	now := time.Date(2026, 12, 6, 12, 0, 0, 0, time.UTC)
	r := &Repairer{cfg: Config{Cooldown: 2 * time.Minute, MaxPerHour: 2}}
	failover := Step{Cluster: "c", Action: Failover}
	evict := Step{Cluster: "c", Action: Evict}
	tests := []struct {
		name string
		st   state
		step Step
		want string
	}{
		{"nothing holds", state{}, failover, ""},
		{"cooldown after a role change", state{Failovers: map[string]time.Time{"c": now.Add(-time.Minute)}}, failover, "within the cooldown"},
		{"cooldown over", state{Failovers: map[string]time.Time{"c": now.Add(-3 * time.Minute)}}, failover, ""},
		{"Redis's vote window outlasts the cooldown", state{Failovers: map[string]time.Time{"c": now.Add(-3 * time.Minute)}},
			Step{Cluster: "c", Action: Failover, settle: 4 * time.Minute}, "within the cooldown of 4m0s"},
		{"cooldown of another cluster", state{Failovers: map[string]time.Time{"d": now}}, failover, ""},
		{"an eviction moves no role", state{Failovers: map[string]time.Time{"c": now}}, evict, ""},
		{"backing off", state{Backoff: map[string]backoff{"c": {Until: now.Add(time.Minute), Failures: 2}}}, evict, "backing off"},
		{"max per hour", state{Done: []record{{Started: now.Add(-50 * time.Minute)}, {Started: now.Add(-10 * time.Minute)}}}, evict, "2 repairs were started in the last hour"},
		{"an older repair does not count", state{Done: []record{{Started: now.Add(-70 * time.Minute)}, {Started: now.Add(-10 * time.Minute)}}}, evict, ""},
		{"the one in flight counts", state{Done: []record{{Started: now.Add(-10 * time.Minute)}}, InFlight: &inFlight{Started: now}}, evict, "2 repairs"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := r.holdReason(&tc.st, newBudget(&tc.st, nil, r.cfg.MaxPerHour, now), tc.step, now)
			if (tc.want == "") != (got == "") || !strings.Contains(got, tc.want) {
				t.Errorf("holdReason() = %q, want %q", got, tc.want)
			}
		})
	}
}

// harness is a Repairer and an Auditor over a real placement cache fed by
// a fake clientset that serves evictions.
type harness struct {
	client   *fake.Clientset
	policy   *policy.Policy
	cache    *placement.Cache
	auditor  *audit.Auditor
	recorder *recorder
	reg      *prometheus.Registry
	now      time.Time

	mu sync.Mutex
	// evicted are the evictions sent for real; dryRuns those only asked.
	evicted, dryRuns []string
	// refuse makes every eviction fail as a PodDisruptionBudget would;
	// linger accepts it and leaves the pod, as a stuck kubelet would.
	refuse, linger bool
}

const stateNS = "regosched-system"

// defaultPolicy is the policy regosched ships.
func defaultPolicy(tb testing.TB) *policy.Policy {
	tb.Helper()
	pol, err := bundles.Options{}.LoadFS(context.Background(), regosched.DefaultPolicy(), "default")
	if err != nil {
		tb.Fatal(err)
	}
	return pol
}

func newHarness(t *testing.T, objs ...runtime.Object) *harness {
	t.Helper()
	pol := defaultPolicy(t)
	current := func() *policy.Policy { return pol }
	log, _ := logtest.NewNullLogger()
	f := &harness{client: fake.NewClientset(objs...), policy: pol, recorder: &recorder{}, reg: prometheus.NewRegistry(),
		now: time.Date(2026, 12, 6, 12, 0, 0, 0, time.UTC)}
	f.client.PrependReactor("create", "pods", func(a k8stesting.Action) (bool, runtime.Object, error) {
		if a.GetSubresource() != "eviction" {
			return false, nil, nil
		}
		e := a.(k8stesting.CreateAction).GetObject().(*policyv1.Eviction)
		f.mu.Lock()
		defer f.mu.Unlock()
		if f.refuse {
			return true, nil, apierrors.NewTooManyRequests("Cannot evict pod as it would violate the pod's disruption budget.", 0)
		}
		if len(e.DeleteOptions.DryRun) > 0 {
			f.dryRuns = append(f.dryRuns, e.Namespace+"/"+e.Name)
			return true, nil, nil
		}
		f.evicted = append(f.evicted, e.Namespace+"/"+e.Name)
		if f.linger {
			return true, nil, nil
		}
		return true, nil, f.client.Tracker().Delete(schema.GroupVersionResource{Version: "v1", Resource: "pods"}, e.Namespace, e.Name)
	})
	f.cache = placementtest.Start(t, f.client, policy.Describer(current))
	var err error
	if f.auditor, err = audit.New(audit.Config{Cache: f.cache, Policies: current, Log: log}); err != nil {
		t.Fatal(err)
	}
	return f
}

// repairer is a Repairer of f in mode, as a leader would run it.
func (f *harness) repairer(t *testing.T, mode Mode) *Repairer {
	t.Helper()
	log, _ := logtest.NewNullLogger()
	r, err := New(Config{Mode: mode, Cache: f.cache, Policies: func() *policy.Policy { return f.policy }, Kube: f.client,
		Recorder: f.recorder, Namespace: stateNS, MaxPerHour: 6, Timeout: time.Minute, Cooldown: time.Minute,
		Log: log, Registerer: f.reg, Now: func() time.Time { return f.now }})
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// pass runs an audit pass, then r's pass on its report.
func (f *harness) pass(t *testing.T, r *Repairer) audit.Report {
	t.Helper()
	report, err := f.auditor.Run(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	r.Pass(context.Background(), report)
	return report
}

func (f *harness) evictions() (evicted, dryRuns []string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]string(nil), f.evicted...), append([]string(nil), f.dryRuns...)
}

func (f *harness) state(t *testing.T) *state {
	t.Helper()
	st, err := store{kube: f.client, namespace: stateNS, name: DefaultConfigMap}.load(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return st
}

func (f *harness) waitGone(t *testing.T, uid types.UID) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(time.Millisecond) {
		if _, ok := f.cache.PodByUID(uid); !ok {
			return
		}
		if time.Now().After(deadline) {
			t.Fatal("the placement cache did not drop the evicted pod")
		}
	}
}

// recorder keeps the Events it is given.
type recorder struct {
	mu     sync.Mutex
	events []string // "reason pod: note"
}

func (r *recorder) Eventf(regarding, _ runtime.Object, _, reason, _, note string, args ...any) {
	ref := regarding.(*corev1.ObjectReference)
	r.mu.Lock()
	defer r.mu.Unlock()
	r.events = append(r.events, fmt.Sprintf("%s %s/%s: %s", reason, ref.Namespace, ref.Name, fmt.Sprintf(note, args...)))
}

func (r *recorder) has(reason, text string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, e := range r.events {
		if strings.HasPrefix(e, reason+" ") && strings.Contains(e, text) {
			return true
		}
	}
	return false
}

func pdb(match map[string]string) *policyv1.PodDisruptionBudget {
	one := intstr.FromInt32(1)
	return &policyv1.PodDisruptionBudget{
		ObjectMeta: metav1.ObjectMeta{Namespace: "logs", Name: "pdb"},
		Spec:       policyv1.PodDisruptionBudgetSpec{MaxUnavailable: &one, Selector: &metav1.LabelSelector{MatchLabels: match}},
	}
}

// count is regosched_repairs_total{action,outcome} of r.
func count(r *Repairer, action Action, outcome string) float64 {
	return testutil.ToFloat64(r.total.WithLabelValues(string(action), outcome))
}
