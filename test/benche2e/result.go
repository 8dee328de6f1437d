package benche2e

import (
	"bufio"
	"bytes"
	"fmt"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"
)

// Result is one measured configuration.
type Result struct {
	Mode Mode
	Pods int // pods created
	// Bound is how many of them were bound when the measurement ended
	// (Pods unless it timed out).
	Bound int
	// Phases, on this process's clock.
	CreateStart time.Time // before the first create call
	CreateEnd   time.Time // after the last create call returned
	SchedStart  time.Time // kube-scheduler started
	FirstBound  time.Time // first binding seen by the watch
	LastBound   time.Time // last binding seen by the watch
	// TimedOut is set when not every pod was bound in time.
	TimedOut bool
	// Violations found by the independent check of the final placement.
	Violations []string
	// CPU is CPU time per process over SchedStart..LastBound.
	CPU []ProcCPU
	// CreateCPU is CPU time per process over CreateStart..SchedStart: the
	// API server storing the pods and, in regosched mode, regosched
	// describing them as they arrive, ahead of their filter calls.
	CreateCPU []ProcCPU
	// Verbs is regosched's own time per verb (regosched mode only).
	Verbs []VerbTime
}

// Rate is pods bound per second from the scheduler's start to the last
// binding: the scheduling throughput (pod creation excluded).
func (r Result) Rate() float64 { return rate(r.Bound, r.LastBound.Sub(r.SchedStart)) }

// RateFromCreate is pods bound per second from the first pod created to the
// last pod bound (pod creation, with no scheduler running, included).
func (r Result) RateFromCreate() float64 { return rate(r.Bound, r.LastBound.Sub(r.CreateStart)) }

// RateSteady is pods bound per second from the first binding to the last:
// scheduler start-up (informer sync) excluded.
func (r Result) RateSteady() float64 {
	if r.Bound < 2 {
		return 0
	}
	return rate(r.Bound-1, r.LastBound.Sub(r.FirstBound))
}

func rate(n int, d time.Duration) float64 {
	if n <= 0 || d <= 0 {
		return 0
	}
	return float64(n) / d.Seconds()
}

// Details are the human-readable lines about r printed before the result
// line.
func (r Result) Details() []string {
	name := r.Mode.Name()
	ms := func(d time.Duration) string { return d.Round(time.Millisecond).String() }
	out := []string{
		fmt.Sprintf("%s: pods=%d bound=%d create=%s (%.0f pods/s) sched-start->first-bound=%s sched-start->last-bound=%s first-created->last-bound=%s",
			name, r.Pods, r.Bound, ms(r.CreateEnd.Sub(r.CreateStart)), rate(r.Pods, r.CreateEnd.Sub(r.CreateStart)),
			ms(r.FirstBound.Sub(r.SchedStart)), ms(r.LastBound.Sub(r.SchedStart)), ms(r.LastBound.Sub(r.CreateStart))),
		fmt.Sprintf("%s: rate sched-start->last-bound=%.1f/s first-created->last-bound=%.1f/s first-bound->last-bound=%.1f/s",
			name, r.Rate(), r.RateFromCreate(), r.RateSteady()),
	}
	if r.TimedOut {
		out = append(out, fmt.Sprintf("%s: TIMED OUT with %d of %d pods bound; rates count bound pods only", name, r.Bound, r.Pods))
	}
	out = append(out, fmt.Sprintf("%s: violations=%d", name, len(r.Violations)))
	for i, v := range r.Violations {
		if i == 10 {
			out = append(out, fmt.Sprintf("%s:   ... %d more", name, len(r.Violations)-10))
			break
		}
		out = append(out, fmt.Sprintf("%s:   %s", name, v))
	}
	if len(r.CreateCPU) > 0 {
		out = append(out, fmt.Sprintf("%s: cpu over first-created->sched-start (%s wall, %d cores): %s",
			name, ms(r.SchedStart.Sub(r.CreateStart)), numCPU(), FormatCPU(r.CreateCPU, r.Pods)))
	}
	if len(r.CPU) > 0 {
		out = append(out, fmt.Sprintf("%s: cpu over sched-start->last-bound (%s wall, %d cores): %s",
			name, ms(r.LastBound.Sub(r.SchedStart)), numCPU(), FormatCPU(r.CPU, r.Bound)))
	}
	for _, v := range r.Verbs {
		out = append(out, fmt.Sprintf("%s: regosched %s: %d requests, mean %.3fms, total %.2fs",
			name, v.Verb, v.Count, v.Mean()*1000, v.Sum))
	}
	return out
}

// PointResult is every configuration measured at one point, in one or
// more rounds.
type PointResult struct {
	Point
	// Pods is the number of pods scheduled in each configuration.
	Pods    int
	Results []Result
}

// Rate is the median, over its rounds, of mode's pods per second from the
// first pod created to the last bound, and whether mode was measured.
func (p PointResult) Rate(mode Mode) (float64, bool) {
	var rates []float64
	for _, r := range p.Results {
		if r.Mode == mode {
			rates = append(rates, r.RateFromCreate())
		}
	}
	if len(rates) == 0 {
		return 0, false
	}
	slices.Sort(rates)
	if n := len(rates); n%2 == 0 {
		return (rates[n/2-1] + rates[n/2]) / 2, true
	}
	return rates[len(rates)/2], true
}

// Violations is the number of broken rules found in mode's placements,
// over all its rounds, or -1 when mode was not measured.
func (p PointResult) Violations(mode Mode) int {
	n := -1
	for _, r := range p.Results {
		if r.Mode == mode {
			n = max(n, 0) + len(r.Violations)
		}
	}
	return n
}

// Rounds is one line of every rate measured, mode by mode in the order
// first measured, each with its median: "regosched 94.4 100.2 (median
// 97.3); native ...".
func (p PointResult) Rounds() string {
	var order []Mode
	rates := map[Mode][]string{}
	for _, r := range p.Results {
		if _, seen := rates[r.Mode]; !seen {
			order = append(order, r.Mode)
		}
		rates[r.Mode] = append(rates[r.Mode], fmt.Sprintf("%.1f", r.RateFromCreate()))
	}
	parts := make([]string, 0, len(order))
	for _, m := range order {
		med, _ := p.Rate(m)
		parts = append(parts, fmt.Sprintf("%s %s (median %.1f)", m.Name(), strings.Join(rates[m], " "), med))
	}
	return strings.Join(parts, "; ")
}

// Line is the point's result line. Rates count from the first pod created
// to the last pod bound (Details also gives them from the scheduler's
// start): the pods' creation is the same in every configuration, and the
// scheduler's start-up (listing the nodes and the bound pods) belongs to
// its cost. With several rounds a rate is the median of its rounds, and
// violations are summed over them. Absent modes print as 0 and violations
// of an absent mode as -1. regosched-scheduler's fields come last.
func (p PointResult) Line() string {
	rate := func(m Mode) float64 { r, _ := p.Rate(m); return r }
	return fmt.Sprintf("throughput nodes=%d bound=%d pods=%d regosched=%.1f/s native=%.1f/s norules=%.1f/s violations_regosched=%d violations_native=%d regosched_scheduler=%.1f/s violations_regosched_scheduler=%d",
		p.Nodes, p.Bound, p.Pods, rate(ModeRegosched), rate(ModeNative), rate(ModeNoRules),
		p.Violations(ModeRegosched), p.Violations(ModeNative), rate(ModePlugin), p.Violations(ModePlugin))
}

// VerbTime is regosched's time answering one extender verb, from its
// regosched_request_duration_seconds histogram (all outcomes).
type VerbTime struct {
	Verb  string
	Count uint64
	Sum   float64 // seconds
}

// Mean is seconds per request.
func (v VerbTime) Mean() float64 {
	if v.Count == 0 {
		return 0
	}
	return v.Sum / float64(v.Count)
}

// ParseVerbTimes sums the _sum and _count samples of the histogram name
// per value of its verb label (the empty verb for an unlabelled one),
// sorted by verb.
func ParseVerbTimes(body []byte, name string) ([]VerbTime, error) {
	byVerb := map[string]*VerbTime{}
	sc := bufio.NewScanner(bytes.NewReader(body))
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if strings.HasPrefix(line, "#") {
			continue
		}
		var isSum bool
		var rest string
		switch {
		case strings.HasPrefix(line, name+"_sum{"):
			isSum, rest = true, strings.TrimPrefix(line, name+"_sum{")
		case strings.HasPrefix(line, name+"_count{"):
			rest = strings.TrimPrefix(line, name+"_count{")
		case strings.HasPrefix(line, name+"_sum "):
			// Unlabelled: one "verb", the empty one.
			isSum, rest = true, "}"+strings.TrimPrefix(line, name+"_sum")
		case strings.HasPrefix(line, name+"_count "):
			rest = "}" + strings.TrimPrefix(line, name+"_count")
		default:
			continue
		}
		end := strings.LastIndex(rest, "}")
		if end < 0 {
			return nil, fmt.Errorf("metric %s: malformed line %q", name, line)
		}
		verb := labelValue(rest[:end], "verb")
		fields := strings.Fields(rest[end+1:])
		if len(fields) < 1 {
			return nil, fmt.Errorf("metric %s: no value in %q", name, line)
		}
		v, err := strconv.ParseFloat(fields[0], 64)
		if err != nil {
			return nil, fmt.Errorf("metric %s: %w", name, err)
		}
		vt := byVerb[verb]
		if vt == nil {
			vt = &VerbTime{Verb: verb}
			byVerb[verb] = vt
		}
		if isSum {
			vt.Sum += v
		} else {
			vt.Count += uint64(v)
		}
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("reading metrics: %w", err)
	}
	out := make([]VerbTime, 0, len(byVerb))
	for _, v := range byVerb {
		out = append(out, *v)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Verb < out[j].Verb })
	return out, nil
}

// SubVerbTimes returns after minus before, verb by verb, dropping verbs
// with no requests in between.
func SubVerbTimes(after, before []VerbTime) []VerbTime {
	var out []VerbTime
	for _, a := range after {
		for _, b := range before {
			if b.Verb == a.Verb {
				a.Count -= b.Count
				a.Sum -= b.Sum
				break
			}
		}
		if a.Count > 0 {
			out = append(out, a)
		}
	}
	return out
}

// labelValue finds key="value" in a Prometheus label list (values here
// hold no commas or escaped quotes).
func labelValue(labels, key string) string {
	for _, kv := range strings.Split(labels, ",") {
		k, v, ok := strings.Cut(kv, "=")
		if ok && strings.TrimSpace(k) == key {
			return strings.Trim(v, `"`)
		}
	}
	return ""
}
