// Package demo is regosched's one-command demonstration (test/cmd/regosched-demo,
// `make demo`): it starts the whole stack on loopback (test/localstack),
// places a small shop's Redis and Elasticsearch clusters through the
// regosched scheduler one pod at a time, prints where every pod went and
// why the rest wait, and checks the placement rules independently. Then,
// when redis-server and redis-cli are installed, it fails a real Redis
// Cluster over so that two masters share a node, and shows regosched's
// audit report it and its repair undo it with every key intact
// (failover.go); without them it says it skipped that. It stops everything
// again at the end.
package demo

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/sirupsen/logrus"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/regosched/regosched/test/fixture"
	ls "github.com/regosched/regosched/test/localstack"
)

// Namespace holds the whole sample workload.
const Namespace = "shop"

// Options configures Run.
type Options struct {
	// Nodes is the number of fake nodes (zones a, b, c round robin).
	Nodes int
	// Out receives the placement table.
	Out io.Writer
	// Log receives progress messages.
	Log logrus.FieldLogger
}

// Run starts the stack, places Workload(opts.Nodes) one pod at a time,
// writes the placement to opts.Out, plays the failover scene (runFailover)
// and stops the stack, also when ctx is cancelled (Ctrl-C). It fails if the
// independent check finds a broken rule, or if the failover scene runs and
// the repair does not happen in time or loses keys.
func Run(ctx context.Context, opts Options) error {
	if opts.Nodes < 1 {
		return fmt.Errorf("need at least one node, got %d", opts.Nodes)
	}
	log := opts.Log
	start := time.Now()
	log.WithField("nodes", opts.Nodes).Info("starting etcd, kube-apiserver, regosched and kube-scheduler (the first run builds them: many minutes)")
	stack, err := ls.Start(ctx, ls.Options{Nodes: opts.Nodes, Log: log, ExtenderArgs: extenderArgs})
	if err != nil {
		return fmt.Errorf("starting the stack: %w", err)
	}
	defer func() {
		log.Info("stopping the stack")
		stack.Stop()
	}()
	log.WithField("took", time.Since(start).Round(time.Millisecond)).Info("stack is up")

	placing := time.Now()
	// The master-role pods of logs are a StatefulSet's three: a zone may
	// hold one of them (the quorum), from the first one placed.
	set, err := stack.Client().AppsV1().StatefulSets(Namespace).Create(ctx, MastersStatefulSet(), metav1.CreateOptions{})
	if err != nil {
		return fmt.Errorf("creating StatefulSet %s: %w", MastersStatefulSet().Name, err)
	}
	pods := Workload(opts.Nodes, set.UID)
	for _, p := range pods {
		node, pending, reason, err := stack.CreateAndWait(ctx, p)
		if err != nil {
			return err
		}
		entry := log.WithField("pod", p.Namespace+"/"+p.Name)
		if pending {
			entry.WithField("reason", reason).Info("pending")
		} else {
			entry.WithField("node", node).Info("placed")
		}
	}
	log.WithFields(logrus.Fields{"pods": len(pods), "took": time.Since(placing).Round(time.Millisecond)}).Info("workload placed one pod at a time")

	pl, err := stack.Placement(ctx, Namespace)
	if err != nil {
		return err
	}
	violations, err := stack.Violations(ctx, Namespace)
	if err != nil {
		return err
	}
	if err := Write(opts.Out, pl, violations); err != nil {
		return fmt.Errorf("writing the placement: %w", err)
	}
	if len(violations) > 0 {
		return errors.New("placement rules were broken")
	}

	if err := runFailover(ctx, stack, opts.Out, log); err != nil {
		return fmt.Errorf("repair after a failover: %w", err)
	}
	log.WithField("took", time.Since(start).Round(time.Millisecond)).Info("demo done")
	return nil
}

// MastersStatefulSet is the StatefulSet of logs' master-role pods: three.
func MastersStatefulSet() *appsv1.StatefulSet {
	return fixture.StatefulSet(Namespace, "logs-master", 3, fixture.ElasticsearchLabels("logs", "master"))
}

// Workload is the sample, in creation order: Redis cluster "cache" (three
// shards, a master and a replica each: a replica out of its master's
// zone), Elasticsearch cluster "logs" with one data pod more than there
// are nodes (so one must wait) and three master-role pods of StatefulSet
// masters (one per zone: the quorum), and two plain web pods.
func Workload(nodes int, masters types.UID) []*corev1.Pod {
	var pods []*corev1.Pod
	for shard := range 3 {
		sh := fmt.Sprint(shard)
		pods = append(pods,
			fixture.MakePod().Namespace(Namespace).Name("cache-"+sh+"-master").Redis("cache", "master", sh).Schedulable().Obj(),
			fixture.MakePod().Namespace(Namespace).Name("cache-"+sh+"-replica").Redis("cache", "replica", sh).Schedulable().Obj())
	}
	for i := range nodes + 1 {
		pods = append(pods, fixture.MakePod().Namespace(Namespace).Name(fmt.Sprintf("logs-data-%d", i)).Elasticsearch("logs", "data").Schedulable().Obj())
	}
	for i := range 3 {
		pods = append(pods,
			fixture.MakePod().Namespace(Namespace).Name(fmt.Sprintf("logs-master-%d", i)).Elasticsearch("logs", "master").
				StatefulSet("logs-master", masters).Schedulable().Obj(),
		)
	}
	for i := range 2 {
		pods = append(pods, fixture.MakePod().Namespace(Namespace).Name(fmt.Sprintf("web-%d", i)).Schedulable().Obj())
	}
	return pods
}

// Write prints pl as a table (one row per node, then the pending pods with
// the scheduler's message) followed by the verdict of the independent rule
// check.
func Write(w io.Writer, pl ls.Placement, violations []string) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "NODE\tZONE\tPODS")
	for _, n := range pl.Nodes {
		if len(n.Pods) == 0 {
			fmt.Fprintf(tw, "%s\t%s\t-\n", n.Node, n.Zone)
			continue
		}
		for i, p := range n.Pods {
			node, zone := n.Node, n.Zone
			if i > 0 {
				node, zone = "", ""
			}
			fmt.Fprintf(tw, "%s\t%s\t%s\n", node, zone, p)
		}
	}
	if err := tw.Flush(); err != nil {
		return err
	}

	var b strings.Builder
	if len(pl.Pending) == 0 {
		b.WriteString("\npending: none\n")
	} else {
		b.WriteString("\npending:\n")
	}
	for _, p := range pl.Pending {
		fmt.Fprintf(&b, "  %s\n", p.PodSummary)
		for _, line := range reasonLines(p.Reason) {
			fmt.Fprintf(&b, "    %s\n", line)
		}
	}
	if zones := zoneLines(pl); len(zones) > 0 {
		b.WriteString("\nzones:\n")
		for _, z := range zones {
			fmt.Fprintf(&b, "  %s\n", z)
		}
	}
	if len(violations) == 0 {
		b.WriteString("\nrules kept: yes (0 violations)\n")
	} else {
		fmt.Fprintf(&b, "\nrules kept: NO (%d violations)\n", len(violations))
		for _, v := range violations {
			fmt.Fprintf(&b, "  %s\n", v)
		}
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// reasonLines splits a FailedScheduling message, e.g. "0/6 nodes are
// available: 1 a, 5 b. preemption: ...", into one line per node reason, so
// that regosched's reasons can be read. Anything else comes back whole.
func reasonLines(msg string) []string {
	if msg == "" {
		return []string{"(no FailedScheduling event yet)"}
	}
	body, preemption, hasPreemption := strings.Cut(msg, ". preemption: ")
	head, list, ok := strings.Cut(body, ": ")
	if !ok || !strings.Contains(head, "nodes are available") {
		return []string{msg}
	}
	lines := []string{head + ":"}
	for _, item := range strings.Split(list, ", ") {
		lines = append(lines, "  "+strings.TrimSuffix(item, "."))
	}
	if hasPreemption {
		lines = append(lines, "preemption: "+preemption)
	}
	return lines
}

// zoneLines says, of pl, the zone of each Redis master and replica by
// shard, and how many master-role pods of each Elasticsearch cluster each
// zone holds: what the rules per zone keep.
func zoneLines(pl ls.Placement) []string {
	shards := map[string][]string{} // "redis cache, shard 0" -> "master in zone-a", ...
	masters := map[string]map[string]int{}
	for _, n := range pl.Nodes {
		for _, p := range n.Pods {
			d := p.Description
			switch {
			case strings.HasPrefix(d, "redis ") && strings.Contains(d, ", shard "):
				head, shard, _ := strings.Cut(d, ", shard ")
				fields := strings.Fields(head) // redis cluster role
				if len(fields) == 3 {
					k := fmt.Sprintf("redis %s shard %s", fields[1], shard)
					shards[k] = append(shards[k], fields[2]+" in "+n.Zone)
				}
			case strings.HasPrefix(d, "elasticsearch ") && strings.HasSuffix(d, " master"):
				if masters[d] == nil {
					masters[d] = map[string]int{}
				}
				masters[d][n.Zone]++
			}
		}
	}
	var out []string
	for k, where := range shards {
		slices.Sort(where)
		out = append(out, k+": "+strings.Join(where, ", "))
	}
	for d, byZone := range masters {
		var parts []string
		for z, n := range byZone {
			parts = append(parts, fmt.Sprintf("%d in %s", n, z))
		}
		slices.Sort(parts)
		out = append(out, d+"s: "+strings.Join(parts, ", "))
	}
	slices.Sort(out)
	return out
}
