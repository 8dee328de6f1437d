package verify

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"time"

	"github.com/sirupsen/logrus"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/regosched/regosched/internal/core/judge"
	"github.com/regosched/regosched/internal/core/model"
	"github.com/regosched/regosched/internal/core/policy"
	"github.com/regosched/regosched/internal/ops/audit"
	"github.com/regosched/regosched/internal/ops/explain"
	"github.com/regosched/regosched/internal/ops/snapshot"
)

// syncTimeout bounds the wait for a snapshot's lists, which are in memory.
const syncTimeout = 30 * time.Second

// Options configure Run.
type Options struct {
	Policy *policy.Policy
	// PolicySource names where Policy came from, for the report.
	PolicySource string
	// Run, when set, runs only the cases (and audits, named "audit") whose
	// "suite/case" matches it.
	Run *regexp.Regexp
	// Limits bound each suite's snapshot.
	Limits snapshot.Limits
	// AllowOutsideSuite lets a suite's snapshot be an absolute path or lie
	// outside the suite's directory tree, which a suite from elsewhere
	// could otherwise use to read any file of the machine.
	AllowOutsideSuite bool
	// Log receives the placement cache's and the decisions' logs.
	Log logrus.FieldLogger
}

// Report is the result of a run of suites.
type Report struct {
	Policy explain.PolicyInfo `json:"policy"`
	Suites []SuiteResult      `json:"suites"`
	// Passed and Failed count the checks; Errors counts the cases and
	// audits that could not run.
	Passed int `json:"passed"`
	Failed int `json:"failed"`
	Errors int `json:"errors"`
}

// OK reports whether every check passed and everything ran.
func (r *Report) OK() bool { return r.Failed == 0 && r.Errors == 0 }

// SuiteResult is one suite's cases.
type SuiteResult struct {
	Name string `json:"name"`
	File string `json:"file"`
	// Error is why the suite could not run at all (its snapshot).
	Error string       `json:"error,omitempty"`
	Cases []CaseResult `json:"cases"`
}

// CaseResult is one case's checks, or the audit's (Name "audit").
type CaseResult struct {
	Name string `json:"name"`
	// Pod is the pod judged (namespace/name); empty for the audit.
	Pod string `json:"pod,omitempty"`
	// Error is why the case could not run; its checks are then absent.
	Error    string        `json:"error,omitempty"`
	Checks   []Check       `json:"checks"`
	Duration time.Duration `json:"durationNanoseconds"`
}

// Failed reports whether a check failed or the case did not run.
func (c *CaseResult) Failed() bool {
	return c.Error != "" || slices.ContainsFunc(c.Checks, func(k Check) bool { return !k.Passed })
}

// Check is one expectation and what the policy decided.
type Check struct {
	// Name says what is checked, e.g. "node-a denied".
	Name   string `json:"name"`
	Passed bool   `json:"passed"`
	Want   string `json:"want"`
	Got    string `json:"got"`
}

// AuditCase is the name of a suite's audit in its results.
const AuditCase = "audit"

// ErrFailed is returned by Run's callers' checks: a report with failures.
var ErrFailed = errors.New("verify: expectations failed")

// Run runs suites under opts.Policy. A suite or a case that cannot run
// (a snapshot or a pod missing, a policy error) is reported as an error
// in its result, and the others still run; Run itself fails only when
// ctx ends.
func Run(ctx context.Context, suites []*Suite, opts Options) (*Report, error) {
	if opts.Policy == nil || opts.Log == nil {
		return nil, errors.New("verify: Policy and Log are required")
	}
	r := &Report{Policy: explain.PolicyInfo{Source: opts.PolicySource, Revision: opts.Policy.Revision()}, Suites: []SuiteResult{}}
	for _, s := range suites {
		sr := runSuite(ctx, s, opts)
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		if sr.Error != "" {
			r.Errors++
		}
		for _, c := range sr.Cases {
			if c.Error != "" {
				r.Errors++
			}
			for _, k := range c.Checks {
				if k.Passed {
					r.Passed++
				} else {
					r.Failed++
				}
			}
		}
		r.Suites = append(r.Suites, sr)
	}
	return r, nil
}

// selected reports whether opts.Run selects case name of s.
func (o Options) selected(s *Suite, name string) bool {
	return o.Run == nil || o.Run.MatchString(s.Name()+"/"+name)
}

func runSuite(ctx context.Context, s *Suite, opts Options) SuiteResult {
	sr := SuiteResult{Name: s.Name(), File: s.Path(), Cases: []CaseResult{}}
	snap, err := s.cluster(opts)
	if err != nil {
		sr.Error = err.Error()
		return sr
	}
	var cases []Case
	for _, c := range s.Cases {
		if opts.selected(s, c.Name) {
			cases = append(cases, c)
		}
	}
	audits := s.Audit != nil && opts.selected(s, AuditCase)
	if len(cases) == 0 && !audits {
		return sr
	}
	// One listing of the snapshot for the suite's cases and its audit: it
	// costs more than judging a pod on it.
	start := time.Now()
	e, err := explain.NewExplainer(ctx, explain.Options{
		Client: snap.Client(), Policy: opts.Policy, PolicySource: opts.PolicySource, SyncTimeout: syncTimeout, Log: opts.Log,
	})
	if err != nil {
		sr.Error = err.Error()
		return sr
	}
	defer e.Close()
	listed := time.Since(start)
	for _, c := range cases {
		start := time.Now()
		cr := runCase(ctx, snap, e, c)
		cr.Duration = time.Since(start) + listed
		listed = 0 // the first case's time holds the listing
		sr.Cases = append(sr.Cases, cr)
	}
	if audits {
		start := time.Now()
		cr := runAudit(ctx, snap, e.Placements(), *s.Audit, opts)
		cr.Duration = time.Since(start) + listed
		sr.Cases = append(sr.Cases, cr)
	}
	return sr
}

// cluster is the suite's snapshot file and inline objects together:
// nodes, pods and StatefulSets.
func (s *Suite) cluster(opts Options) (*snapshot.Snapshot, error) {
	limits := opts.Limits
	snap := &snapshot.Snapshot{Source: s.Path()}
	if s.Snapshot != "" {
		path, err := s.snapshotPath(opts.AllowOutsideSuite)
		if err != nil {
			return nil, err
		}
		if snap, err = snapshot.LoadFile(path, limits); err != nil {
			return nil, err
		}
	}
	if len(s.Objects) > 0 {
		list, err := json.Marshal(map[string]any{"apiVersion": "v1", "kind": "List", "items": s.Objects})
		if err != nil {
			return nil, fmt.Errorf("objects: %w", err)
		}
		inline, err := snapshot.Load(bytes.NewReader(list), s.Path()+" objects", limits)
		if err != nil {
			return nil, err
		}
		for _, n := range inline.Nodes {
			if slices.ContainsFunc(snap.Nodes, func(o *corev1.Node) bool { return o.Name == n.Name }) {
				return nil, fmt.Errorf("objects: node %s is in the snapshot already", n.Name)
			}
		}
		for _, p := range inline.Pods() {
			if snap.Pod(p.Namespace, p.Name) != nil {
				return nil, fmt.Errorf("objects: pod %s/%s is in the snapshot already", p.Namespace, p.Name)
			}
		}
		for _, set := range inline.StatefulSets {
			if snap.StatefulSet(set.Namespace, set.Name) != nil {
				return nil, fmt.Errorf("objects: StatefulSet %s/%s is in the snapshot already", set.Namespace, set.Name)
			}
		}
		snap.Nodes = append(snap.Nodes, inline.Nodes...)
		snap.Bound = append(snap.Bound, inline.Bound...)
		snap.Pending = append(snap.Pending, inline.Pending...)
		snap.Finished = append(snap.Finished, inline.Finished...)
		// The explainer's cache lists them from snap.Client(): a quorum
		// then takes its group's size from the replicas stated here.
		snap.StatefulSets = append(snap.StatefulSets, inline.StatefulSets...)
	}
	return snap, nil
}

// runCase judges the case's pod on every node of the snapshot and checks
// what was decided.
func runCase(ctx context.Context, snap *snapshot.Snapshot, e *explain.Explainer, c Case) CaseResult {
	cr := CaseResult{Name: c.Name, Checks: []Check{}}
	pod, err := casePod(snap, c)
	if err != nil {
		cr.Error = err.Error()
		return cr
	}
	cr.Pod = pod.Namespace + "/" + pod.Name
	report, err := e.Explain(ctx, pod)
	if err != nil {
		cr.Error = err.Error()
		return cr
	}
	known := map[string]bool{}
	for _, n := range snap.Nodes {
		known[n.Name] = true
	}
	cr.Checks = checkCase(c.Expect, report, known)
	return cr
}

// casePod is the case's pod: one of the snapshot, or the manifest.
func casePod(snap *snapshot.Snapshot, c Case) (*corev1.Pod, error) {
	if len(c.Object) > 0 {
		pod, err := explain.ReadPod(bytes.NewReader(c.Object))
		if err != nil {
			return nil, fmt.Errorf("object: %w", err)
		}
		if pod.Namespace == "" {
			pod.Namespace = metav1.NamespaceDefault
		}
		return pod, nil
	}
	ns, name := metav1.NamespaceDefault, c.Pod
	if i := bytes.IndexByte([]byte(c.Pod), '/'); i >= 0 {
		ns, name = c.Pod[:i], c.Pod[i+1:]
	}
	pod := snap.Pod(ns, name)
	if pod == nil {
		return nil, fmt.Errorf("pod %s/%s is not in the snapshot", ns, name)
	}
	return pod, nil
}

// runAudit audits the snapshot's bound pods in cache as `regosched audit`
// does, and asks why the listed pods are not protected (the policy's
// reasons and the cluster's: judge.Unprotected).
func runAudit(ctx context.Context, snap *snapshot.Snapshot, cache audit.Placements, want AuditExpect, opts Options) CaseResult {
	cr := CaseResult{Name: AuditCase, Checks: []Check{}}
	if want.Violations != nil {
		a, err := audit.New(audit.Config{
			Cache: cache, Policies: func() *policy.Policy { return opts.Policy }, Log: opts.Log.WithField("component", "audit"),
		})
		if err != nil {
			cr.Error = err.Error()
			return cr
		}
		report, err := a.Run(ctx)
		if err != nil {
			cr.Error = err.Error()
			return cr
		}
		if len(report.Skipped) > 0 {
			cr.Error = fmt.Sprintf("the policy failed to judge %q", report.Skipped)
			return cr
		}
		cr.Checks = append(cr.Checks, checkViolations(*want.Violations, report.Violations)...)
	}
	for _, u := range want.Unprotected {
		ns, name := metav1.NamespaceDefault, u.Pod
		if i := bytes.IndexByte([]byte(u.Pod), '/'); i >= 0 {
			ns, name = u.Pod[:i], u.Pod[i+1:]
		}
		pod := snap.Pod(ns, name)
		if pod == nil {
			cr.Error = fmt.Sprintf("audit.unprotected: pod %s/%s is not in the snapshot", ns, name)
			return cr
		}
		why, err := judge.Unprotected(ctx, opts.Policy, cache, model.PodFromObject(pod))
		if err != nil {
			cr.Error = err.Error()
			return cr
		}
		cr.Checks = append(cr.Checks, checkUnprotected(ns+"/"+name+" unprotected", u.Reasons, why))
	}
	return cr
}
