package model

import "k8s.io/apimachinery/pkg/types"

// Conflict says that the pending pod must not share Node with the peer Peer.
type Conflict struct {
	Node   string
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
