package main

import (
	"errors"
	"fmt"
	"regexp"

	"github.com/spf13/cobra"

	"github.com/regosched/regosched"
	"github.com/regosched/regosched/internal/core/bundles"
	"github.com/regosched/regosched/internal/ops/verify"
)

// errFailedChecks is verify's answer when an expectation fails: exit 1,
// without an error line, as audit's violations.
var errFailedChecks = errors.New("suites' expectations failed")

// verifyFlags are the flags of `regosched verify`.
type verifyFlags struct {
	policy, policyData, output, logLevel, run string
	allowOutsideSuite                         bool
}

func newVerifyCommand() *cobra.Command {
	var f verifyFlags
	cmd := &cobra.Command{
		Use:   "verify SUITE...",
		Short: "Run policy test suites offline: expected verdicts per node on cluster snapshots",
		Long: `Run policy test suites offline, as gator verify and kyverno test do: no cluster, no kubeconfig.

A suite (YAML, kind Suite, apiVersion regosched.io/v1alpha1) names a cluster snapshot (kubectl get
nodes,pods,statefulsets -A -o yaml, or objects inline) and pods to place, and expects, per pod, the
nodes allowed and those denied, by which rule and peer, the score order, the pod's groups and
protection; and of an audit of the snapshot, the violations and unprotected pods. Each pod is judged as the running
extender judges it. A directory runs every suite file in it, recursively; other YAML files are
skipped. docs/policies.md describes the format. A suite's snapshot is a regular file in the suite's
directory tree (symlinks resolved) unless --allow-outside-suite.

Exit codes: 0 every expectation holds, 1 an expectation failed, 2 a suite could not run (a missing
file or pod, a policy error), 64 usage error.`,
		Example: `  regosched verify testdata/suites
  regosched verify --policy ./my-bundle suites/ -o junit > verify.xml
  regosched verify suites/redis.yaml --run 'redis/second master'`,
		Args: func(_ *cobra.Command, args []string) error {
			if len(args) == 0 {
				return usageErrorf("verify: give at least one suite file or directory")
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			return runVerify(cmd, f, args)
		},
	}
	fs := cmd.Flags()
	fs.StringVar(&f.policy, "policy", "", "OPA bundle directory or .tar.gz (default: the embedded policy of rego/)")
	fs.StringVar(&f.policyData, "policy-data", "", "JSON object merged into the policy's data.regosched.config, as serve's --policy-data")
	fs.StringVarP(&f.output, "output", "o", "table", "output format: table, json or junit (JUnit XML, for CI)")
	fs.StringVar(&f.run, "run", "", "run only the cases whose SUITE/CASE matches this regular expression (a suite's audit is SUITE/audit)")
	fs.BoolVar(&f.allowOutsideSuite, "allow-outside-suite", false, "let a suite's snapshot be an absolute path or lie outside the suite's directory tree (symlinks resolved)")
	fs.StringVar(&f.logLevel, "log-level", "error", "log level of the placement cache and decisions (to standard error)")
	logLevels(cmd)
	enumFlag(cmd, "output", string(verify.Table), string(verify.JSON), string(verify.JUnit))
	return cmd
}

// runVerify wires `regosched verify`; internal/ops/verify does the work.
func runVerify(cmd *cobra.Command, f verifyFlags, args []string) error {
	format, err := verify.ParseFormat(f.output)
	if err != nil {
		return usageErrorf("-o: %w", err)
	}
	var run *regexp.Regexp
	if f.run != "" {
		if run, err = regexp.Compile(f.run); err != nil {
			return usageErrorf("--run: %w", err)
		}
	}
	logger, err := newLogger(cmd.ErrOrStderr(), f.logLevel)
	if err != nil {
		return err
	}
	// Every suite is read before any runs: a mistake in the last one is
	// told at once, not after minutes of the others.
	suites, err := verify.Discover(args)
	if err != nil {
		return err
	}
	ctx := cmd.Context()
	pol, source, err := bundles.Options{DataFile: f.policyData}.LoadLocal(ctx, f.policy, regosched.DefaultPolicy())
	if err != nil {
		return err
	}
	report, err := verify.Run(ctx, suites, verify.Options{
		Policy: pol, PolicySource: source, Run: run, AllowOutsideSuite: f.allowOutsideSuite, Log: logger,
	})
	if err != nil {
		return err
	}
	if err := verify.Render(cmd.OutOrStdout(), report, format); err != nil {
		return err
	}
	switch {
	case report.Errors > 0:
		return fmt.Errorf("%d suites or cases could not run; see the report", report.Errors)
	case report.Failed > 0:
		return errFailedChecks
	case report.Passed == 0:
		return fmt.Errorf("no check ran (--run %q selects no case)", f.run)
	}
	return nil
}
