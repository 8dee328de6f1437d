// Package core groups regosched's core: model (the neutral types),
// policy (Rego: what one pod is and avoids), bundles (where a policy
// comes from), placement (the live cache of pods and nodes) and judge
// (the phases: filter, score, victims, place, stand). Core packages
// import only core and plumbing; every other group may import them.
package core
