package main

import (
	"fmt"

	"github.com/spf13/cobra"
	"sigs.k8s.io/yaml"

	"github.com/regosched/regosched/internal/plumbing/output"
	"github.com/regosched/regosched/internal/plumbing/version"
)

func newVersionCommand() *cobra.Command {
	var format string
	cmd := &cobra.Command{
		Use:               "version",
		Short:             "Print the version: release, commit, Go, platform, Kubernetes API",
		Args:              noArgs,
		ValidArgsFunction: cobra.NoFileCompletions,
		RunE: func(cmd *cobra.Command, _ []string) error {
			info := version.Get()
			out := cmd.OutOrStdout()
			switch format {
			case "":
				_, err := fmt.Fprintln(out, info.String())
				return err
			case "json":
				return output.WriteJSON(out, info)
			case "yaml":
				b, err := yaml.Marshal(info)
				if err != nil {
					return fmt.Errorf("writing YAML: %w", err)
				}
				_, err = out.Write(b)
				return err
			}
			return usageErrorf("-o: unknown output format %q: want json or yaml", format)
		},
	}
	cmd.Flags().StringVarP(&format, "output", "o", "", "output format: json or yaml (default: one line)")
	enumFlag(cmd, "output", "json", "yaml")
	return cmd
}
