// Command regosched is a kube-scheduler extender whose placement rules are
// written in Rego. This package only parses flags and wires; see internal/.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"

	"github.com/spf13/cobra"

	"github.com/regosched/regosched/internal/plumbing/version"
)

// Exit codes, as --help and docs/cli.md list them. 64 is EX_USAGE of
// sysexits.h: a script tells a mistyped call apart from a cluster it could
// not audit (2) and from an audit that found violations (1).
const (
	exitOK         = 0
	exitViolations = 1
	exitFailure    = 2
	exitUsage      = 64
)

const rootLong = `regosched: a kube-scheduler extender with placement rules in Rego.

Exit codes:
  0   success (audit: no placement breaks a hard rule; verify: every expectation holds)
  1   audit: placements break hard rules; verify: an expectation failed
  2   cannot run: the API server cannot be reached, the policy is bad, a suite is missing, ...
  64  usage error: unknown command or flag, bad flag value, missing argument
`

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	code := run(ctx, os.Args[1:], os.Stdin, os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

// run runs regosched with args and returns its exit code; errors are
// written to stderr, one line each, as "regosched: <error>".
func run(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	root := newRootCommand(runServe)
	root.SetIn(stdin)
	root.SetOut(stdout)
	root.SetErr(stderr)
	if len(args) == 0 {
		return exit(stderr, root, usageErrorf("no command given (serve, audit, explain, verify, version, completion)"))
	}
	root.SetArgs(args)
	cmd, err := root.ExecuteContextC(ctx)
	var usage *usageError
	if err != nil && cmd == root && !errors.As(err, &usage) {
		// The root command runs nothing, and its flag errors are usage
		// errors already: the rest is cobra's unknown command, a plain
		// error.
		err = &usageError{fmt.Errorf("%w%s", err, suggest(root, args))}
	}
	return exit(stderr, cmd, err)
}

// newRootCommand is regosched and its commands; serve runs `regosched
// serve` once its flags are parsed.
func newRootCommand(serve serveFunc) *cobra.Command {
	root := &cobra.Command{
		Use:   "regosched",
		Short: "A kube-scheduler extender with placement rules in Rego",
		Long:  rootLong,
		// Errors are written by run, once, in one format; a usage error
		// names --help rather than printing the whole usage.
		SilenceErrors: true,
		SilenceUsage:  true,
		// Suggestions are added by run, on the error's one line.
		DisableSuggestions:         true,
		SuggestionsMinimumDistance: 2,
		Version:                    version.Get().String(),
	}
	root.SetVersionTemplate("{{.Version}}\n")
	root.SetFlagErrorFunc(func(_ *cobra.Command, err error) error { return &usageError{err} })
	root.AddCommand(newServeCommand(serve), newAuditCommand(), newExplainCommand(), newVerifyCommand(), newVersionCommand())
	return root
}

// exit writes err, if any, and returns the exit code it calls for.
func exit(stderr io.Writer, cmd *cobra.Command, err error) int {
	var usage *usageError
	switch {
	case err == nil:
		return exitOK
	case errors.Is(err, errViolations), errors.Is(err, errFailedChecks):
		// The report said it all.
		return exitViolations
	case errors.As(err, &usage):
		fmt.Fprintf(stderr, "regosched: %v\nRun '%s --help' for usage.\n", err, cmd.CommandPath())
		return exitUsage
	default:
		fmt.Fprintf(stderr, "regosched: %v\n", err)
		return exitFailure
	}
}

// suggest names the commands close to the first argument that is not a
// flag (the unknown command), as "; did you mean ...?".
func suggest(root *cobra.Command, args []string) string {
	for _, a := range args {
		if a == "" || a[0] == '-' {
			continue
		}
		switch s := root.SuggestionsFor(a); len(s) {
		case 0:
			return ""
		case 1:
			return fmt.Sprintf("; did you mean %q?", s[0])
		default:
			return fmt.Sprintf("; did you mean one of %q?", s)
		}
	}
	return ""
}
