package main

import (
	"bytes"
	"errors"
	"flag"
	"fmt"
	"os"

	cdx "github.com/CycloneDX/cyclonedx-go"
)

// runSBOM rewrites CycloneDX JSON SBOMs in place without the hashes of the
// modules named by -local. cyclonedx-gomod hashes a module replaced by a
// local directory (scheduler/'s `replace github.com/regosched/regosched => ..`)
// over everything in that directory, .git and dist/ included: a hash no
// one can check, which differs between two checkouts of one commit.
func runSBOM(args []string) error {
	fs := flag.NewFlagSet("sbom", flag.ContinueOnError)
	var local stringList
	fs.Var(&local, "local", "a module path whose hashes to drop (repeatable)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if len(local) == 0 || fs.NArg() == 0 {
		return errors.New("usage: sbom -local MODULE [-local MODULE] FILE.cdx.json [FILE.cdx.json]")
	}
	for _, path := range fs.Args() {
		in, err := os.ReadFile(path)
		if err != nil {
			return fmt.Errorf("read the SBOM: %w", err)
		}
		out, err := dropHashes(in, local)
		if err != nil {
			return fmt.Errorf("%s: %w", path, err)
		}
		if err := os.WriteFile(path, out, 0o644); err != nil {
			return fmt.Errorf("write the SBOM: %w", err)
		}
	}
	return nil
}

// dropHashes decodes a JSON SBOM, drops the hashes of the components named
// in modules, and encodes it again as cyclonedx-gomod does (pretty, in the
// BOM's own spec version).
func dropHashes(in []byte, modules []string) ([]byte, error) {
	var bom cdx.BOM
	if err := cdx.NewBOMDecoder(bytes.NewReader(in), cdx.BOMFileFormatJSON).Decode(&bom); err != nil {
		return nil, fmt.Errorf("decode: %w", err)
	}
	drop := map[string]bool{}
	for _, m := range modules {
		drop[m] = true
	}
	if bom.Metadata != nil && bom.Metadata.Component != nil {
		unhash(bom.Metadata.Component, drop)
	}
	if bom.Components != nil {
		for i := range *bom.Components {
			unhash(&(*bom.Components)[i], drop)
		}
	}
	var buf bytes.Buffer
	if err := cdx.NewBOMEncoder(&buf, cdx.BOMFileFormatJSON).SetPretty(true).EncodeVersion(&bom, bom.SpecVersion); err != nil {
		return nil, fmt.Errorf("encode: %w", err)
	}
	return buf.Bytes(), nil
}

// unhash drops c's hashes if it is one of drop's modules, and its
// subcomponents' likewise.
func unhash(c *cdx.Component, drop map[string]bool) {
	if drop[c.Name] {
		c.Hashes = nil
	}
	if c.Components != nil {
		for i := range *c.Components {
			unhash(&(*c.Components)[i], drop)
		}
	}
}

// stringList is a repeatable string flag.
type stringList []string

func (s *stringList) String() string { return fmt.Sprint(*s) }

func (s *stringList) Set(v string) error {
	*s = append(*s, v)
	return nil
}
