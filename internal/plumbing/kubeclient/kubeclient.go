// Package kubeclient builds the Kubernetes client of every regosched
// command from one --kubeconfig and one --context flag, so that serve,
// explain and audit talk to the same cluster from the same flags, as
// kubectl would with them.
package kubeclient

import (
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
)

// Target names the cluster a command talks to, as kubectl's --kubeconfig
// and --context name it.
type Target struct {
	// Kubeconfig is the kubeconfig file; "" is $KUBECONFIG, else the pod's
	// in-cluster configuration, else ~/.kube/config.
	Kubeconfig string
	// Context is the kubeconfig context; "" is the current context. A
	// context names an entry of a kubeconfig, so setting it skips the
	// in-cluster configuration.
	Context string
}

// inCluster is the pod's own configuration when t leaves the choice open
// and regosched runs in a pod; nil otherwise.
func (t Target) inCluster() (*rest.Config, error) {
	if t.Kubeconfig != "" || t.Context != "" || os.Getenv(clientcmd.RecommendedConfigPathEnvVar) != "" {
		return nil, nil
	}
	cfg, err := rest.InClusterConfig()
	if err == nil {
		return cfg, nil
	}
	if !errors.Is(err, rest.ErrNotInCluster) {
		return nil, fmt.Errorf("loading in-cluster configuration: %w", err)
	}
	return nil, nil
}

// kubeconfig is t's kubeconfig, loaded as kubectl loads it: the explicit
// path, else $KUBECONFIG's files merged, else ~/.kube/config, with the
// context overridden.
func (t Target) kubeconfig() clientcmd.ClientConfig {
	rules := clientcmd.NewDefaultClientConfigLoadingRules()
	rules.ExplicitPath = t.Kubeconfig
	return clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, &clientcmd.ConfigOverrides{CurrentContext: t.Context})
}

// Config finds the cluster as controller-runtime does: the explicit path,
// else $KUBECONFIG, else the in-cluster configuration of a pod, else
// ~/.kube/config. In a pod that is the service account; on a laptop, the
// current context, or t.Context.
func Config(t Target) (*rest.Config, error) {
	cfg, err := t.inCluster()
	if err != nil || cfg != nil {
		return cfg, err
	}
	cfg, err = t.kubeconfig().ClientConfig()
	if err != nil {
		return nil, fmt.Errorf("loading kubeconfig: %w", err)
	}
	return cfg, nil
}

// Namespace is the namespace kubectl would use without -n: the context's,
// or the pod's own when Config chose the in-cluster configuration, else
// "default".
func Namespace(t Target) (string, error) {
	cfg, err := t.inCluster()
	if err != nil {
		return "", err
	}
	if cfg != nil {
		return inClusterNamespace(), nil
	}
	ns, _, err := t.kubeconfig().Namespace()
	if err != nil {
		return "", fmt.Errorf("loading kubeconfig: %w", err)
	}
	return ns, nil
}

// inClusterNamespace is the pod's namespace, as client-go finds it.
func inClusterNamespace() string {
	if ns := os.Getenv("POD_NAMESPACE"); ns != "" {
		return ns
	}
	if b, err := os.ReadFile("/var/run/secrets/kubernetes.io/serviceaccount/namespace"); err == nil {
		if ns := strings.TrimSpace(string(b)); ns != "" {
			return ns
		}
	}
	return "default"
}

// Contexts lists the contexts of the kubeconfig that path (or, when empty,
// $KUBECONFIG or ~/.kube/config) names, sorted, for shell completion of
// --context.
func Contexts(path string) ([]string, error) {
	raw, err := Target{Kubeconfig: path}.kubeconfig().RawConfig()
	if err != nil {
		return nil, fmt.Errorf("loading kubeconfig: %w", err)
	}
	names := make([]string, 0, len(raw.Contexts))
	for name := range raw.Contexts {
		names = append(names, name)
	}
	slices.Sort(names)
	return names, nil
}

// Fast is cfg with the given rate limits and protobuf, as kube-scheduler
// itself uses: decoding the watch events of every pod in JSON costs a
// long-running regosched more CPU than its decisions do, and client-go's
// default 5 QPS would pace binds at 5 per second.
func Fast(cfg *rest.Config, qps float32, burst int) *rest.Config {
	cfg = rest.CopyConfig(cfg)
	cfg.QPS, cfg.Burst = qps, burst
	cfg.ContentType = runtime.ContentTypeProtobuf
	cfg.AcceptContentTypes = runtime.ContentTypeProtobuf + "," + runtime.ContentTypeJSON
	return cfg
}

// New is a clientset for the cluster Config finds, for the one-shot
// commands (explain, audit).
func New(t Target) (kubernetes.Interface, error) {
	cfg, err := Config(t)
	if err != nil {
		return nil, err
	}
	client, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("creating Kubernetes client: %w", err)
	}
	return client, nil
}
