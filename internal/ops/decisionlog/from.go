package decisionlog

import (
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/regosched/regosched/internal/core/model"
	"github.com/regosched/regosched/internal/core/policy"
)

// The conversions of the core's neutral answers into events, one place
// for both front ends (the extender's verbs and regosched-scheduler's
// plugin), so that the two builds log the same decision the same way.

// BundleName is the name an event's bundles map the active policy's
// revision under: regosched runs one policy bundle.
const BundleName = "regosched"

// PodOf is pod as an event names it: namespace, name, UID and the labels
// it came with (not those recalled for it). The labels map is shared:
// Enqueue copies it.
func PodOf(pod *v1.Pod) Pod {
	return Pod{Namespace: pod.Namespace, Name: pod.Name, UID: string(pod.UID), Labels: pod.Labels}
}

// DenialsOf appends to out one denial per conflict of cs: its node, its
// rule, and the peer that made it fire, as peerName names it. Front ends
// call it once per refused node, so its cost follows the pod's conflicts,
// never the number of candidates.
func DenialsOf(out []Denial, cs []model.Conflict, peerName func(types.UID) string) []Denial {
	for _, c := range cs {
		out = append(out, Denial{Node: c.Node, Rule: c.Rule, Peer: peerName(c.Peer)})
	}
	return out
}

// BundlesOf is an event's bundles under p: {BundleName: p's revision}, or
// nil for no policy.
func BundlesOf(p *policy.Policy) map[string]string {
	if p == nil {
		return nil
	}
	return map[string]string{BundleName: p.Revision()}
}
