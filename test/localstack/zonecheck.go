package localstack

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/regosched/regosched/test/fixture"
	"github.com/regosched/regosched/test/localcluster"
)

// ZoneViolations lists the default policy's hard rules per zone that the
// bound pods break, zones read from zoneOf (node -> zone; a node without
// one is in none), restated in plain Go as Violations restates the rules
// per node:
//
//   - a Redis master and a replica of the same shard of a cluster in one zone;
//   - a zone holding half or more of a cluster's Redis masters, or of its
//     Elasticsearch master pods, where the zones there are could hold fewer
//     than half each (three or more members, zones * floor((n-1)/2) >= n).
//
// The size of a group is its members counted: StatefulSets are not read.
func ZoneViolations(pods []corev1.Pod, zoneOf map[string]string) []string {
	var out []string
	for _, v := range zoneViolations(pods, zoneOf) {
		out = append(out, v.text)
	}
	return out
}

// zoneViolation is a rule per zone broken, and the pods (namespace/name)
// that break it together.
type zoneViolation struct {
	text string
	pods []string
}

// zoneViolations is ZoneViolations with the pods of each, sorted by text.
func zoneViolations(pods []corev1.Pod, zoneOf map[string]string) []zoneViolation {
	type member struct{ ns, cluster, app string }
	zones := map[string]bool{}
	for _, z := range zoneOf {
		zones[z] = true
	}
	masters := map[member]map[string][]string{} // zone -> pods
	byShard := map[string][]*corev1.Pod{}       // ns/cluster/shard/zone -> pods
	for i := range pods {
		p := &pods[i]
		zone := zoneOf[p.Spec.NodeName]
		if !occupiesNode(p) || p.Labels[fixture.LabelInstance] == "" || zone == "" {
			continue
		}
		app, r := p.Labels[fixture.LabelName], role(p.Labels)
		m := member{p.Namespace, p.Labels[fixture.LabelInstance], app}
		if r == "master" && (app == "redis" || app == "elasticsearch") {
			if masters[m] == nil {
				masters[m] = map[string][]string{}
			}
			masters[m][zone] = append(masters[m][zone], p.Name)
		}
		if app == "redis" && (r == "master" || r == "replica") {
			k := fmt.Sprintf("%s/%s/%s/%s", p.Namespace, m.cluster, p.Labels[fixture.LabelShard], zone)
			byShard[k] = append(byShard[k], p)
		}
	}
	var out []zoneViolation
	for k, group := range byShard {
		for i, a := range group {
			for _, b := range group[i+1:] {
				if role(a.Labels) != role(b.Labels) {
					out = append(out, zoneViolation{
						fmt.Sprintf("zone of %s: %s/%s and %s/%s (redis master and replica of a shard)", k, a.Namespace, a.Name, b.Namespace, b.Name),
						[]string{a.Namespace + "/" + a.Name, b.Namespace + "/" + b.Name},
					})
				}
			}
		}
	}
	for m, byZone := range masters {
		n := 0
		for _, names := range byZone {
			n += len(names)
		}
		limit := (n - 1) / 2
		if n < 3 || len(zones)*limit < n {
			continue // no placement keeps a majority: nothing to break
		}
		for zone, names := range byZone {
			if len(names) > limit {
				slices.Sort(names)
				v := zoneViolation{text: fmt.Sprintf("zone %s: %d of the %d %s masters of %s/%s (%v): half or more", zone, len(names), n, m.app, m.ns, m.cluster, names)}
				for _, name := range names {
					v.pods = append(v.pods, m.ns+"/"+name)
				}
				out = append(out, v)
			}
		}
	}
	slices.SortFunc(out, func(a, b zoneViolation) int { return strings.Compare(a.text, b.text) })
	return out
}

// nodeZones maps every node client lists to its zone label.
func nodeZones(ctx context.Context, client kubernetes.Interface) (map[string]string, error) {
	list, err := client.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, fmt.Errorf("listing nodes: %w", err)
	}
	out := make(map[string]string, len(list.Items))
	for _, n := range list.Items {
		if z, ok := n.Labels[localcluster.LabelZone]; ok {
			out[n.Name] = z
		}
	}
	return out, nil
}

// ZoneRulesYielded is the reason of the Event regosched writes on a pod
// for which its rules per zone yielded: no node of the cluster took it
// under them, so it was placed breaking one (docs/policies.md).
const ZoneRulesYielded = "ZoneRulesYielded"

// Broken lists the hard rules broken among the bound pods of namespaces
// (all when none is given) that regosched did not say it let go: every
// rule per node broken, and every rule per zone broken unless one of its
// pods has a ZoneRulesYielded Event. yielded lists those others. The
// Events are written asynchronously: they are waited for a few seconds.
func (s *Stack) Broken(ctx context.Context, namespaces ...string) (broken, yielded []string, err error) {
	return Broken(ctx, s.Client(), namespaces...)
}

// Broken is Stack.Broken through client, for a cluster without the
// stack (regosched-scheduler's).
func Broken(ctx context.Context, client kubernetes.Interface, namespaces ...string) (broken, yielded []string, err error) {
	pods, err := listPods(ctx, client, namespaces)
	if err != nil {
		return nil, nil, err
	}
	zoneOf, err := nodeZones(ctx, client)
	if err != nil {
		return nil, nil, err
	}
	zoned := zoneViolations(pods, zoneOf)
	deadline := time.Now().Add(5 * time.Second)
	for {
		said, err := yieldedPods(ctx, client, namespaces)
		if err != nil {
			return nil, nil, err
		}
		broken, yielded = Violations(pods), nil
		for _, v := range zoned {
			if slices.ContainsFunc(v.pods, func(p string) bool { return said[p] }) {
				yielded = append(yielded, v.text)
			} else {
				broken = append(broken, v.text)
			}
		}
		if len(yielded) == len(zoned) || time.Now().After(deadline) {
			return broken, yielded, nil
		}
		select {
		case <-ctx.Done():
			return nil, nil, ctx.Err()
		case <-time.After(250 * time.Millisecond):
		}
	}
}

// yieldedPods is the set of pods (namespace/name) of namespaces that have
// a ZoneRulesYielded Event.
func yieldedPods(ctx context.Context, client kubernetes.Interface, namespaces []string) (map[string]bool, error) {
	if len(namespaces) == 0 {
		namespaces = []string{metav1.NamespaceAll}
	}
	out := map[string]bool{}
	for _, ns := range namespaces {
		list, err := client.EventsV1().Events(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			return nil, fmt.Errorf("listing events: %w", err)
		}
		for _, e := range list.Items {
			if e.Reason == ZoneRulesYielded && e.Regarding.Kind == "Pod" {
				out[e.Regarding.Namespace+"/"+e.Regarding.Name] = true
			}
		}
	}
	return out, nil
}
