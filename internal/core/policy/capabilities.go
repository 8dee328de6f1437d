package policy

import (
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/open-policy-agent/opa/v1/ast"
)

// refusedBuiltin reports whether a placement policy may not call the builtin
// name: http.send and the net.* builtins, because a policy evaluated for
// every pod (and a bundle downloaded from a server) must not make the
// scheduler reach out to the network, and opa.runtime, because it would hand
// the bundle the process's environment and configuration if a runtime were
// ever set.
func refusedBuiltin(name string) bool {
	return name == "http.send" || name == "opa.runtime" || strings.HasPrefix(name, "net.")
}

// capabilities is what every bundle is compiled against: this OPA's
// builtins but the refused ones, and no host to connect to, so that a JSON
// schema's remote $ref (json.match_schema, schema annotations) is not
// fetched either.
func capabilities() *ast.Capabilities {
	c := ast.CapabilitiesForThisVersion() // a fresh copy: ours to change
	c.Builtins = slices.DeleteFunc(c.Builtins, func(b *ast.Builtin) bool { return refusedBuiltin(b.Name) })
	c.AllowNet = []string{}
	return c
}

// newCompiler returns a compiler restricted to capabilities().
func newCompiler() *ast.Compiler {
	return ast.NewCompiler().WithCapabilities(capabilities())
}

// errRefusedBuiltin marks a bundle refused for calling a builtin that
// refusedBuiltin names.
var errRefusedBuiltin = errors.New("network builtins (http.send, net.*) and opa.runtime are not allowed in a placement policy")

// compileErrors wraps the errors of a failed compile, saying so when a
// refused builtin is among their causes (OPA reports it as an undefined
// function, with its file and line).
func compileErrors(what string, errs ast.Errors) error {
	for _, e := range errs {
		if name, ok := strings.CutPrefix(e.Message, "undefined function "); ok && refusedBuiltin(name) {
			return fmt.Errorf("%s: %w: %w", what, errRefusedBuiltin, errs)
		}
	}
	return fmt.Errorf("%s: %w", what, errs)
}
