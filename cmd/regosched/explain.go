package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"

	"github.com/sirupsen/logrus"
	corev1 "k8s.io/api/core/v1"

	"github.com/regosched/regosched"
	"github.com/regosched/regosched/internal/bundles"
	"github.com/regosched/regosched/internal/explain"
	"github.com/regosched/regosched/internal/kubeclient"
	"github.com/regosched/regosched/internal/output"
)

// runExplain wires `regosched explain`: flags, the pod file, the policy,
// the client; internal/explain does the work.
func runExplain(args []string) error {
	fs := flag.NewFlagSet("explain", flag.ContinueOnError)
	podFile := fs.String("f", "", "pod manifest, YAML or JSON (- for standard input); required")
	kubeconfig := fs.String("kubeconfig", "", "kubeconfig file (default: $KUBECONFIG, else in-cluster, else ~/.kube/config)")
	policyPath := fs.String("policy", "", "OPA bundle directory or .tar.gz (default: the embedded policy of rego/)")
	policyData := fs.String("policy-data", "", "JSON object merged into the policy's data.regosched.config, as serve's --policy-data")
	outputFlag := fs.String("o", "table", "output format: table or json")
	timeout := fs.Duration("timeout", explain.DefaultSyncTimeout, "how long to wait for the API server and the initial lists of pods and nodes")
	level := fs.String("log-level", "warn", "log level of the placement cache and decisions (to standard error)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("explain takes no arguments, got %q", fs.Args())
	}
	if *podFile == "" {
		fs.Usage()
		return errors.New("explain: -f POD is required")
	}
	format, err := output.ParseFormat(*outputFlag)
	if err != nil {
		return fmt.Errorf("-o: %w", err)
	}
	logger := logrus.New()
	lvl, err := logrus.ParseLevel(*level)
	if err != nil {
		return fmt.Errorf("--log-level: %w", err)
	}
	logger.SetLevel(lvl)

	pod, err := readPodFile(*podFile)
	if err != nil {
		return err
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	pol, source, err := bundles.Options{DataFile: *policyData}.LoadLocal(ctx, *policyPath, regosched.DefaultPolicy())
	if err != nil {
		return err
	}
	client, err := kubeclient.New(*kubeconfig)
	if err != nil {
		return err
	}
	report, err := explain.Explain(ctx, pod, explain.Options{
		Client: client, Policy: pol, PolicySource: source, SyncTimeout: *timeout, Log: logger,
	})
	if err != nil {
		return err
	}
	return explain.Render(os.Stdout, report, format)
}

// readPodFile reads the -f manifest; "-" is standard input.
func readPodFile(path string) (*corev1.Pod, error) {
	var r io.Reader = os.Stdin
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
