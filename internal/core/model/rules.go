package model

import (
	"strings"

	"k8s.io/apimachinery/pkg/types"
)

// HostnameKey is the topology key that names a node: its domain is the node
// itself, labelled or not.
const HostnameKey = "kubernetes.io/hostname"

// Domain is a topology domain: the nodes whose label Key is Value. Under
// HostnameKey it is the one node named Value, whatever its labels say.
type Domain struct {
	Key, Value string
}

// Holds reports whether the node named name, with labels, is in d. A node
// without d's key among its labels is in none of that key's domains.
func (d Domain) Holds(name string, labels map[string]string) bool {
	if d.Key == HostnameKey {
		return d.Value == name
	}
	v, ok := labels[d.Key]
	return ok && v == d.Value
}

// OnNode reports whether d is the one node name.
func (d Domain) OnNode() bool { return d.Key == HostnameKey }

// KeyWord is a topology key's last word, as people name its domains:
// "zone" for topology.kubernetes.io/zone.
func KeyWord(key string) string { return key[strings.LastIndexByte(key, '/')+1:] }

// String is the domain as a label selector says it (key=value).
func (d Domain) String() string { return d.Key + "=" + d.Value }

// Conflict says that the pending pod must not be placed in Domain, where
// the peer Peer stands on its node Node. For a rule per node the domain is
// that node.
type Conflict struct {
	Node   string
	Domain Domain
	Rule   string
	Reason string
	Peer   types.UID
}

// Penalty makes every node whose label TopologyKey equals Value less
// preferred by Weight. The key kubernetes.io/hostname matches the node name.
type Penalty struct {
	TopologyKey string
	Value       string
	Weight      float64
	Rule        string
	Peer        types.UID
}
