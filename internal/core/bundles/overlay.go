package bundles

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"path/filepath"

	"github.com/open-policy-agent/opa/v1/bundle"
)

// overlayRoot is where a data overlay lands: the default policy's settings
// (workloads, label schemes, weights).
var overlayRoot = []string{"regosched", "config"}

// withDataOverlay returns b with the JSON object in file merged into its
// data.regosched.config: objects merge key by key, a null removes the key,
// anything else replaces what the bundle has. b itself is left unchanged.
// The result is checked like any bundle's data (validate.rego), so a
// misspelt key in the overlay is refused with the bundle.
func withDataOverlay(b *bundle.Bundle, file string, limit int64) (*bundle.Bundle, error) {
	overlay, err := readOverlay(file, limit)
	if err != nil {
		return nil, err
	}
	out := *b
	out.Data = maps.Clone(b.Data)
	if out.Data == nil {
		out.Data = map[string]any{}
	}
	parent := out.Data
	for _, k := range overlayRoot[:len(overlayRoot)-1] {
		child, _ := parent[k].(map[string]any)
		child = maps.Clone(child)
		if child == nil {
			child = map[string]any{}
		}
		parent[k] = child
		parent = child
	}
	last := overlayRoot[len(overlayRoot)-1]
	base, _ := parent[last].(map[string]any)
	parent[last] = merge(base, overlay)
	return &out, nil
}

// readOverlay reads a JSON object of at most limit bytes.
func readOverlay(file string, limit int64) (map[string]any, error) {
	f, err := os.Open(file)
	if err != nil {
		return nil, fmt.Errorf("reading policy data overlay: %w", err)
	}
	defer func() { _ = f.Close() }()
	raw, err := io.ReadAll(io.LimitReader(f, limit+1))
	if err != nil {
		return nil, fmt.Errorf("reading policy data overlay %s: %w", file, err)
	}
	if int64(len(raw)) > limit {
		return nil, fmt.Errorf("policy data overlay %s is larger than %d bytes", file, limit)
	}
	var overlay map[string]any
	if err := json.Unmarshal(raw, &overlay); err != nil {
		return nil, fmt.Errorf("policy data overlay %s: want a JSON object of data.regosched.config settings: %w", file, err)
	}
	if overlay == nil {
		return nil, errors.New("policy data overlay " + file + ": want a JSON object, got null")
	}
	return overlay, nil
}

// merge returns base with overlay merged in, without modifying either.
func merge(base, overlay map[string]any) map[string]any {
	out := maps.Clone(base)
	if out == nil {
		out = map[string]any{}
	}
	for k, v := range overlay {
		if v == nil {
			delete(out, k)
			continue
		}
		if vm, ok := v.(map[string]any); ok {
			if bm, ok := out[k].(map[string]any); ok {
				out[k] = merge(bm, vm)
				continue
			}
		}
		out[k] = v
	}
	return out
}

// overlayFingerprint identifies the overlay without reading it: the file it
// resolves to (a ConfigMap volume points its files at a new directory
// through a ..data symlink, leaving the link itself as it was), that file's
// identity on disk, size and modification time. A change of any reloads
// the overlay, which is read within its limit then.
func overlayFingerprint(file string) (string, error) {
	resolved, err := filepath.EvalSymlinks(file)
	if err != nil {
		return "", fmt.Errorf("reading policy data overlay: %w", err)
	}
	info, err := os.Stat(resolved)
	if err != nil {
		return "", fmt.Errorf("reading policy data overlay: %w", err)
	}
	sum := sha256.Sum256(fmt.Appendf(nil, "%s\x00%d\x00%d\x00%s", resolved, info.Size(), info.ModTime().UnixNano(), fileID(info)))
	return hex.EncodeToString(sum[:]), nil
}
