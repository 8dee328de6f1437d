package main

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/spf13/cobra"
	"k8s.io/utils/clock"

	"github.com/regosched/regosched"
	"github.com/regosched/regosched/internal/core/bundles"
	"github.com/regosched/regosched/internal/ops/audit"
	"github.com/regosched/regosched/internal/ops/repair"
	"github.com/regosched/regosched/internal/plumbing/kubeclient"
	"github.com/regosched/regosched/internal/plumbing/output"
)

// errViolations is the audit's answer when a placement breaks a hard rule:
// regosched exits 1 on it, without an error line, so that scripts tell
// that apart from a failure to audit (exit 2).
var errViolations = errors.New("placements break hard rules")

// progressEvery is the shortest time between two progress lines.
const progressEvery = time.Second

// auditFlags are the flags of `regosched audit`.
type auditFlags struct {
	target                        kubeclient.Target
	policy, policyData, output    string
	timeout                       time.Duration
	plan, allNamespaces, progress bool
	namespace, logLevel           string
	snapshot                      string
}

func newAuditCommand() *cobra.Command {
	var f auditFlags
	cmd := &cobra.Command{
		Use:   "audit",
		Short: "Check the bound pods against the hard rules; exit 1 on any violation",
		Long: `Check the bound pods against the hard rules of the policy, once, and print the violations.

With --snapshot FILE, the cluster is the file's nodes, pods and StatefulSets (kubectl get
nodes,pods,statefulsets -A -o yaml; StatefulSets are optional and size quorums), and no kubeconfig
is read.

Exit codes: 0 no violation, 1 violations found, 2 cannot audit (API server, policy, or pods the
policy failed to judge), 64 usage error.`,
		Args:              noArgs,
		ValidArgsFunction: cobra.NoFileCompletions,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return runAudit(cmd, f)
		},
	}
	addClusterFlags(cmd, &f.target.Kubeconfig, &f.target.Context)
	addSnapshotFlag(cmd, &f.snapshot)
	fs := cmd.Flags()
	fs.StringVarP(&f.namespace, "namespace", "n", "", "report only the violations that involve a pod of this namespace (default: all namespaces); every pod is still judged, since a pod elsewhere can break a rule with one of it")
	fs.BoolVarP(&f.allNamespaces, "all-namespaces", "A", false, "report the violations of all namespaces (the default; refused with --namespace)")
	fs.StringVar(&f.policy, "policy", "", "OPA bundle directory or .tar.gz (default: the embedded policy of rego/)")
	fs.StringVar(&f.policyData, "policy-data", "", "JSON object merged into the policy's data.regosched.config, as serve's --policy-data")
	fs.StringVarP(&f.output, "output", "o", "table", "output format: table or json")
	fs.DurationVar(&f.timeout, "timeout", audit.DefaultSyncTimeout, "how long to wait for the API server and the initial lists of pods and nodes")
	fs.BoolVar(&f.plan, "plan", false, "also print, for each violation, the repair 'serve --repair=on' would make and why it is safe, or why none is (Redis is not asked from here: the checks it makes before acting are named)")
	fs.BoolVar(&f.progress, "progress", false, "print progress lines to standard error while listing and judging, about once a second (default: on when standard error is a terminal)")
	fs.StringVar(&f.logLevel, "log-level", "warn", "log level of the placement cache and the audit (to standard error)")
	logLevels(cmd)
	enumFlag(cmd, "output", string(output.Table), string(output.JSON))
	return cmd
}

// runAudit audits once and writes the report to standard output; it
// returns errViolations when the report has any.
func runAudit(cmd *cobra.Command, f auditFlags) error {
	stdout, stderr := cmd.OutOrStdout(), cmd.ErrOrStderr()
	format, err := output.ParseFormat(f.output)
	if err != nil {
		return usageErrorf("-o: %w", err)
	}
	if f.namespace != "" && f.allNamespaces {
		return usageErrorf("--namespace %q and --all-namespaces: give one", f.namespace)
	}
	if err := checkSnapshotFlags(cmd, f.snapshot); err != nil {
		return err
	}
	logger, err := newLogger(stderr, f.logLevel)
	if err != nil {
		return err
	}
	progress := f.progress
	if !cmd.Flags().Changed("progress") {
		progress = isTerminal(stderr)
	}

	ctx := cmd.Context()
	pol, _, err := bundles.Options{DataFile: f.policyData}.LoadLocal(ctx, f.policy, regosched.DefaultPolicy())
	if err != nil {
		return err
	}
	client, err := clusterClient(f.target, f.snapshot)
	if err != nil {
		return err
	}
	var steps []repair.Step
	opts := audit.OnceOptions{Client: client, Policy: pol, SyncTimeout: f.timeout, Log: logger, Namespace: f.namespace}
	if f.plan {
		opts.AfterPass = func(ctx context.Context, cache audit.Placements, r audit.Report) error {
			steps = repair.Steps(ctx, pol, cache, client, nil, repair.DefaultMaxLagBytes, r)
			return nil
		}
	}
	var printer *audit.ProgressPrinter
	if progress {
		printer = audit.NewProgressPrinter(stderr, "regosched audit: ", clock.RealClock{}, progressEvery)
		opts.Progress = printer.Update
	}
	report, err := audit.Once(ctx, opts)
	if printer != nil {
		// Before the report, so that a terminal shows the final counts
		// above it rather than below.
		printer.Done()
	}
	if err != nil {
		return err
	}
	if f.plan {
		err = repair.Render(stdout, report, steps, format)
	} else {
		err = audit.Render(stdout, report, format)
	}
	if err != nil {
		return err
	}
	if len(report.Violations) == 0 && len(report.Skipped) > 0 {
		return fmt.Errorf("the policy failed to judge %d pods; see the log above", len(report.Skipped))
	}
	if len(report.Violations) > 0 {
		return errViolations
	}
	return nil
}
