// Package ops groups the operations tools over the core: audit (rules
// broken where pods stand), repair (undoing what a failover broke),
// explain and verify (one pod, or a suite, offline), shadow (a second
// policy judged, never enforced), decisionlog (OPA decision log events),
// snapshot (a cluster read from a file) and certroll. They import core,
// redis, plumbing and each other; never a front end.
package ops
