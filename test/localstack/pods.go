package localstack

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/util/retry"

	"github.com/regosched/regosched"
	"github.com/regosched/regosched/internal/core/bundles"
	"github.com/regosched/regosched/internal/core/model"
	"github.com/regosched/regosched/internal/core/policy"
	"github.com/regosched/regosched/test/fixture"
)

// SchedulerName is the profile of the deployed scheduler configuration;
// the tests' pods (fixture's Schedulable) ask for it.
const SchedulerName = fixture.SchedulerName

// Timeouts of the waiting helpers. A pod is usually placed or refused in
// well under a second; the margin is for a busy machine.
const (
	scheduleTimeout = 90 * time.Second
	cacheTimeout    = 30 * time.Second
	pollInterval    = 50 * time.Millisecond
)

// CreateRunning creates pod (bound by its NodeName) and reports it running
// at 127.0.0.1 (ReportRunning).
func CreateRunning(ctx context.Context, client kubernetes.Interface, pod *corev1.Pod) error {
	if _, err := client.CoreV1().Pods(pod.Namespace).Create(ctx, pod, metav1.CreateOptions{}); err != nil {
		return fmt.Errorf("creating pod %s/%s: %w", pod.Namespace, pod.Name, err)
	}
	return ReportRunning(ctx, client, pod.Namespace, pod.Name)
}

// ReportRunning reports pod ns/name running at 127.0.0.1, as a kubelet
// would. regosched may relabel the pod between the read and the status
// update (a remembered role is written at once): the update then reads
// the pod again.
func ReportRunning(ctx context.Context, client kubernetes.Interface, ns, name string) error {
	pods := client.CoreV1().Pods(ns)
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		p, err := pods.Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		p.Status.Phase = corev1.PodRunning
		p.Status.PodIP = "127.0.0.1"
		p.Status.PodIPs = []corev1.PodIP{{IP: "127.0.0.1"}}
		_, err = pods.UpdateStatus(ctx, p, metav1.UpdateOptions{})
		return err
	})
	if err != nil {
		return fmt.Errorf("reporting %s/%s running: %w", ns, name, err)
	}
	return nil
}

// BitnamiStatefulSetUID is the StatefulSet BitnamiClusterPod's pods claim
// to belong to: no controller runs here, so it need not exist, only be the
// same for all (regosched remembers roles per controller).
const BitnamiStatefulSetUID = types.UID("0b5a1c1e-5e55-4e5e-9e55-5e5510000001")

// BitnamiClusterPod is a pod of Bitnami's redis-cluster chart (release
// "sessions") as the chart labels it (testdata/presets/bitnami-redis-cluster.json),
// whose Redis listens on 127.0.0.1:port: regosched finds the port by the
// container port's name, and reads the role live.
func BitnamiClusterPod(ns, name string, port int) *fixture.PodWrapper {
	return fixture.MakePod().Namespace(ns).Name(name).Schedulable().
		BitnamiRedisCluster("sessions").Label("app.kubernetes.io/version", "8.2.1").
		StatefulSet("sessions-redis-cluster", BitnamiStatefulSetUID).
		ContainerPort("tcp-redis", int32(port)).ContainerPort("tcp-redis-bus", int32(port+10000))
}

// DefaultGrouped reports whether the default policy groups a pod with these
// labels (and so whether regosched's cache indexes it once bound): it asks
// the embedded policy's peer_keys, so that every preset counts.
func DefaultGrouped(labels map[string]string) bool {
	pol, err := defaultPolicy()
	if err != nil {
		panic(fmt.Sprintf("compiling the embedded default policy: %v", err)) // a build of the binary under test would fail too
	}
	keys, err := pol.PeerKeys(context.Background(), &model.Pod{Namespace: "default", Name: "p", UID: "p", Labels: model.NewLabels(labels)})
	return err == nil && len(keys) > 0
}

// defaultPolicy is the embedded default policy, compiled once.
var defaultPolicy = sync.OnceValues(func() (*policy.Policy, error) {
	return bundles.Options{}.LoadFS(context.Background(), regosched.DefaultPolicy(), bundles.EmbeddedName)
})

// Nodes returns the names of all nodes, sorted.
func (s *Stack) Nodes(ctx context.Context) ([]string, error) {
	list, err := s.Client().CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, fmt.Errorf("listing nodes: %w", err)
	}
	names := make([]string, 0, len(list.Items))
	for _, n := range list.Items {
		names = append(names, n.Name)
	}
	slices.Sort(names)
	return names, nil
}

// EnsureNamespace creates namespace ns unless it exists.
func (s *Stack) EnsureNamespace(ctx context.Context, ns string) error {
	_, err := s.Client().CoreV1().Namespaces().Create(ctx,
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{})
	if err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("creating namespace %s: %w", ns, err)
	}
	return nil
}

// CreateAndWait creates pod (and its namespace if needed) and waits until it
// is bound (node is its node) or the scheduler has given up on it for now
// (pending is true and reason is the message of its FailedScheduling
// event). Either way it then waits until regosched's cache has caught up
// with the bound pods, so that the next pod is judged on what is placed:
// pods are meant to be created one at a time.
func (s *Stack) CreateAndWait(ctx context.Context, pod *corev1.Pod) (node string, pending bool, reason string, err error) {
	if err := s.EnsureNamespace(ctx, pod.Namespace); err != nil {
		return "", false, "", err
	}
	created, err := s.Client().CoreV1().Pods(pod.Namespace).Create(ctx, pod, metav1.CreateOptions{})
	if err != nil {
		return "", false, "", fmt.Errorf("creating pod %s/%s: %w", pod.Namespace, pod.Name, err)
	}
	node, reason, err = s.waitPlacedOrRefused(ctx, created)
	if err != nil {
		return "", false, "", err
	}
	if err := s.WaitCacheCaughtUp(ctx); err != nil {
		return "", false, "", err
	}
	return node, node == "", reason, nil
}

// waitPlacedOrRefused polls until pod is bound (its node) or has a
// FailedScheduling event (its message).
func (s *Stack) waitPlacedOrRefused(ctx context.Context, pod *corev1.Pod) (node, reason string, err error) {
	pods := s.Client().CoreV1().Pods(pod.Namespace)
	err = wait.PollUntilContextTimeout(ctx, pollInterval, scheduleTimeout, true, func(ctx context.Context) (bool, error) {
		if err := s.schedulerAlive(); err != nil {
			return false, err
		}
		p, err := pods.Get(ctx, pod.Name, metav1.GetOptions{})
		if err != nil {
			return false, fmt.Errorf("getting pod %s/%s: %w", pod.Namespace, pod.Name, err)
		}
		if node = p.Spec.NodeName; node != "" {
			return true, nil
		}
		reason, err = s.FailedSchedulingReason(ctx, p)
		return reason != "", err
	})
	if err != nil {
		return "", "", fmt.Errorf("waiting for pod %s/%s to be bound or refused: %w", pod.Namespace, pod.Name, err)
	}
	return node, reason, nil
}

// FailedSchedulingReason returns the message of the newest FailedScheduling
// event of pod, or "" when there is none.
func (s *Stack) FailedSchedulingReason(ctx context.Context, pod *corev1.Pod) (string, error) {
	return FailedSchedulingReason(ctx, s.Client(), pod)
}

// FailedSchedulingReason is Stack.FailedSchedulingReason for the cluster of
// client, for tests that run a scheduler of their own.
func FailedSchedulingReason(ctx context.Context, client kubernetes.Interface, pod *corev1.Pod) (string, error) {
	// The UID tells apart events of an earlier pod of the same name.
	sel := fields.Set{
		"involvedObject.kind":      "Pod",
		"involvedObject.namespace": pod.Namespace,
		"involvedObject.name":      pod.Name,
		"involvedObject.uid":       string(pod.UID),
		"reason":                   "FailedScheduling",
	}.AsSelector().String()
	list, err := client.CoreV1().Events(pod.Namespace).List(ctx, metav1.ListOptions{FieldSelector: sel})
	if err != nil {
		return "", fmt.Errorf("listing events of pod %s/%s: %w", pod.Namespace, pod.Name, err)
	}
	var newest *corev1.Event
	for i := range list.Items {
		if e := &list.Items[i]; newest == nil || eventTime(e).After(eventTime(newest)) {
			newest = e
		}
	}
	if newest == nil {
		return "", nil
	}
	return newest.Message, nil
}

// RemoveTerminating does, for the pods of namespace ns, the one thing a
// kubelet would do here: a pod marked for deletion (a preemption victim)
// goes away. No kubelet runs on the fake nodes to confirm a graceful
// deletion. It returns the names it removed.
func RemoveTerminating(ctx context.Context, client kubernetes.Interface, ns string) ([]string, error) {
	list, err := client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, fmt.Errorf("listing pods of %s: %w", ns, err)
	}
	var gone []string
	for _, p := range list.Items {
		if p.DeletionTimestamp == nil {
			continue
		}
		err := client.CoreV1().Pods(ns).Delete(ctx, p.Name, metav1.DeleteOptions{GracePeriodSeconds: new(int64)})
		if err != nil && !apierrors.IsNotFound(err) {
			return nil, fmt.Errorf("removing pod %s/%s: %w", ns, p.Name, err)
		}
		gone = append(gone, p.Name)
	}
	return gone, nil
}

// eventTime is when an event last happened, whichever API wrote it: the
// scheduler records through events.k8s.io, which fills eventTime and series
// rather than lastTimestamp.
func eventTime(e *corev1.Event) time.Time {
	t := e.LastTimestamp.Time
	if e.Series != nil && e.Series.LastObservedTime.After(t) {
		t = e.Series.LastObservedTime.Time
	}
	if e.EventTime.After(t) {
		t = e.EventTime.Time
	}
	return t
}

// WaitBound waits until the pod is bound and returns its node.
func (s *Stack) WaitBound(ctx context.Context, ns, name string, timeout time.Duration) (string, error) {
	var node string
	err := wait.PollUntilContextTimeout(ctx, pollInterval, timeout, true, func(ctx context.Context) (bool, error) {
		if err := s.schedulerAlive(); err != nil {
			return false, err
		}
		p, err := s.Client().CoreV1().Pods(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, fmt.Errorf("getting pod %s/%s: %w", ns, name, err)
		}
		node = p.Spec.NodeName
		return node != "", nil
	})
	if err != nil {
		return "", fmt.Errorf("waiting for pod %s/%s to be bound: %w", ns, name, err)
	}
	return node, nil
}

// DeletePod deletes a pod at once and waits until regosched's cache has
// caught up. No kubelet runs to confirm a graceful deletion, so a bound pod
// would otherwise stay Terminating forever.
func (s *Stack) DeletePod(ctx context.Context, ns, name string) error {
	err := s.Client().CoreV1().Pods(ns).Delete(ctx, name, metav1.DeleteOptions{GracePeriodSeconds: new(int64)})
	if err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("deleting pod %s/%s: %w", ns, name, err)
	}
	return s.WaitCacheCaughtUp(ctx)
}

// DeleteAllPods deletes every pod of namespace ns at once, waits until they
// are gone and until regosched's cache has caught up. The namespace itself
// stays: no namespace controller runs to finish deleting it.
func (s *Stack) DeleteAllPods(ctx context.Context, ns string) error {
	pods := s.Client().CoreV1().Pods(ns)
	err := pods.DeleteCollection(ctx, metav1.DeleteOptions{GracePeriodSeconds: new(int64)}, metav1.ListOptions{})
	if err != nil {
		return fmt.Errorf("deleting pods of %s: %w", ns, err)
	}
	err = wait.PollUntilContextTimeout(ctx, pollInterval, cacheTimeout, true, func(ctx context.Context) (bool, error) {
		list, err := pods.List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, fmt.Errorf("listing pods of %s: %w", ns, err)
		}
		return len(list.Items) == 0, nil
	})
	if err != nil {
		return fmt.Errorf("waiting for the pods of %s to go: %w", ns, err)
	}
	return s.WaitCacheCaughtUp(ctx)
}

// WaitCacheCaughtUp waits until regosched's regosched_cached_pods metric
// equals the number of bound, unfinished pods the API server has that the
// policy groups. Pods are created one at a time, so equal counts mean the
// last change has reached regosched. It does not see a label change that
// keeps the count; use Sync for that.
func (s *Stack) WaitCacheCaughtUp(ctx context.Context) error {
	last := "not compared yet"
	err := wait.PollUntilContextTimeout(ctx, pollInterval, cacheTimeout, true, func(ctx context.Context) (bool, error) {
		want, err := s.groupedBoundPods(ctx)
		if err != nil {
			return false, err
		}
		got, err := s.CachedPods(ctx)
		if err != nil {
			// Not serving (e.g. between StopExtender and StartExtender):
			// there is no cache to catch up.
			return false, err
		}
		last = fmt.Sprintf("API server has %d grouped bound pods, regosched counts %d", want, got)
		return got == want, nil
	})
	if err != nil {
		return fmt.Errorf("waiting for regosched's cache to catch up (%s): %w", last, err)
	}
	return nil
}

// Sync is a barrier: it returns once regosched's pod informer has seen
// every pod change made before the call, label changes included. It creates
// a bound marker pod in a namespace of its own and waits for the cache to
// count it, then deletes it again: a watch delivers events in order, so
// everything before the marker has been seen too.
func (s *Stack) Sync(ctx context.Context) error {
	const ns = "localstack-sync"
	nodes, err := s.Nodes(ctx)
	if err != nil {
		return err
	}
	if len(nodes) == 0 {
		return fmt.Errorf("sync: no nodes")
	}
	if err := s.EnsureNamespace(ctx, ns); err != nil {
		return err
	}
	// A data pod of a cluster of its own constrains no other pod, and a
	// preset node name skips the scheduler.
	marker := fixture.MakePod().Namespace(ns).Name("marker").Elasticsearch("sync-marker", "data").Schedulable().Node(nodes[0]).Obj()
	if _, err := s.Client().CoreV1().Pods(ns).Create(ctx, marker, metav1.CreateOptions{}); err != nil {
		return fmt.Errorf("sync: creating marker pod: %w", err)
	}
	if err := s.WaitCacheCaughtUp(ctx); err != nil {
		return fmt.Errorf("sync: %w", err)
	}
	return s.DeletePod(ctx, ns, marker.Name)
}

// CachedPods scrapes regosched_cached_pods from regosched's /metrics.
func (s *Stack) CachedPods(ctx context.Context) (int, error) {
	code, body, err := s.get(ctx, "/metrics")
	if err != nil {
		return 0, fmt.Errorf("scraping regosched metrics: %w", err)
	}
	if code != http.StatusOK {
		return 0, fmt.Errorf("scraping regosched metrics: status %d", code)
	}
	return parseGauge(body, "regosched_cached_pods")
}

// Sample scrapes one sample of regosched's /metrics, named as the text
// format writes it: name, or name{label="value",...}.
func (s *Stack) Sample(ctx context.Context, sample string) (int, error) {
	body, err := s.Metrics(ctx)
	if err != nil {
		return 0, err
	}
	return parseGauge(body, sample)
}

// parseGauge finds a sample of name (with its labels, if any, as written)
// in Prometheus text format.
func parseGauge(body []byte, name string) (int, error) {
	sc := bufio.NewScanner(bytes.NewReader(body))
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) >= 2 && fields[0] == name {
			v, err := strconv.ParseFloat(fields[1], 64)
			if err != nil {
				return 0, fmt.Errorf("metric %s: %w", name, err)
			}
			return int(v), nil
		}
	}
	if err := sc.Err(); err != nil {
		return 0, fmt.Errorf("reading metrics: %w", err)
	}
	return 0, fmt.Errorf("metric %s not exposed", name)
}

// groupedBoundPods counts the pods regosched's cache should hold.
func (s *Stack) groupedBoundPods(ctx context.Context) (int, error) {
	list, err := s.Client().CoreV1().Pods(metav1.NamespaceAll).List(ctx, metav1.ListOptions{})
	if err != nil {
		return 0, fmt.Errorf("listing pods: %w", err)
	}
	n := 0
	for i := range list.Items {
		if p := &list.Items[i]; occupiesNode(p) && s.grouped(p.Labels) {
			n++
		}
	}
	return n, nil
}

// occupiesNode reports whether p is bound and not finished.
func occupiesNode(p *corev1.Pod) bool {
	return p.Spec.NodeName != "" && p.Status.Phase != corev1.PodSucceeded && p.Status.Phase != corev1.PodFailed
}

// schedulerAlive fails once kube-scheduler has exited, so that waits end
// with its log instead of a timeout.
func (s *Stack) schedulerAlive() error {
	s.mu.Lock()
	p := s.scheduler
	s.mu.Unlock()
	if p == nil {
		return nil
	}
	select {
	case <-p.Done():
		return fmt.Errorf("kube-scheduler exited: %w\n%s", p.Err(), tail(p.LogPath, 20))
	default:
		return nil
	}
}
