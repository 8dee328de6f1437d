package localcluster

import (
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"
)

func TestWithLeaderElection(t *testing.T) {
	const base = `apiVersion: kubescheduler.config.k8s.io/v1
kind: KubeSchedulerConfiguration
clientConnection:
  kubeconfig: /k
leaderElection:
  leaderElect: false
  resourceName: regosched
profiles:
- schedulerName: regosched
`
	fast := LeaderElection{ResourceNamespace: "kube-system", ResourceName: "failover", LeaseDuration: 4 * time.Second, RenewDeadline: 3 * time.Second, RetryPeriod: time.Second}
	tests := []struct {
		name    string
		base    string
		le      LeaderElection
		want    map[string]any
		wantErr string
	}{
		{
			name: "leader election on, with the Lease and its periods",
			base: base,
			le:   fast,
			want: map[string]any{
				"apiVersion":       "kubescheduler.config.k8s.io/v1",
				"kind":             "KubeSchedulerConfiguration",
				"clientConnection": map[string]any{"kubeconfig": "/k"},
				"leaderElection": map[string]any{
					"leaderElect":       true,
					"resourceLock":      "leases",
					"resourceNamespace": "kube-system",
					"resourceName":      "failover",
					"leaseDuration":     "4s",
					"renewDeadline":     "3s",
					"retryPeriod":       "1s",
				},
				"profiles": []any{map[string]any{"schedulerName": "regosched"}},
			},
		},
		{
			name: "no leaderElection section yet",
			base: "apiVersion: kubescheduler.config.k8s.io/v1\nkind: KubeSchedulerConfiguration\n",
			le:   LeaderElection{ResourceNamespace: "default", ResourceName: "x", LeaseDuration: 1500 * time.Millisecond, RenewDeadline: time.Second, RetryPeriod: 250 * time.Millisecond},
			want: map[string]any{
				"apiVersion": "kubescheduler.config.k8s.io/v1",
				"kind":       "KubeSchedulerConfiguration",
				"leaderElection": map[string]any{
					"leaderElect": true, "resourceLock": "leases", "resourceNamespace": "default", "resourceName": "x",
					"leaseDuration": "1.5s", "renewDeadline": "1s", "retryPeriod": "250ms",
				},
			},
		},
		{
			name:    "no Lease name",
			base:    base,
			le:      LeaderElection{ResourceNamespace: "kube-system", LeaseDuration: 4 * time.Second, RenewDeadline: 3 * time.Second, RetryPeriod: time.Second},
			wantErr: "Lease namespace and name",
		},
		{
			name:    "renew deadline not below the lease duration",
			base:    base,
			le:      LeaderElection{ResourceNamespace: "n", ResourceName: "x", LeaseDuration: 3 * time.Second, RenewDeadline: 3 * time.Second, RetryPeriod: time.Second},
			wantErr: "leaseDuration (3s) > renewDeadline (3s)",
		},
		{
			name:    "no retry period",
			base:    base,
			le:      LeaderElection{ResourceNamespace: "n", ResourceName: "x", LeaseDuration: 4 * time.Second, RenewDeadline: 3 * time.Second},
			wantErr: "retryPeriod (0s) > 0",
		},
		{
			name:    "leaderElection not a mapping",
			base:    "kind: KubeSchedulerConfiguration\nleaderElection: true\n",
			le:      fast,
			wantErr: "leaderElection is bool",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			out, err := WithLeaderElection([]byte(tt.base), tt.le)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("WithLeaderElection() error = %v, want one containing %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("WithLeaderElection() error = %v", err)
			}
			var got map[string]any
			if err := yaml.Unmarshal(out, &got); err != nil {
				t.Fatalf("output is not YAML: %v\n%s", err, out)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("WithLeaderElection() mismatch (-want +got):\n%s", diff)
			}
		})
	}
}

func TestLeaseHolder(t *testing.T) {
	at := func(sec int) *metav1.Time {
		t := metav1.NewTime(time.Date(2026, 12, 7, 10, 0, sec, 0, time.UTC))
		return &t
	}
	micro := func(sec int) *metav1.MicroTime {
		t := metav1.NewMicroTime(time.Date(2026, 12, 7, 10, 0, sec, 123456000, time.UTC))
		return &t
	}
	entry := func(manager string, sec int, fields string) metav1.ManagedFieldsEntry {
		return metav1.ManagedFieldsEntry{Manager: manager, Operation: metav1.ManagedFieldsOperationUpdate, Time: at(sec),
			FieldsType: "FieldsV1", FieldsV1: metav1.NewFieldsV1(fields)}
	}
	const holderFields = `{"f:spec":{"f:acquireTime":{},"f:holderIdentity":{},"f:renewTime":{}}}`
	const otherFields = `{"f:spec":{"f:leaseDurationSeconds":{},"f:leaseTransitions":{}}}`
	id, transitions := "host_1234", int32(1)
	lease := func(holder *string, entries ...metav1.ManagedFieldsEntry) *coordinationv1.Lease {
		return &coordinationv1.Lease{
			ObjectMeta: metav1.ObjectMeta{Name: "failover", ManagedFields: entries},
			Spec: coordinationv1.LeaseSpec{HolderIdentity: holder, AcquireTime: micro(5), RenewTime: micro(7),
				LeaseTransitions: &transitions},
		}
	}
	held := LeaseHolder{Identity: id, AcquireTime: micro(5).Time, RenewTime: micro(7).Time, Transitions: 1}
	with := func(manager string) LeaseHolder { h := held; h.Manager = manager; return h }
	tests := []struct {
		name    string
		lease   *coordinationv1.Lease
		want    LeaseHolder
		wantErr bool
	}{
		{
			name: "the standby took over: the holder's fields moved to it",
			lease: lease(&id,
				entry("kube-scheduler-0", 3, otherFields),
				entry("kube-scheduler-1", 6, holderFields)),
			want: with("kube-scheduler-1"),
		},
		{
			name: "two claims: the newest wins",
			lease: lease(&id,
				entry("kube-scheduler-1", 9, holderFields),
				entry("kube-scheduler-0", 4, holderFields)),
			want: with("kube-scheduler-1"),
		},
		{
			name:  "released: no holder, whoever wrote last",
			lease: lease(new(string), entry("kube-scheduler-0", 3, holderFields)),
			want:  LeaseHolder{AcquireTime: micro(5).Time, RenewTime: micro(7).Time, Transitions: 1},
		},
		{
			name:  "no managed fields",
			lease: lease(&id),
			want:  held,
		},
		{
			name:    "fields that are not JSON",
			lease:   lease(&id, entry("kube-scheduler-0", 3, `{`)),
			wantErr: true,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := leaseHolder(tt.lease)
			if (err != nil) != tt.wantErr {
				t.Fatalf("leaseHolder() error = %v, wantErr %v", err, tt.wantErr)
			}
			if tt.wantErr {
				return
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("leaseHolder() mismatch (-want +got):\n%s", diff)
			}
		})
	}
}
