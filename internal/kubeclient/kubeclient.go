// Package kubeclient builds the Kubernetes client of every regosched
// command from one --kubeconfig flag, so that serve, explain and audit talk
// to the same cluster from the same flags.
package kubeclient

import (
	"errors"
	"fmt"
	"os"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
)

// Config finds the cluster as controller-runtime does: the explicit path,
// else $KUBECONFIG, else the in-cluster configuration of a pod, else
// ~/.kube/config. In a pod that is the service account; on a laptop, the
// current context.
func Config(path string) (*rest.Config, error) {
	if path == "" && os.Getenv(clientcmd.RecommendedConfigPathEnvVar) == "" {
		cfg, err := rest.InClusterConfig()
		if err == nil {
			return cfg, nil
		}
		if !errors.Is(err, rest.ErrNotInCluster) {
			return nil, fmt.Errorf("loading in-cluster configuration: %w", err)
		}
	}
	rules := clientcmd.NewDefaultClientConfigLoadingRules()
	rules.ExplicitPath = path
	cfg, err := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, &clientcmd.ConfigOverrides{}).ClientConfig()
	if err != nil {
		return nil, fmt.Errorf("loading kubeconfig: %w", err)
	}
	return cfg, nil
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
func New(path string) (kubernetes.Interface, error) {
	cfg, err := Config(path)
	if err != nil {
		return nil, err
	}
	client, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("creating Kubernetes client: %w", err)
	}
	return client, nil
}
