package localstack

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os/exec"
	"path/filepath"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/kubernetes"

	"github.com/regosched/regosched/test/fixture"
	"github.com/regosched/regosched/test/localcluster"
)

// bitnamiLabels are the pod labels of Bitnami's redis-cluster chart in
// release (fixture.BitnamiRedisCluster's, less the pod name, which the
// statefulset-controller adds).
func bitnamiLabels(release string) map[string]string {
	l := fixture.MakePod().BitnamiRedisCluster(release).Obj().Labels
	delete(l, "statefulset.kubernetes.io/pod-name")
	return l
}

// evictionSet is the loop's StatefulSet of two pods, pinned to node by its
// first revision: Parallel (as Bitnami's chart), OnDelete (its second
// revision replaces no pod), on kwok's nodes alone.
func evictionSet(ns, name string, podLabels map[string]string, port int, node string) *appsv1.StatefulSet {
	replicas := int32(2)
	pod := fixture.MakePod().Labels(podLabels).Schedulable().
		ContainerPort(portRedis, int32(port)).ContainerPort(portBus, int32(port+10000)).
		NodeSelector(localcluster.KwokNodeLabel, localcluster.KwokNodeValue).Node(node).Obj()
	pod.Spec.Tolerations = []corev1.Toleration{localcluster.KwokToleration()}
	return &appsv1.StatefulSet{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: appsv1.StatefulSetSpec{
			Replicas:            &replicas,
			Selector:            &metav1.LabelSelector{MatchLabels: podLabels},
			ServiceName:         name + "-headless",
			PodManagementPolicy: appsv1.ParallelPodManagement,
			UpdateStrategy:      appsv1.StatefulSetUpdateStrategy{Type: appsv1.OnDeleteStatefulSetStrategyType},
			Template:            corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: podLabels}, Spec: pod.Spec},
		},
	}
}

// evictionBudget allows one of the set's pods down at a time, as
// Bitnami's chart's PodDisruptionBudget does.
func evictionBudget(ns, name string, podLabels map[string]string) *policyv1.PodDisruptionBudget {
	one := intstr.FromInt32(1)
	return &policyv1.PodDisruptionBudget{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec:       policyv1.PodDisruptionBudgetSpec{MaxUnavailable: &one, Selector: &metav1.LabelSelector{MatchLabels: podLabels}},
	}
}

// runningPods returns set's pods that run with an IP and are not going,
// by name.
func runningPods(ctx context.Context, pods interface {
	List(context.Context, metav1.ListOptions) (*corev1.PodList, error)
}, set string) (map[string]corev1.Pod, error) {
	list, err := pods.List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, err
	}
	out := map[string]corev1.Pod{}
	for _, p := range list.Items {
		if strings.HasPrefix(p.Name, set+"-") && p.DeletionTimestamp == nil && p.Status.Phase == corev1.PodRunning && p.Status.PodIP != "" {
			out[p.Name] = p
		}
	}
	return out, nil
}

// podRoles reads the roleOf each of set's pods, by name.
func podRoles(ctx context.Context, client kubernetes.Interface, ns, set string) (map[string]string, error) {
	list, err := client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, fmt.Errorf("listing pods of %s: %w", ns, err)
	}
	out := map[string]string{}
	for _, p := range list.Items {
		if strings.HasPrefix(p.Name, set+"-") && p.DeletionTimestamp == nil {
			out[p.Name] = roleOf(&p)
		}
	}
	return out, nil
}

// auditNamespace runs `regosched audit -o json -n ns` and returns its
// violations, one line each.
func auditNamespace(ctx context.Context, bin, kubeconfig, ns string) ([]string, error) {
	cmd := exec.CommandContext(ctx, bin, "audit", "-o", "json", "-n", ns, "--kubeconfig", kubeconfig)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	var exit *exec.ExitError
	// Exit 1 means violations: read on.
	if err != nil && (!errors.As(err, &exit) || exit.ExitCode() != 1) {
		return nil, fmt.Errorf("%s audit: %w\n%s%s", filepath.Base(bin), err, stdout.String(), stderr.String())
	}
	var report struct {
		Violations []struct {
			Rule string   `json:"rule"`
			Node string   `json:"node"`
			Pods []string `json:"pods"`
		} `json:"violations"`
	}
	if err := json.Unmarshal(stdout.Bytes(), &report); err != nil {
		return nil, fmt.Errorf("%s audit -o json: %w\n%s%s", filepath.Base(bin), err, stdout.String(), stderr.String())
	}
	var out []string
	for _, v := range report.Violations {
		out = append(out, v.Rule+" on "+v.Node+": "+strings.Join(v.Pods, ", "))
	}
	return out, nil
}

// repairedEvictions reads regosched_repairs_total of evictions repaired
// from the /metrics at base.
func repairedEvictions(ctx context.Context, base string) (int, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, base+"/metrics", nil)
	if err != nil {
		return 0, fmt.Errorf("scraping the repairer: %w", err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, fmt.Errorf("scraping the repairer: %w", err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 8<<20))
	if err != nil {
		return 0, fmt.Errorf("scraping the repairer: %w", err)
	}
	return parseGauge(body, `regosched_repairs_total{action="evict",outcome="repaired"}`)
}
