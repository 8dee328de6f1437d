package decision

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/regosched/regosched/internal/core/model"
	"github.com/regosched/regosched/test/fixture"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
	extenderv1 "k8s.io/kube-scheduler/extender/v1"
)

// bindLikeAPIServer makes the fake clientset treat pods/binding as the API
// server does: set spec.nodeName once, refuse a pod that is already bound.
func bindLikeAPIServer(client *fake.Clientset) {
	gvr := v1.SchemeGroupVersion.WithResource("pods")
	client.PrependReactor("create", "pods", func(action k8stesting.Action) (bool, runtime.Object, error) {
		ca, ok := action.(k8stesting.CreateAction)
		if !ok || ca.GetSubresource() != "binding" {
			return false, nil, nil
		}
		b := ca.GetObject().(*v1.Binding)
		obj, err := client.Tracker().Get(gvr, b.Namespace, b.Name)
		if err != nil {
			return true, nil, err
		}
		pod := obj.(*v1.Pod).DeepCopy()
		if b.UID != "" && b.UID != pod.UID {
			return true, nil, apierrors.NewConflict(gvr.GroupResource(), b.Name, errors.New("UID mismatch"))
		}
		if pod.Spec.NodeName != "" {
			return true, nil, apierrors.NewConflict(gvr.GroupResource(), b.Name,
				errors.New("pod is already assigned to node "+pod.Spec.NodeName))
		}
		pod.Spec.NodeName = b.Target.Name
		return true, b, client.Tracker().Update(gvr, pod, pod.Namespace)
	})
}

// createPending adds p as a pending pod to the API.
func createPending(t *testing.T, client *fake.Clientset, p *model.Pod) {
	t.Helper()
	obj := podObject(p)
	obj.Spec.NodeName = ""
	if _, err := client.CoreV1().Pods(p.Namespace).Create(context.Background(), obj, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
}

func bindArgs(p *model.Pod, node string) *extenderv1.ExtenderBindingArgs {
	return &extenderv1.ExtenderBindingArgs{PodName: p.Name, PodNamespace: p.Namespace, PodUID: p.UID, Node: node}
}

func nodeOf(t *testing.T, client *fake.Clientset, p *model.Pod) string {
	t.Helper()
	got, err := client.CoreV1().Pods(p.Namespace).Get(context.Background(), p.Name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return got.Spec.NodeName
}

// TestBindBurst replays what kube-scheduler does in a burst: both masters
// pass filter before either binding is visible (the second filter gives up
// waiting), then both bind to the same node. The commit-time check refuses
// the second.
func TestBindBurst(t *testing.T) {
	ctx := context.Background()
	reg := prometheus.NewRegistry()
	d, client := newDecider(t, nil, reg)
	bindLikeAPIServer(client)
	a := fixture.MakePod().Namespace("shop").Name("cache-0-master").Redis("cache", "master", "0").Model()
	b := fixture.MakePod().Namespace("shop").Name("cache-1-master").Redis("cache", "master", "1").Model()
	createPending(t, client, a)
	createPending(t, client, b)

	all := names("node-1", "node-2")
	for _, p := range []*model.Pod{a, b} {
		res, err := d.FilterAnswer(ctx, &extenderv1.ExtenderArgs{Pod: pendingPod(p), NodeNames: names(*all...)})
		if err != nil {
			t.Fatal(err)
		}
		if len(*res.NodeNames) != 2 {
			t.Fatalf("filter %s kept %v, want both nodes (no peer bound yet)", p.Name, *res.NodeNames)
		}
	}
	if err := d.Bind(ctx, bindArgs(a, "node-1")); err != nil {
		t.Fatalf("Bind(cache-0-master) error = %v", err)
	}
	err := d.Bind(ctx, bindArgs(b, "node-1"))
	if !errors.Is(err, ErrRefused) {
		t.Fatalf("Bind(cache-1-master to node-1) error = %v, want ErrRefused", err)
	}
	const reason = "redis: master shop/cache-0-master of cluster cache already on this node"
	if !strings.Contains(err.Error(), reason) {
		t.Errorf("refusal %q does not name %q", err, reason)
	}
	if got := nodeOf(t, client, b); got != "" {
		t.Errorf("refused pod bound to %q", got)
	}
	// Back in the queue, the pod is filtered again: node-1 is gone at once,
	// with no wait, because the first binding was recorded by Bind itself.
	res, err := d.FilterAnswer(ctx, &extenderv1.ExtenderArgs{Pod: pendingPod(b), NodeNames: names(*all...)})
	if err != nil {
		t.Fatal(err)
	}
	if got := *res.NodeNames; len(got) != 1 || got[0] != "node-2" {
		t.Errorf("second filter kept %v, want [node-2]", got)
	}
	if err := d.Bind(ctx, bindArgs(b, "node-2")); err != nil {
		t.Fatalf("Bind(cache-1-master to node-2) error = %v", err)
	}
	if got := nodeOf(t, client, a) + "," + nodeOf(t, client, b); got != "node-1,node-2" {
		t.Errorf("placements = %s, want node-1,node-2", got)
	}
	if got := testutil.ToFloat64(d.binds.WithLabelValues("bound")); got != 2 {
		t.Errorf("binds{bound} = %v, want 2", got)
	}
	if got := testutil.ToFloat64(d.binds.WithLabelValues("refused")); got != 1 {
		t.Errorf("binds{refused} = %v, want 1", got)
	}
}

func TestBindCases(t *testing.T) {
	ctx := context.Background()
	tests := []struct {
		name    string
		setup   func(t *testing.T, client *fake.Clientset) *extenderv1.ExtenderBindingArgs
		wantErr string
		want    string // node the pod ends on
	}{
		{
			name: "pod never filtered here is read from the API",
			setup: func(t *testing.T, client *fake.Clientset) *extenderv1.ExtenderBindingArgs {
				p := fixture.MakePod().Namespace("logs").Name("es-data-1").Elasticsearch("es", "data").Model()
				createPending(t, client, p)
				return bindArgs(p, "node-2")
			},
			want: "node-2",
		},
		{
			name: "retry of a bind that went through succeeds",
			setup: func(t *testing.T, client *fake.Clientset) *extenderv1.ExtenderBindingArgs {
				p := fixture.MakePod().Namespace("logs").Name("es-data-1").Elasticsearch("es", "data").Model()
				createPending(t, client, p)
				obj, _ := client.CoreV1().Pods(p.Namespace).Get(context.Background(), p.Name, metav1.GetOptions{})
				obj.Spec.NodeName = "node-3"
				if _, err := client.CoreV1().Pods(p.Namespace).Update(context.Background(), obj, metav1.UpdateOptions{}); err != nil {
					t.Fatal(err)
				}
				return bindArgs(p, "node-3")
			},
			want: "node-3",
		},
		{
			name: "pod already bound elsewhere is an error",
			setup: func(t *testing.T, client *fake.Clientset) *extenderv1.ExtenderBindingArgs {
				p := fixture.MakePod().Namespace("logs").Name("es-data-1").Elasticsearch("es", "data").Model()
				createPending(t, client, p)
				obj, _ := client.CoreV1().Pods(p.Namespace).Get(context.Background(), p.Name, metav1.GetOptions{})
				obj.Spec.NodeName = "node-4"
				if _, err := client.CoreV1().Pods(p.Namespace).Update(context.Background(), obj, metav1.UpdateOptions{}); err != nil {
					t.Fatal(err)
				}
				return bindArgs(p, "node-3")
			},
			wantErr: "already assigned to node node-4",
			want:    "node-4",
		},
		{
			name: "unknown pod is an error",
			setup: func(*testing.T, *fake.Clientset) *extenderv1.ExtenderBindingArgs {
				return bindArgs(fixture.MakePod().Namespace("logs").Name("es-data-9").Elasticsearch("es", "data").Model(), "node-1")
			},
			wantErr: `reading pod logs/es-data-9 to bind: pods "es-data-9" not found`,
		},
		{
			name: "replaced pod (other UID) is an error",
			setup: func(t *testing.T, client *fake.Clientset) *extenderv1.ExtenderBindingArgs {
				p := fixture.MakePod().Namespace("logs").Name("es-data-1").Elasticsearch("es", "data").Model()
				createPending(t, client, p)
				args := bindArgs(p, "node-1")
				args.PodUID = "old-uid"
				return args
			},
			wantErr: "it was replaced",
		},
		{
			name: "conflict with a bound peer is refused",
			setup: func(t *testing.T, client *fake.Clientset) *extenderv1.ExtenderBindingArgs {
				p := fixture.MakePod().Namespace("logs").Name("es-data-1").Elasticsearch("es", "data").Model()
				createPending(t, client, p)
				return bindArgs(p, "node-1") // es-data-0 is there
			},
			wantErr: "refused: binding logs/es-data-1 to node-1 would break a rule: elasticsearch: data logs/es-data-0 of cluster es already on this node",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d, client := newDecider(t,
				[]*model.Pod{fixture.MakePod().Namespace("logs").Name("es-data-0").Elasticsearch("es", "data").Node("node-1").Model()},
				prometheus.NewRegistry(),
			)
			bindLikeAPIServer(client)
			args := tt.setup(t, client)
			err := d.Bind(ctx, args)
			switch {
			case tt.wantErr == "" && err != nil:
				t.Fatalf("Bind() error = %v", err)
			case tt.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tt.wantErr)):
				t.Fatalf("Bind() error = %v, want one containing %q", err, tt.wantErr)
			}
			if tt.want != "" {
				if got := nodeOf(t, client, fixture.MakePod().Namespace("logs").Name(args.PodName).Elasticsearch("es", "data").Model()); got != tt.want {
					t.Errorf("pod on %q, want %q", got, tt.want)
				}
			}
		})
	}
}

// TestBindRecordsThePlacementBeforeTheAPIBinding: while the API binding is
// still under way, a peer's filter call already sees the placement (it must
// not wait a whole API round trip on the scheduler's serial cycle); a binding
// that the API server refuses is taken back, and the node is free again; one
// whose outcome is unknown stays until the in-flight TTL passes.
func TestBindRecordsThePlacementBeforeTheAPIBinding(t *testing.T) {
	for _, tc := range []struct {
		name        string
		apiErr      error
		wantKept    []string // the peer's filter result after the bind returned
		wantExpired []string // and after the in-flight TTL, when set
	}{
		{name: "binding succeeds", wantKept: []string{"node-2"}},
		{
			name:     "binding refused",
			apiErr:   apierrors.NewForbidden(v1.Resource("pods"), "cache-0-master", errors.New("no")),
			wantKept: []string{"node-1", "node-2"},
		},
		{
			name:        "binding outcome unknown",
			apiErr:      apierrors.NewInternalError(errors.New("etcd is down")),
			wantKept:    []string{"node-2"},
			wantExpired: []string{"node-1", "node-2"},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			d, client := newDecider(t, nil, prometheus.NewRegistry())
			// The fake clientset answers one call at a time, and the hanging
			// binding holds it: filter must know the pods pending without
			// reading them, as it does from the pending pods' informer.
			d.opts.Pending = pendingAll{}
			if err := d.newJudge(nil); err != nil {
				t.Fatal(err)
			}
			bindLikeAPIServer(client)
			entered, release := make(chan struct{}), make(chan struct{})
			client.PrependReactor("create", "pods", func(action k8stesting.Action) (bool, runtime.Object, error) {
				if action.GetSubresource() != "binding" {
					return false, nil, nil
				}
				close(entered)
				<-release
				if tc.apiErr != nil {
					return true, nil, tc.apiErr
				}
				return false, nil, nil // on to bindLikeAPIServer
			})
			a := fixture.MakePod().Namespace("shop").Name("cache-0-master").Redis("cache", "master", "0").Model()
			b := fixture.MakePod().Namespace("shop").Name("cache-1-master").Redis("cache", "master", "1").Model()
			createPending(t, client, a)
			createPending(t, client, b)
			all := names("node-1", "node-2")
			if _, err := d.FilterAnswer(ctx, &extenderv1.ExtenderArgs{Pod: pendingPod(a), NodeNames: names(*all...)}); err != nil {
				t.Fatal(err)
			}

			done := make(chan error, 1)
			go func() { done <- d.Bind(ctx, bindArgs(a, "node-1")) }()
			<-entered
			// The API binding of a hangs; b's filter must neither wait for it
			// nor miss it.
			start := time.Now()
			res, err := d.FilterAnswer(ctx, &extenderv1.ExtenderArgs{Pod: pendingPod(b), NodeNames: names(*all...)})
			if err != nil {
				t.Fatal(err)
			}
			if waited := time.Since(start); waited >= d.opts.MaxWait {
				t.Errorf("filter waited %v for a pod whose placement was already decided", waited)
			}
			if diff := cmp.Diff([]string{"node-2"}, *res.NodeNames); diff != "" {
				t.Errorf("filter during the API binding (-want +got):\n%s", diff)
			}
			close(release)
			if err := <-done; (err != nil) != (tc.apiErr != nil) {
				t.Fatalf("Bind() error = %v, want error %v", err, tc.apiErr != nil)
			}
			res, err = d.FilterAnswer(ctx, &extenderv1.ExtenderArgs{Pod: pendingPod(b), NodeNames: names(*all...)})
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.wantKept, *res.NodeNames); diff != "" {
				t.Errorf("filter after the bind returned (-want +got):\n%s", diff)
			}
			if tc.wantExpired == nil {
				return
			}
			time.Sleep(d.opts.InFlightTTL + 100*time.Millisecond)
			res, err = d.FilterAnswer(ctx, &extenderv1.ExtenderArgs{Pod: pendingPod(b), NodeNames: names(*all...)})
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.wantExpired, *res.NodeNames); diff != "" {
				t.Errorf("filter after the in-flight TTL (-want +got):\n%s", diff)
			}
		})
	}
}

// pendingAll says every pod is a pending pod of the profile, described
// ahead of none.
type pendingAll struct{}

func (pendingAll) Is(*model.Pod) bool { return true }

func (pendingAll) Described(*model.Pod, *model.Origin) ([]string, *model.Claims, bool) {
	return nil, nil, false
}
