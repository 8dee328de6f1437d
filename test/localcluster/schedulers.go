package localcluster

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/yaml"
)

// LeaderElection is the leader election of schedulers that share a Lease
// (coordination.k8s.io/v1), as KubeSchedulerConfiguration's leaderElection
// states it.
type LeaderElection struct {
	// ResourceNamespace and ResourceName name the Lease.
	ResourceNamespace string
	ResourceName      string
	// LeaseDuration, RenewDeadline and RetryPeriod are kube-scheduler's
	// (15 s, 10 s and 2 s by default); short ones make a test's take-over
	// fast.
	LeaseDuration time.Duration
	RenewDeadline time.Duration
	RetryPeriod   time.Duration
}

// WithLeaderElection returns cfg, a KubeSchedulerConfiguration (as
// SchedulerConfig returns it), with leader election on as le says, through
// a Lease.
func WithLeaderElection(cfg []byte, le LeaderElection) ([]byte, error) {
	if le.ResourceNamespace == "" || le.ResourceName == "" {
		return nil, errors.New("scheduler config: leader election needs a Lease namespace and name")
	}
	if le.LeaseDuration <= le.RenewDeadline || le.RenewDeadline <= le.RetryPeriod || le.RetryPeriod <= 0 {
		// kube-scheduler refuses these too, but only in its log.
		return nil, fmt.Errorf("scheduler config: want leaseDuration (%s) > renewDeadline (%s) > retryPeriod (%s) > 0",
			le.LeaseDuration, le.RenewDeadline, le.RetryPeriod)
	}
	var doc map[string]any
	if err := yaml.Unmarshal(cfg, &doc); err != nil {
		return nil, fmt.Errorf("scheduler config: %w", err)
	}
	election, err := child(doc, "leaderElection")
	if err != nil {
		return nil, err
	}
	election["leaderElect"] = true
	election["resourceLock"] = "leases"
	election["resourceNamespace"] = le.ResourceNamespace
	election["resourceName"] = le.ResourceName
	election["leaseDuration"] = le.LeaseDuration.String()
	election["renewDeadline"] = le.RenewDeadline.String()
	election["retryPeriod"] = le.RetryPeriod.String()
	out, err := yaml.Marshal(doc)
	if err != nil {
		return nil, fmt.Errorf("scheduler config: %w", err)
	}
	return out, nil
}

// SchedulerGroup is scheduler processes of one configuration that elect a
// leader through one Lease; only the leader schedules.
type SchedulerGroup struct {
	// Processes are the members, named <file>-0, <file>-1, ...
	Processes []*Process
	// Election is their leader election.
	Election LeaderElection

	client kubernetes.Interface
}

// StartSchedulerGroup starts n processes of the scheduler at path
// (Binaries().KubeScheduler, or a build such as regosched-scheduler) with
// cfg, a KubeSchedulerConfiguration naming its kubeconfig (see
// SchedulerConfig), turned to leader election as le says. Each process
// logs to Dir()/<file>-<i>.log and stops with the cluster (or Stop).
//
// Each runs with its name as argv[0]: kube-scheduler's Lease identity
// (hostname_uuid) names no process, but client-go puts argv[0] first in the
// user agent, which the API server records as the field manager of what a
// client writes, so Holder can tell which process wrote the holder.
func (c *Cluster) StartSchedulerGroup(ctx context.Context, path string, n int, cfg []byte, le LeaderElection, env ...string) (_ *SchedulerGroup, err error) {
	if n < 1 {
		return nil, fmt.Errorf("scheduler group of %d processes", n)
	}
	cfg, err = WithLeaderElection(cfg, le)
	if err != nil {
		return nil, err
	}
	base := filepath.Base(path)
	cfgPath := filepath.Join(c.dir, base+"-group-config.yaml")
	if err := os.WriteFile(cfgPath, cfg, 0o644); err != nil {
		return nil, fmt.Errorf("writing scheduler config: %w", err)
	}
	g := &SchedulerGroup{Election: le, client: c.client}
	defer func() {
		if err != nil {
			g.Stop()
		}
	}()
	for i := range n {
		name := fmt.Sprintf("%s-%d", base, i)
		p, err := c.startProcessAs(ctx, name, path, name, env, "--config="+cfgPath, "--secure-port=0", "-v=2")
		if err != nil {
			return nil, err
		}
		g.Processes = append(g.Processes, p)
	}
	return g, nil
}

// Stop stops every process of the group.
func (g *SchedulerGroup) Stop() {
	for _, p := range g.Processes {
		p.Stop()
	}
}

// LeaseHolder is who holds a Lease, as the Lease says.
type LeaseHolder struct {
	// Identity is the holder's identity; "" when the Lease does not exist
	// yet or was released.
	Identity string
	// Manager is the field manager that wrote Identity (the user agent's
	// first word, see StartSchedulerGroup).
	Manager string
	// Process is the group's process named Manager; nil when none is (no
	// holder, or a process of another group).
	Process *Process
	// AcquireTime and RenewTime are the Lease's, in the API server's clock
	// (microseconds).
	AcquireTime time.Time
	RenewTime   time.Time
	// Transitions counts the changes of holder.
	Transitions int32
}

// String is e.g. "kube-scheduler-1 (node_6f1c...)" or "nobody".
func (h LeaseHolder) String() string {
	if h.Identity == "" {
		return "nobody"
	}
	return fmt.Sprintf("%s (%s)", h.Manager, h.Identity)
}

// Holder reads the group's Lease and tells which process holds it.
func (g *SchedulerGroup) Holder(ctx context.Context) (LeaseHolder, error) {
	le := g.Election
	l, err := g.client.CoordinationV1().Leases(le.ResourceNamespace).Get(ctx, le.ResourceName, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return LeaseHolder{}, nil
	}
	if err != nil {
		return LeaseHolder{}, fmt.Errorf("reading Lease %s/%s: %w", le.ResourceNamespace, le.ResourceName, err)
	}
	h, err := leaseHolder(l)
	if err != nil {
		return LeaseHolder{}, fmt.Errorf("reading Lease %s/%s: %w", le.ResourceNamespace, le.ResourceName, err)
	}
	for _, p := range g.Processes {
		if h.Manager != "" && p.Name == h.Manager {
			h.Process = p
		}
	}
	return h, nil
}

// WaitHolder polls the Lease until done accepts its holder, for at most
// timeout, and returns that holder. It fails early once every process of
// the group has exited.
func (g *SchedulerGroup) WaitHolder(ctx context.Context, timeout time.Duration, done func(LeaseHolder) bool) (LeaseHolder, error) {
	var h LeaseHolder
	err := wait.PollUntilContextTimeout(ctx, 50*time.Millisecond, timeout, true, func(ctx context.Context) (bool, error) {
		alive := false
		for _, p := range g.Processes {
			alive = alive || !p.Exited()
		}
		if !alive {
			return false, fmt.Errorf("every scheduler of the group exited; %w", g.Processes[len(g.Processes)-1].ExitError())
		}
		var err error
		if h, err = g.Holder(ctx); err != nil {
			return false, nil // the API server may be busy; ask again
		}
		return done(h), nil
	})
	if err != nil {
		return h, fmt.Errorf("waiting for the holder of Lease %s/%s (last: %s): %w",
			g.Election.ResourceNamespace, g.Election.ResourceName, h, err)
	}
	return h, nil
}

// leaseHolder reads l's holder and the field manager that wrote it.
func leaseHolder(l *coordinationv1.Lease) (LeaseHolder, error) {
	var h LeaseHolder
	if l.Spec.HolderIdentity != nil {
		h.Identity = *l.Spec.HolderIdentity
	}
	if l.Spec.AcquireTime != nil {
		h.AcquireTime = l.Spec.AcquireTime.Time
	}
	if l.Spec.RenewTime != nil {
		h.RenewTime = l.Spec.RenewTime.Time
	}
	if l.Spec.LeaseTransitions != nil {
		h.Transitions = *l.Spec.LeaseTransitions
	}
	if h.Identity == "" {
		return h, nil
	}
	var err error
	h.Manager, err = holderManager(l.ManagedFields)
	return h, err
}

// holderManager returns the manager of the managed fields entry that owns
// spec.holderIdentity, the newest if several claim it (they should not: a
// changed value moves ownership), or "" if none does.
func holderManager(entries []metav1.ManagedFieldsEntry) (string, error) {
	var manager string
	var newest time.Time
	for _, e := range entries {
		if e.FieldsV1 == nil {
			continue
		}
		var fields struct {
			Spec map[string]json.RawMessage `json:"f:spec"`
		}
		if err := json.Unmarshal(e.FieldsV1.GetRawBytes(), &fields); err != nil {
			return "", fmt.Errorf("managed fields of %s: %w", e.Manager, err)
		}
		if _, ok := fields.Spec["f:holderIdentity"]; !ok {
			continue
		}
		var at time.Time
		if e.Time != nil {
			at = e.Time.Time
		}
		if manager == "" || at.After(newest) {
			manager, newest = e.Manager, at
		}
	}
	return manager, nil
}
