package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/spf13/cobra"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/regosched/regosched"
	"github.com/regosched/regosched/internal/core/bundles"
	"github.com/regosched/regosched/internal/ops/explain"
	"github.com/regosched/regosched/internal/plumbing/kubeclient"
	"github.com/regosched/regosched/internal/plumbing/output"
)

// explainFlags are the flags of `regosched explain`.
type explainFlags struct {
	target                               kubeclient.Target
	file, namespace                      string
	policy, policyData, output, logLevel string
	timeout                              time.Duration
	snapshot                             string
}

func newExplainCommand() *cobra.Command {
	var f explainFlags
	cmd := &cobra.Command{
		Use:   "explain (-f FILE | POD)",
		Short: "Show what the policy decides for a pod on every node, and why",
		Long: `Show what the policy decides for a pod on every node of the cluster: filter's verdict, prioritize's
score and the reasons, with the pod's groups and peers.

The pod is a manifest (-f FILE, - for standard input) or a pod of the cluster (POD, read from the
API server, in --namespace). Without --namespace, the namespace is the kubeconfig context's, as
kubectl's; a manifest's own namespace wins, and -n must agree with it.

With --snapshot FILE, the cluster is the file's nodes, pods and StatefulSets (kubectl get
nodes,pods,statefulsets -A -o yaml; StatefulSets are optional and size quorums): POD is read from
it, a manifest is judged against it, no kubeconfig is read, and the namespace defaults to "default".`,
		Example: `  regosched explain -f pod.yaml --policy ./my-bundle
  regosched explain -n shop cache-2 -o json
  regosched explain --snapshot cluster.yaml -n shop cache-2`,
		// POD is a name of the cluster, not a file.
		ValidArgsFunction: cobra.NoFileCompletions,
		Args: func(cmd *cobra.Command, args []string) error {
			switch {
			case len(args) > 1:
				return usageErrorf("explain takes one pod, got %q", args)
			case len(args) == 1 && f.file != "":
				return usageErrorf("explain: give -f FILE or POD, not both")
			case len(args) == 0 && f.file == "":
				return usageErrorf("explain: -f FILE or POD is required")
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			return runExplain(cmd, f, args)
		},
	}
	addClusterFlags(cmd, &f.target.Kubeconfig, &f.target.Context)
	addSnapshotFlag(cmd, &f.snapshot)
	fs := cmd.Flags()
	fs.StringVarP(&f.file, "filename", "f", "", "pod manifest, YAML or JSON (- for standard input); or name a POD of the cluster instead")
	fs.StringVarP(&f.namespace, "namespace", "n", "", "namespace of POD, or of a manifest that names none (default: the kubeconfig context's namespace)")
	fs.StringVar(&f.policy, "policy", "", "OPA bundle directory or .tar.gz (default: the embedded policy of rego/)")
	fs.StringVar(&f.policyData, "policy-data", "", "JSON object merged into the policy's data.regosched.config, as serve's --policy-data")
	fs.StringVarP(&f.output, "output", "o", "table", "output format: table or json")
	fs.DurationVar(&f.timeout, "timeout", explain.DefaultSyncTimeout, "how long to wait for the API server and the initial lists of pods and nodes")
	fs.StringVar(&f.logLevel, "log-level", "warn", "log level of the placement cache and decisions (to standard error)")
	logLevels(cmd)
	enumFlag(cmd, "output", string(output.Table), string(output.JSON))
	return cmd
}

// runExplain wires `regosched explain`: the pod, the policy, the client;
// internal/ops/explain does the work.
func runExplain(cmd *cobra.Command, f explainFlags, args []string) error {
	format, err := output.ParseFormat(f.output)
	if err != nil {
		return usageErrorf("-o: %w", err)
	}
	if err := checkSnapshotFlags(cmd, f.snapshot); err != nil {
		return err
	}
	logger, err := newLogger(cmd.ErrOrStderr(), f.logLevel)
	if err != nil {
		return err
	}
	// A manifest is read first: a mistake in it needs no cluster to tell.
	var pod *corev1.Pod
	if f.file != "" {
		if pod, err = readPodFile(f.file, cmd.InOrStdin()); err != nil {
			return err
		}
		if f.namespace != "" && pod.Namespace != "" && pod.Namespace != f.namespace {
			return usageErrorf("--namespace %q disagrees with the namespace of %s, %q", f.namespace, f.file, pod.Namespace)
		}
	}
	ns := f.namespace
	switch {
	case ns != "" || (pod != nil && pod.Namespace != ""):
	case f.snapshot != "":
		// A snapshot has no context to take a namespace from.
		ns = metav1.NamespaceDefault
	default:
		if ns, err = kubeclient.Namespace(f.target); err != nil {
			return err
		}
	}

	ctx := cmd.Context()
	pol, source, err := bundles.Options{DataFile: f.policyData}.LoadLocal(ctx, f.policy, regosched.DefaultPolicy())
	if err != nil {
		return err
	}
	client, err := clusterClient(f.target, f.snapshot)
	if err != nil {
		return err
	}
	switch {
	case pod == nil:
		if pod, err = getPod(ctx, client, ns, args[0], f.timeout); err != nil {
			return err
		}
	case pod.Namespace == "":
		pod.Namespace = ns
	}
	report, err := explain.Explain(ctx, pod, explain.Options{
		Client: client, Policy: pol, PolicySource: source, SyncTimeout: f.timeout, Log: logger,
	})
	if err != nil {
		return err
	}
	return explain.Render(cmd.OutOrStdout(), report, format)
}

// readPodFile reads the -f manifest; "-" is stdin.
func readPodFile(path string, stdin io.Reader) (*corev1.Pod, error) {
	r := stdin
	if path != "-" {
		f, err := os.Open(path)
		if err != nil {
			return nil, fmt.Errorf("pod file: %w", err)
		}
		defer f.Close()
		r = f
	}
	pod, err := explain.ReadPod(r)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return pod, nil
}

// getPod reads a pod of the cluster, within timeout.
func getPod(ctx context.Context, client kubernetes.Interface, ns, name string, timeout time.Duration) (*corev1.Pod, error) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	pod, err := client.CoreV1().Pods(ns).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return nil, fmt.Errorf("reading pod %s/%s: %w", ns, name, err)
	}
	return pod, nil
}
