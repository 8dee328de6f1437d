package regosched

peer_keys contains "all"

# Conflicts and penalties are optional with claims; this spread is invalid.
claims := {
	"marks": {"m": "a pod"},
	"separate": [],
	"spread": [{"mark": "m", "rule": "r", "topology_key": "zone", "weight": -1}],
}
