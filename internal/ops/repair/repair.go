// Package repair mends the placements that the audit finds broken by a
// change at run time, most often a Redis failover that promotes a replica
// beside a master of its cluster, without moving data:
//
//   - two masters of a Redis Cluster on one node: one of them hands its
//     shard to an in-sync replica that stands elsewhere, by a graceful
//     CLUSTER FAILOVER sent to that replica (never FORCE or TAKEOVER);
//   - a Redis master beside a replica of its own shard: the replica is
//     evicted through the Eviction API (PodDisruptionBudgets apply), and its
//     controller recreates it, which regosched places elsewhere;
//   - any other pair (Elasticsearch data pods, ...): one pod is evicted only
//     when a PodDisruptionBudget covers it; otherwise the repair is a plan.
//
// The repairer runs on the leader after each audit pass (Pass). It acts on
// one violation at a time, across all clusters, and only on facts: the
// roles the labels say are asked again of Redis before anything is sent,
// a role that is unknown or that Redis does not confirm stops it, and so
// does a lost API server. The repair in flight, recent repairs and the
// back-off of failed ones live in a ConfigMap, written before each action,
// so that a new leader follows up a repair it did not start and never
// repeats it.
//
// Its lifecycle per violation:
//
//	violation ──plan──▶ none (why)            [plan mode: RepairPlanned Event]
//	    │
//	    └─ action ──write-ahead──▶ in flight ──cleared──▶ Repaired
//	                                   │
//	                                   └─ error or timeout ──▶ RepairFailed, back off
package repair

import (
	"fmt"
	"time"
)

// Mode is --repair.
type Mode string

const (
	// Off repairs nothing and plans nothing.
	Off Mode = "off"
	// Plan computes each violation's repair and announces it (log, Event,
	// metric) without acting.
	Plan Mode = "plan"
	// On acts.
	On Mode = "on"
)

// ParseMode reads --repair.
func ParseMode(s string) (Mode, error) {
	switch m := Mode(s); m {
	case Off, Plan, On:
		return m, nil
	}
	return "", fmt.Errorf("--repair=%q: want off, plan or on", s)
}

// Action is what a step does.
type Action string

const (
	// Failover sends CLUSTER FAILOVER to a replica.
	Failover Action = "failover"
	// Evict evicts a pod through the Eviction API.
	Evict Action = "evict"
	// None does nothing; the step says why.
	None Action = "none"
)

// Outcomes of regosched_repairs_total.
const (
	OutcomePlanned  = "planned"  // a step with an action, first seen (plan mode)
	OutcomeRefused  = "refused"  // a step without one, first seen: a check said no
	OutcomeStarted  = "started"  // the action was sent
	OutcomeRepaired = "repaired" // the violation cleared after it
	OutcomeFailed   = "failed"   // the action failed, or the violation outlived the timeout
)

// Event reasons on the pods involved.
const (
	ReasonPlanned  = "RepairPlanned"
	ReasonRepaired = "Repaired"
	ReasonFailed   = "RepairFailed"
)

// Defaults of the flags.
const (
	DefaultMaxPerHour  = 6
	DefaultTimeout     = 5 * time.Minute
	DefaultCooldown    = 2 * time.Minute
	DefaultMaxLagBytes = 1 << 20
	DefaultConfigMap   = "regosched-repairs"
)
