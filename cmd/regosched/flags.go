package main

import (
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/sirupsen/logrus"
	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"golang.org/x/term"
	"k8s.io/client-go/kubernetes"

	"github.com/regosched/regosched/internal/frontend/settings"
	"github.com/regosched/regosched/internal/ops/snapshot"
	"github.com/regosched/regosched/internal/plumbing/kubeclient"
)

// usageError is a mistake in how regosched was called: an unknown command
// or flag, a bad flag value, a missing argument. It exits 64 and points at
// --help.
type usageError struct{ err error }

func (e *usageError) Error() string { return e.err.Error() }
func (e *usageError) Unwrap() error { return e.err }

func usageErrorf(format string, a ...any) error {
	return &usageError{fmt.Errorf(format, a...)}
}

// noArgs refuses positional arguments as a usage error (cobra.NoArgs's is
// a plain error).
func noArgs(cmd *cobra.Command, args []string) error {
	if len(args) > 0 {
		return usageErrorf("%s takes no arguments, got %q", cmd.Name(), args)
	}
	return nil
}

// addClusterFlags adds --kubeconfig and --context, as kubectl names them,
// to the commands that talk to the API server.
func addClusterFlags(cmd *cobra.Command, kubeconfig, kubeContext *string) {
	fs := cmd.Flags()
	fs.StringVar(kubeconfig, "kubeconfig", "", "kubeconfig file (default: $KUBECONFIG, else in-cluster, else ~/.kube/config)")
	fs.StringVar(kubeContext, "context", "", "kubeconfig context to use (default: the kubeconfig's current context); reads the kubeconfig even in a pod")
	mustRegister(cmd, "context", func(*cobra.Command, []string, string) ([]cobra.Completion, cobra.ShellCompDirective) {
		names, err := kubeclient.Contexts(*kubeconfig)
		if err != nil {
			return nil, cobra.ShellCompDirectiveError
		}
		return names, cobra.ShellCompDirectiveNoFileComp
	})
}

// enumFlag completes flag's values from choices.
func enumFlag(cmd *cobra.Command, flag string, choices ...string) {
	mustRegister(cmd, flag, cobra.FixedCompletions(choices, cobra.ShellCompDirectiveNoFileComp))
}

// mustRegister registers a flag's completion; it fails only for a flag the
// command does not have, a mistake of this package caught by any test.
func mustRegister(cmd *cobra.Command, flag string, f cobra.CompletionFunc) {
	if err := cmd.RegisterFlagCompletionFunc(flag, f); err != nil {
		panic(err)
	}
}

// logLevels completes --log-level with the levels logrus parses.
func logLevels(cmd *cobra.Command) {
	enumFlag(cmd, "log-level", "debug", "info", "warn", "error")
}

// newLogger is a logger to w at the --log-level level.
func newLogger(w io.Writer, level string) (*logrus.Logger, error) {
	lvl, err := logrus.ParseLevel(level)
	if err != nil {
		return nil, usageErrorf("--log-level: %w", err)
	}
	logger := logrus.New()
	logger.SetOutput(w)
	logger.SetLevel(lvl)
	return logger, nil
}

// addSettings adds a flag for each setting, with its default and help. A
// setting of a type no flag takes is a mistake of internal/frontend/settings,
// caught by any test of serve's flags.
func addSettings(fs *pflag.FlagSet, list ...settings.Setting) {
	for _, s := range list {
		switch v := s.Value.(type) {
		case *string:
			fs.StringVar(v, s.Flag, s.Default.(string), s.Usage)
		case *bool:
			fs.BoolVar(v, s.Flag, s.Default.(bool), s.Usage)
		case *int:
			fs.IntVar(v, s.Flag, s.Default.(int), s.Usage)
		case *int64:
			fs.Int64Var(v, s.Flag, s.Default.(int64), s.Usage)
		case *float64:
			fs.Float64Var(v, s.Flag, s.Default.(float64), s.Usage)
		case *time.Duration:
			fs.DurationVar(v, s.Flag, s.Default.(time.Duration), s.Usage)
		case *[]string:
			*v = s.Default.([]string)
			fs.Var(commaList{v}, s.Flag, s.Usage)
		default:
			panic(fmt.Sprintf("setting %s: no flag takes a %T", s.Flag, s.Value))
		}
	}
}

// commaList is a flag of comma-separated items, spaces around each trimmed
// and empty ones dropped; each use of the flag replaces the last.
type commaList struct{ items *[]string }

func (c commaList) String() string { return strings.Join(*c.items, ",") }
func (c commaList) Type() string   { return "strings" }
func (c commaList) Set(v string) error {
	var out []string
	for item := range strings.SplitSeq(v, ",") {
		if item = strings.TrimSpace(item); item != "" {
			out = append(out, item)
		}
	}
	*c.items = out
	return nil
}

var _ pflag.Value = commaList{}

// isTerminal says whether w is a terminal, for output meant for people
// only (audit's progress).
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	return ok && term.IsTerminal(int(f.Fd()))
}

// addSnapshotFlag adds --snapshot to the commands that can read a cluster
// from a file instead of the API server (audit, explain).
func addSnapshotFlag(cmd *cobra.Command, path *string) {
	cmd.Flags().StringVar(path, "snapshot", "", "read the nodes, pods and StatefulSets from this file (kubectl get nodes,pods,statefulsets -A -o yaml or -o json, or a YAML stream of them; StatefulSets are optional and size quorums) instead of the API server; no kubeconfig is read (refused with --kubeconfig and --context)")
	mustRegister(cmd, "snapshot", func(*cobra.Command, []string, string) ([]cobra.Completion, cobra.ShellCompDirective) {
		return []cobra.Completion{"yaml", "yml", "json"}, cobra.ShellCompDirectiveFilterFileExt
	})
}

// checkSnapshotFlags refuses --snapshot with --kubeconfig or --context: a
// snapshot is the whole cluster, and a kubeconfig would be silently
// ignored.
func checkSnapshotFlags(cmd *cobra.Command, snapshotPath string) error {
	if snapshotPath == "" {
		return nil
	}
	for _, name := range []string{"kubeconfig", "context"} {
		if cmd.Flags().Changed(name) {
			return usageErrorf("--snapshot and --%s: give one", name)
		}
	}
	return nil
}

// clusterClient is the client of a command's cluster: the snapshot's
// read-only one when --snapshot names a file, else the API server's.
func clusterClient(target kubeclient.Target, snapshotPath string) (kubernetes.Interface, error) {
	if snapshotPath == "" {
		return kubeclient.New(target)
	}
	snap, err := snapshot.LoadFile(snapshotPath, snapshot.Limits{})
	if err != nil {
		return nil, err
	}
	return snap.Client(), nil
}
