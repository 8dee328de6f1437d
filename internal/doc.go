// Package internal is regosched's product code, in five groups; each
// group's package comment says what it holds and what may import it, and
// TestLayout holds every import to those rules.
//
//   - core: the neutral model, the policy, its bundles, the placement
//     cache and the judge, which decides whole phases. It imports only
//     core and plumbing.
//   - frontend: what kube-scheduler talks to (the extender's verbs and
//     their adapter) and `regosched serve`, which assembles a process. It
//     may import every group.
//   - ops: the operations tools over the core: audit, repair, explain,
//     verify, shadow, decision logs, snapshots, certificate rolls. They
//     import core, redis, plumbing and each other, never a front end.
//   - redis: reading Redis itself (roles, replies), for the core's live
//     facts. It imports core, plumbing and redis.
//   - plumbing: generic parts (logs, TLS, leader election, clients,
//     output formats, versions). It imports no other group.
//
// Nothing here imports the test harness (test/), and neither does cmd/.
package internal
