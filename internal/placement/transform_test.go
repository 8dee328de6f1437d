package placement

import (
	"strings"
	"testing"
	"unsafe"
)

// TestStripPodSharesNamespaceAndNode: two decoded pods of one namespace on
// one node keep one copy of each name between them.
func TestStripPodSharesNamespaceAndNode(t *testing.T) {
	record := func(name string) *podRecord {
		p := newPod(strings.Clone("shop"), name, nil, onNode(strings.Clone("node-1")))
		r, err := stripPod(p)
		if err != nil {
			t.Fatal(err)
		}
		return r.(*podRecord)
	}
	a, b := record("a"), record("b")
	if unsafe.StringData(a.namespace) != unsafe.StringData(b.namespace) {
		t.Error("each record keeps its own copy of the namespace")
	}
	if unsafe.StringData(a.nodeName) != unsafe.StringData(b.nodeName) {
		t.Error("each record keeps its own copy of the node name")
	}
}
