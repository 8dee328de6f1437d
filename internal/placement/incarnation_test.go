package placement

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/types"
)

// A delete of a pod's old incarnation that arrives after its new one was
// indexed (assumed by the bind verb, or seen) leaves the new one indexed;
// a delete of the incarnation indexed removes it.
func TestLateDeleteOfOldIncarnation(t *testing.T) {
	tests := []struct {
		name      string
		deleteUID types.UID
		want      []string
	}{
		{"old incarnation", "uid-old", []string{"shop/cache-0"}},
		{"the indexed one", "uid-new", []string{}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, _ := startCache(t, byInstance, nil)
			key := []string{"shop/cache"}
			c.Assume(&Pod{Namespace: "shop", Name: "cache-0", UID: "uid-new", Labels: NewLabels(redis("cache", "replica")), Node: "node-2"}, key, nil)
			w := c.writer()
			w.mu.Lock()
			w.remove(&podRecord{namespace: "shop", name: "cache-0", uid: tt.deleteUID, nodeName: "node-1"})
			w.mu.Unlock()
			got := names(c.Peers(key, ""))
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("Peers() after the delete mismatch (-want +got):\n%s", diff)
			}
		})
	}
}
