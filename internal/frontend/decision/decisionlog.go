package decision

import (
	"errors"
	"time"

	"k8s.io/apimachinery/pkg/types"
	extenderv1 "k8s.io/kube-scheduler/extender/v1"

	"github.com/regosched/regosched/internal/core/judge"
	"github.com/regosched/regosched/internal/core/policy"
	"github.com/regosched/regosched/internal/ops/decisionlog"
)

// The decision log (Options.DecisionLog): one event per verb call, given
// on the verb's goroutine just before it returns; Enqueue copies what it
// keeps and never waits for the sink. With no decision log none of this
// runs: the verbs only test Options.DecisionLog against nil.
//
// What an event costs must not grow with the candidates beyond what the
// verb already does: a filter call may carry 5,000 node names, and OPA's
// events carry their whole input, which would make each event hundreds of
// kilobytes (OPA's default upload limit is 32 KiB, and an event above it is
// dropped). So an event lists at most decisionlog.MaxListed candidates,
// with their number in node_count; its denials come from the loop that
// already visits each turned-away node, one per conflict; prioritize's
// scores are those below the maximum (the nodes some soft rule penalised),
// picked in the loop that already scores every candidate, and at most
// MaxListed of them. The soft rules' demotions under --soft-rules=filter
// are not listed: they may be most of a large cluster, and carry no rule
// or peer (a total penalty).

// logFilter gives filter's event: f is nil on error.
func (d *Decider) logFilter(start time.Time, args *extenderv1.ExtenderArgs, f *judge.Filtered, err error) {
	dec := decisionlog.Decision{Verb: decisionlog.VerbFilter, Pod: decisionlog.PodOf(args.Pod), Err: err, Took: time.Since(start)}
	dec.Nodes, dec.NodeCount = loggedCandidates(args)
	pol := d.policies.Load()
	if f != nil {
		pol = f.Subject.Policy
		dec.Refused = f.RefusedCount()
		for _, r := range f.Refused {
			dec.Denied = decisionlog.DenialsOf(dec.Denied, r.Conflicts, f.Subject.PeerName)
		}
	}
	dec.Bundles = decisionlog.BundlesOf(pol)
	d.opts.DecisionLog.Enqueue(decisionlog.EventOf(dec))
}

// loggedCandidates are the candidates an event lists and their number: a
// request's NodeNames as they are (Enqueue cuts and copies them), or the
// names of at most MaxListed of its full Nodes.
func loggedCandidates(args *extenderv1.ExtenderArgs) (nodes []string, count int) {
	if args.NodeNames != nil || args.Nodes == nil {
		return candidateNames(args), 0 // Enqueue counts and cuts
	}
	items := args.Nodes.Items
	nodes = make([]string, min(len(items), decisionlog.MaxListed))
	for i := range nodes {
		nodes[i] = items[i].Name
	}
	return nodes, len(items)
}

// scoreRecord gathers prioritize's event while its scores are ranged
// over; a nil record gathers nothing.
type scoreRecord struct {
	start     time.Time
	scores    map[string]int64
	truncated bool
}

// add records a score below the maximum, up to MaxListed of them.
func (r *scoreRecord) add(node string, score int64) {
	if len(r.scores) == decisionlog.MaxListed {
		r.truncated = true
		return
	}
	if r.scores == nil {
		r.scores = map[string]int64{}
	}
	r.scores[node] = score
}

// log gives prioritize's event, once; pol is nil when none was active.
func (r *scoreRecord) log(d *Decider, args *extenderv1.ExtenderArgs, pol *policy.Policy, err error) {
	if r == nil {
		return
	}
	dec := decisionlog.Decision{Verb: decisionlog.VerbPrioritize, Pod: decisionlog.PodOf(args.Pod), Bundles: decisionlog.BundlesOf(pol),
		Scores: r.scores, ScoresCut: r.truncated, Err: err, Took: time.Since(r.start)}
	dec.Nodes, dec.NodeCount = loggedCandidates(args)
	d.opts.DecisionLog.Enqueue(decisionlog.EventOf(dec))
}

// logPreempt gives preempt's event: the candidates asked about, and the
// victims of each candidate kept (namespace/name when regosched knows the
// pod, its UID otherwise). The scheduler sends a bounded number of
// preemption candidates (at most 100 by default), each of which preempt
// has visited already.
func (d *Decider) logPreempt(start time.Time, args *extenderv1.ExtenderPreemptionArgs, s *judge.Subject, res *extenderv1.ExtenderPreemptionResult, err error) {
	dec := decisionlog.Decision{Verb: decisionlog.VerbPreempt, Pod: decisionlog.PodOf(args.Pod), Err: err, Took: time.Since(start),
		NodeCount: len(args.NodeNameToMetaVictims) + len(args.NodeNameToVictims)}
	pol := d.policies.Load()
	if s != nil {
		pol = s.Policy
	}
	dec.Bundles = decisionlog.BundlesOf(pol)
	if err == nil {
		for node, mv := range res.NodeNameToMetaVictims {
			if len(dec.Victims) == decisionlog.MaxListed {
				dec.VictimsCut = true
				break
			}
			v := decisionlog.Victim{Node: node}
			for _, p := range mv.Pods {
				v.Pods = append(v.Pods, d.podName(s, types.UID(p.UID)))
			}
			dec.Victims = append(dec.Victims, v)
		}
	}
	d.opts.DecisionLog.Enqueue(decisionlog.EventOf(dec))
}

// podName names the pod uid by namespace/name when s or the placements
// hold it, by its UID otherwise.
func (d *Decider) podName(s *judge.Subject, uid types.UID) string {
	if s != nil {
		if p, ok := s.Peer(uid); ok {
			return p.Key()
		}
	}
	if p, ok := d.placements.PodByUID(uid); ok {
		return p.Key()
	}
	return string(uid)
}

// bindRecord gathers bind's event while it decides.
type bindRecord struct {
	start time.Time
	// policy is the policy the bind was last judged under, if any.
	policy *policy.Policy
	// denied are the conflicts that refused the node.
	denied []decisionlog.Denial
}

// logBind gives bind's event. The request names the pod only; its labels
// are not logged.
func (d *Decider) logBind(rec *bindRecord, args *extenderv1.ExtenderBindingArgs, err error) {
	pol := rec.policy
	if pol == nil {
		pol = d.policies.Load()
	}
	d.opts.DecisionLog.Enqueue(decisionlog.EventOf(decisionlog.Decision{
		Verb: decisionlog.VerbBind, Pod: decisionlog.Pod{Namespace: args.PodNamespace, Name: args.PodName, UID: string(args.PodUID)},
		Bundles: decisionlog.BundlesOf(pol), Node: args.Node, Denied: rec.denied,
		Err: err, BindRefused: errors.Is(err, ErrRefused), Took: time.Since(rec.start),
	}))
}
