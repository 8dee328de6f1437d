package decision

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"path"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/prometheus/client_golang/prometheus"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	extenderv1 "k8s.io/kube-scheduler/extender/v1"

	"github.com/regosched/regosched/test/fixture"
)

// slowBinder is an API server, over real HTTP, whose binding commits and
// then answers only after the caller has given up: what a timed-out
// binding looks like to kube-scheduler.
type slowBinder struct {
	mu  sync.Mutex
	pod *v1.Pod
}

func (s *slowBinder) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	switch {
	case r.Method == http.MethodPost && strings.HasSuffix(r.URL.Path, "/binding"):
		var b v1.Binding
		if err := json.NewDecoder(r.Body).Decode(&b); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		s.mu.Lock()
		s.pod.Spec.NodeName = b.Target.Name
		s.mu.Unlock()
		<-r.Context().Done() // committed; the reply never reaches the caller
	case r.Method == http.MethodGet && strings.Contains(r.URL.Path, "/nodes/"):
		// Any node exists, with no labels, taints or cordon: bind checks
		// the pod's constraints against it.
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(&v1.Node{ObjectMeta: metav1.ObjectMeta{Name: path.Base(r.URL.Path)}})
	case r.Method == http.MethodGet && strings.HasSuffix(r.URL.Path, "/pods/"+s.pod.Name):
		s.mu.Lock()
		defer s.mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(s.pod)
	default:
		http.NotFound(w, r)
	}
}

// TestTimedOutBindingThatCommittedKeepsItsPlacement: the binding times out
// on the scheduler's side but commits. Bind must read the outcome with a
// context the timeout has not cancelled, report success, and keep the
// placement, so that the pod's peer is not let onto the same node.
func TestTimedOutBindingThatCommittedKeepsItsPlacement(t *testing.T) {
	d, fakeClient := newDecider(t, nil, prometheus.NewRegistry())
	a := fixture.MakePod().Namespace("shop").Name("cache-0-master").Redis("cache", "master", "0").Model()
	b := fixture.MakePod().Namespace("shop").Name("cache-1-master").Redis("cache", "master", "1").Model()
	createPending(t, fakeClient, b)
	obj := podObject(a)
	obj.Spec.NodeName = ""
	api := &slowBinder{pod: obj}
	srv := httptest.NewServer(api)
	t.Cleanup(srv.Close)
	client, err := kubernetes.NewForConfig(&rest.Config{Host: srv.URL})
	if err != nil {
		t.Fatal(err)
	}
	d.opts.Client = client
	if err := d.newJudge(nil); err != nil {
		t.Fatal(err)
	}

	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	if err := d.Bind(ctx, bindArgs(a, "node-1")); err != nil {
		t.Errorf("Bind() of a binding that committed = %v, want success", err)
	}
	// The peer's filter goes through the fake API, where it is pending.
	d.opts.Client = fakeClient
	if err := d.newJudge(nil); err != nil {
		t.Fatal(err)
	}
	res, err := d.FilterAnswer(context.Background(), &extenderv1.ExtenderArgs{Pod: pendingPod(b), NodeNames: names("node-1", "node-2")})
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{"node-2"}, *res.NodeNames); diff != "" {
		t.Errorf("peer's filter after the timed-out binding (-want +got):\n%s", diff)
	}
}
