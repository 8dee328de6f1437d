package decisionlog

import (
	"fmt"
	"sort"
)

// MaskMode says what masking does to a masked label.
type MaskMode string

const (
	// MaskDrop removes the label and lists its path under "erased", as OPA's
	// "remove" mask operation does; it is the default because it leaks
	// nothing but that the key was configured.
	MaskDrop MaskMode = "drop"
	// MaskReplace keeps the key with MaskValue as its value and lists its
	// path under "masked", as OPA's "upsert" operation does.
	MaskReplace MaskMode = "replace"
)

// DefaultMaskValue replaces masked labels' values under MaskReplace.
const DefaultMaskValue = "**REDACTED**"

type masker struct {
	keys  map[string]struct{}
	mode  MaskMode
	value string
}

func newMasker(keys []string, mode MaskMode, value string) (*masker, error) {
	switch mode {
	case "":
		mode = MaskDrop
	case MaskDrop, MaskReplace:
	default:
		return nil, fmt.Errorf("decisionlog: mask mode %q: want %q or %q", mode, MaskDrop, MaskReplace)
	}
	if value == "" {
		value = DefaultMaskValue
	}
	m := &masker{keys: make(map[string]struct{}, len(keys)), mode: mode, value: value}
	for _, k := range keys {
		m.keys[k] = struct{}{}
	}
	return m, nil
}

// apply returns the labels to log, and the erased and masked paths, without
// changing labels (the caller's map).
func (m *masker) apply(labels map[string]string) (out map[string]string, erased, masked []string) {
	if len(labels) == 0 {
		return labels, nil, nil
	}
	hit := false
	for k := range labels {
		if _, ok := m.keys[k]; ok {
			hit = true
			break
		}
	}
	if !hit {
		return labels, nil, nil
	}
	out = make(map[string]string, len(labels))
	for k, v := range labels {
		if _, ok := m.keys[k]; !ok {
			out[k] = v
			continue
		}
		path := "/input/pod/labels/" + pointerEscape(k)
		if m.mode == MaskReplace {
			out[k] = m.value
			masked = append(masked, path)
		} else {
			erased = append(erased, path)
		}
	}
	// Map order is random; sorted paths keep events comparable.
	sort.Strings(erased)
	sort.Strings(masked)
	return out, erased, masked
}
