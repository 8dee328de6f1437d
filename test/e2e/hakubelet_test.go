//go:build e2e

package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	ls "github.com/regosched/regosched/test/localstack"
)

// haSelector selects the extender's pods (deploy/extender's labels).
const haSelector = "app.kubernetes.io/name=regosched,app.kubernetes.io/component=extender"

// haKubelet does, for the extender pods of one namespace, what the kubelets
// of a real cluster would: it runs a real regosched process for each pod
// (from the pod's own container arguments) and reports the pod Running and
// Ready as the process's /readyz on its health port says.
//
// There is one network namespace: every process listens on loopback, on
// ports of its own. A pod's IP is an address of TEST-NET-1 (192.0.2.0/24),
// one per pod, since EndpointSlices refuse loopback addresses; the port of
// an endpoint is the process's when the pod declares it (podPorts).
//
// With auto it also plays the rest of a node's part: it binds pods nobody
// binds (the stack's kube-scheduler only serves the regosched profile) to
// the least used uncordoned node, starts a process for each bound pod,
// restarts one that exits by itself (restartPolicy Always), and when a pod
// is deleted, stops its process with SIGTERM and then deletes the pod
// object, as a kubelet does once the container has stopped. Without auto,
// the test starts, kills and stops processes itself.
type haKubelet struct {
	t     *testing.T
	ns    string
	lease string // --leader-elect-name of every process
	auto  bool
	nodes []string // where auto binds pods
	// podPorts runs each process on the ports its pod declares (named http
	// and health); the test must make them unique. Otherwise every process
	// gets free ports: the pods of a Deployment all declare the same ones,
	// and there is one network namespace here.
	podPorts bool
	// hold keeps auto from starting new processes while set, like an image
	// that is still being pulled.
	hold atomic.Bool

	mu       sync.Mutex
	procs    map[string]*haProc // by pod name
	ips      int                // pod IPs handed out
	exits    []string           // processes that exited by themselves
	stopping sync.WaitGroup
	cancel   context.CancelFunc
	done     chan struct{}
}

// haProc is the process of one pod.
type haProc struct {
	pod          string
	uid          types.UID
	r            *ls.Replica
	verb, health string // http://127.0.0.1:port
	ip           string // reported as the pod's IP
	reported     string // Ready status last reported: "True" or "False"
	failures     int    // failed readiness probes in a row
	stopping     bool
}

func newHAKubelet(t *testing.T, ns, lease string) *haKubelet {
	k := &haKubelet{t: t, ns: ns, lease: lease, procs: map[string]*haProc{}}
	t.Cleanup(k.close)
	t.Cleanup(func() {
		if t.Failed() {
			k.dump()
		}
	})
	return k
}

// run starts the loop; the test's clean-up stops it and every process.
func (k *haKubelet) run(ctx context.Context) {
	ctx, k.cancel = context.WithCancel(ctx)
	k.done = make(chan struct{})
	go func() {
		defer close(k.done)
		for ctx.Err() == nil {
			if k.auto {
				if err := k.reconcile(ctx); err != nil && ctx.Err() == nil {
					k.t.Logf("kubelet: %v", err)
				}
			}
			k.report(ctx)
			select {
			case <-ctx.Done():
			case <-time.After(200 * time.Millisecond):
			}
		}
	}()
}

func (k *haKubelet) close() {
	if k.cancel != nil {
		k.cancel()
		<-k.done
	}
	k.stopping.Wait()
	k.mu.Lock()
	procs := make([]*haProc, 0, len(k.procs))
	for _, p := range k.procs {
		procs = append(procs, p)
	}
	k.mu.Unlock()
	var wg sync.WaitGroup
	for _, p := range procs {
		wg.Go(p.r.Stop)
	}
	wg.Wait()
}

// args turns the pod's container arguments into serve's (StartReplica adds
// the subcommand): the health port is the process's own; --redis-roles
// goes (no Redis runs for this test, and other tests' Redis pods are not
// its business); the debug log of every verb goes (the tests poll them);
// the lease and the pod's identity, which the downward API
// and the in-cluster namespace give a real pod, are added.
func (k *haKubelet) args(pod *corev1.Pod, health string) []string {
	var args []string
	skip := false
	for _, a := range pod.Spec.Containers[0].Args {
		switch {
		case skip:
			skip = false
		case a == "--health-listen":
			skip = true
		case a == "serve", a == "--redis-roles", strings.HasPrefix(a, "--health-listen="):
		default:
			args = append(args, a)
		}
	}
	return append(args, "--log-level", "info", "--health-listen", health,
		"--leader-elect-namespace", k.ns, "--leader-elect-name", k.lease,
		"--pod-name", pod.Name, "--pod-namespace", k.ns)
}

// start runs a process for pod (replacing a previous one, which must have
// exited) and reports the pod Running, not Ready yet.
func (k *haKubelet) start(ctx context.Context, pod *corev1.Pod) error {
	verb, health, err := k.addrs(pod)
	if err != nil {
		return err
	}
	r, err := stack.StartReplicaAt(ctx, "ha-"+k.ns+"-"+pod.Name, verb, k.args(pod, health)...)
	if err != nil {
		return err
	}
	p := &haProc{pod: pod.Name, uid: pod.UID, r: r, verb: "http://" + verb, health: "http://" + health,
		ip: pod.Status.PodIP, reported: string(corev1.ConditionFalse)}
	k.mu.Lock()
	if p.ip == "" { // a restarted container keeps its pod's IP
		k.ips++
		p.ip = fmt.Sprintf("192.0.2.%d", k.ips%254+1)
	}
	k.procs[pod.Name] = p
	k.mu.Unlock()
	return k.setReady(ctx, p, false)
}

func (k *haKubelet) addrs(pod *corev1.Pod) (verb, health string, err error) {
	if !k.podPorts {
		if verb, err = freeAddr(); err == nil {
			health, err = freeAddr()
		}
		return verb, health, err
	}
	for _, p := range pod.Spec.Containers[0].Ports {
		a := net.JoinHostPort("127.0.0.1", strconv.Itoa(int(p.ContainerPort)))
		switch p.Name {
		case "http":
			verb = a
		case "health":
			health = a
		}
	}
	if verb == "" || health == "" {
		return "", "", fmt.Errorf("pod %s declares no ports http and health", pod.Name)
	}
	return verb, health, nil
}

// proc returns the process of pod, nil if none.
func (k *haKubelet) proc(pod string) *haProc {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.procs[pod]
}

// failureThreshold is deploy/extender's readinessProbe.failureThreshold:
// a Ready pod turns unready after that many failed probes in a row (at
// once when its process has exited).
const failureThreshold = 3

// report sets each pod's Ready condition from its process's /readyz, when
// it changed.
func (k *haKubelet) report(ctx context.Context) {
	k.mu.Lock()
	procs := make([]*haProc, 0, len(k.procs))
	for _, p := range k.procs {
		if !p.stopping {
			procs = append(procs, p)
		}
	}
	k.mu.Unlock()
	for _, p := range procs {
		ready := !p.r.Exited() && get(ctx, p.health+"/readyz") == http.StatusOK
		if ready {
			p.failures = 0
		} else if p.failures++; p.reported == string(corev1.ConditionTrue) && p.failures < failureThreshold && !p.r.Exited() {
			continue
		}
		status := string(corev1.ConditionFalse)
		if ready {
			status = string(corev1.ConditionTrue)
		}
		if status == p.reported {
			continue
		}
		if err := k.setReady(ctx, p, ready); err != nil {
			if ctx.Err() == nil && !apierrors.IsNotFound(err) {
				k.t.Logf("kubelet: %v", err)
			}
			continue
		}
		p.reported = status
	}
}

// setReady reports p's pod Running at p.ip with its Ready and
// ContainersReady conditions as given (a strategic merge patch of the
// status: no conflict with the leader's label patches).
func (k *haKubelet) setReady(ctx context.Context, p *haProc, ready bool) error {
	status := corev1.ConditionFalse
	if ready {
		status = corev1.ConditionTrue
	}
	now := metav1.Now()
	patch, err := json.Marshal(map[string]any{"status": map[string]any{
		"phase":  corev1.PodRunning,
		"podIP":  p.ip,
		"podIPs": []corev1.PodIP{{IP: p.ip}},
		"conditions": []corev1.PodCondition{
			{Type: corev1.PodReady, Status: status, LastTransitionTime: now},
			{Type: corev1.ContainersReady, Status: status, LastTransitionTime: now},
		},
	}})
	if err != nil {
		return err
	}
	_, err = stack.Client().CoreV1().Pods(k.ns).Patch(ctx, p.pod, types.StrategicMergePatchType, patch, metav1.PatchOptions{}, "status")
	if err != nil {
		return fmt.Errorf("reporting %s ready=%v: %w", p.pod, ready, err)
	}
	return nil
}

// reconcile moves every pod of the namespace one step on (auto).
func (k *haKubelet) reconcile(ctx context.Context) error {
	list, err := stack.Client().CoreV1().Pods(k.ns).List(ctx, metav1.ListOptions{LabelSelector: haSelector})
	if err != nil {
		return fmt.Errorf("listing pods: %w", err)
	}
	seen := map[string]bool{}
	for i := range list.Items {
		pod := &list.Items[i]
		seen[pod.Name] = true
		k.mu.Lock()
		p := k.procs[pod.Name]
		k.mu.Unlock()
		switch {
		case pod.DeletionTimestamp != nil:
			k.terminate(pod.Name, pod.UID, p)
		case pod.Spec.NodeName == "":
			err = k.bind(ctx, pod, list.Items)
		case p == nil:
			if !k.hold.Load() {
				err = k.start(ctx, pod)
			}
		case p.r.Exited() && !p.stopping:
			// Not asked to stop: it crashed or lost the lease. Restart it,
			// as restartPolicy Always does, and let the test know.
			k.mu.Lock()
			k.exits = append(k.exits, fmt.Sprintf("%s exited (%v); end of its log:\n%s", pod.Name, p.r.Err(), p.r.LogTail(20)))
			k.mu.Unlock()
			err = k.start(ctx, pod)
		}
		if err != nil {
			return err
		}
	}
	k.mu.Lock()
	var gone []*haProc
	for name, p := range k.procs {
		if !seen[name] {
			gone = append(gone, p)
		}
	}
	k.mu.Unlock()
	for _, p := range gone {
		k.terminate(p.pod, "", p)
	}
	return nil
}

// terminate stops the process of a deleted pod with SIGTERM (it drains and
// releases the lease) and then deletes the pod object at once, in the
// background, as a kubelet does; p may be nil (no process ran).
func (k *haKubelet) terminate(pod string, uid types.UID, p *haProc) {
	k.mu.Lock()
	if p != nil {
		if p.stopping {
			k.mu.Unlock()
			return
		}
		p.stopping = true
	}
	k.mu.Unlock()
	k.stopping.Go(func() {
		if p != nil {
			p.r.Stop()
		}
		if uid != "" {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			zero := int64(0)
			err := stack.Client().CoreV1().Pods(k.ns).Delete(ctx, pod, metav1.DeleteOptions{
				GracePeriodSeconds: &zero, Preconditions: &metav1.Preconditions{UID: &uid},
			})
			if err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
				k.t.Logf("kubelet: deleting %s: %v", pod, err)
			}
		}
		k.mu.Lock()
		if p != nil && k.procs[pod] == p {
			delete(k.procs, pod)
		}
		k.mu.Unlock()
	})
}

// bind places pod on the uncordoned node of k.nodes with the fewest live
// pods of the namespace.
func (k *haKubelet) bind(ctx context.Context, pod *corev1.Pod, all []corev1.Pod) error {
	live := map[string]int{}
	for _, p := range all {
		if p.DeletionTimestamp == nil && p.Spec.NodeName != "" {
			live[p.Spec.NodeName]++
		}
	}
	best := ""
	for _, n := range k.nodes {
		node, err := stack.Client().CoreV1().Nodes().Get(ctx, n, metav1.GetOptions{})
		if err != nil {
			return fmt.Errorf("getting node %s: %w", n, err)
		}
		if !node.Spec.Unschedulable && (best == "" || live[n] < live[best]) {
			best = n
		}
	}
	if best == "" {
		return fmt.Errorf("no schedulable node among %v for %s", k.nodes, pod.Name)
	}
	err := stack.Client().CoreV1().Pods(k.ns).Bind(ctx, &corev1.Binding{
		ObjectMeta: metav1.ObjectMeta{Name: pod.Name, UID: pod.UID},
		Target:     corev1.ObjectReference{Kind: "Node", Name: best},
	}, metav1.CreateOptions{})
	if err != nil && !apierrors.IsConflict(err) {
		return fmt.Errorf("binding %s to %s: %w", pod.Name, best, err)
	}
	pod.Spec.NodeName = best // the next pod of this pass counts it
	return nil
}
