// Command regosched-bench-e2e measures end-to-end scheduling throughput on
// a local control plane (etcd, kube-apiserver, kube-scheduler, regosched
// built from the tree; fake nodes, no kubelet): the same mixed Redis and
// Elasticsearch workload scheduled (a) by kube-scheduler with regosched as
// extender, (b) by kube-scheduler alone with the equivalent native required
// pod anti-affinity, (c) by kube-scheduler alone with no rules, at each
// point of cluster size (nodes, and pods already bound). Progress goes to
// stderr; detail lines and, last, one result line per point to stdout:
//
//	throughput nodes=N bound=B pods=M regosched=X/s native=Y/s norules=Z/s violations_regosched=A violations_native=B
//
// See test/benche2e.
//
//	go run ./test/cmd/regosched-bench-e2e --points 100:0,500:2000 --redis-clusters 20 --es-clusters 10 --plot out.png
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/sirupsen/logrus"

	"github.com/regosched/regosched/test/benche2e"
)

func main() {
	w := benche2e.DefaultWorkload()
	opts := benche2e.Options{Out: os.Stdout}
	points := flag.String("points", "1000:0,5000:10000", "cluster sizes to measure, NODES:BOUND comma separated: fake nodes (zones a, b, c round robin) and pods bound on them beforehand (Redis and Elasticsearch clusters in the scheduled pods' namespaces, each cluster's members on distinct nodes, with native anti-affinity in the native configuration)")
	flag.StringVar(&opts.PlotPath, "plot", "", "write a picture of pods/s against bound pods to this .png or .svg file")
	flag.IntVar(&w.RedisClusters, "redis-clusters", w.RedisClusters, "Redis clusters")
	flag.IntVar(&w.RedisShards, "redis-shards", w.RedisShards, "shards per Redis cluster (a master and a replica each)")
	flag.IntVar(&w.ESClusters, "es-clusters", w.ESClusters, "Elasticsearch clusters")
	flag.IntVar(&w.ESDataPods, "es-data", w.ESDataPods, "data pods per Elasticsearch cluster")
	flag.IntVar(&w.Namespaces, "namespaces", w.Namespaces, "namespaces the clusters are spread over")
	only := flag.String("only", "", "measure only these configurations, comma separated: a (regosched), b (native), c (norules), d (null-extender: the extender protocol's own cost, a reference), e (regosched-prioritize: soft rules in prioritize, the baseline of folding them into filter), f (regosched-scheduler: regosched as a framework plugin, no extender); a, f, b, c when unset")
	flag.IntVar(&opts.Rounds, "rounds", 1, "measure every configuration this many times at each point, in turns; the result lines give medians")
	flag.DurationVar(&opts.Timeout, "timeout", 10*time.Minute, "longest wait for every pod of one configuration to be bound")
	flag.IntVar(&opts.ClientQPS, "client-qps", 500, "API client QPS (burst twice) of kube-scheduler and regosched, equal in every configuration; 0 keeps their defaults (50 and 100)")
	flag.IntVar(&opts.NodeWorkers, "node-workers", 32, "concurrent requests while creating nodes")
	flag.IntVar(&opts.CreateWorkers, "create-workers", 16, "concurrent requests while creating pods")
	flag.StringVar(&opts.ProfileDir, "profile-dir", "", "write CPU profiles of regosched over its measurement, and of regosched-scheduler over its run, to this folder, named for the point (go tool pprof -top DIR/regosched-a0-*.pprof, DIR/regosched-scheduler-f0.pprof for the first)")
	level := flag.String("log-level", "info", "progress detail on stderr: debug, info, warn, error")
	flag.Parse()
	var err error
	opts.Workload = w
	if opts.Points, err = benche2e.ParsePoints(*points); err != nil {
		fail(2, "--points: %v", err)
	}
	if opts.PlotPath != "" {
		if err := benche2e.CheckPlotPath(opts.PlotPath); err != nil {
			fail(2, "--plot: %v", err)
		}
	}

	log := logrus.New()
	log.SetOutput(os.Stderr)
	lvl, err := logrus.ParseLevel(*level)
	if err != nil {
		fail(2, "--log-level: %v", err)
	}
	log.SetLevel(lvl)
	opts.Log = log
	if *only != "" {
		for _, s := range strings.Split(*only, ",") {
			m, err := benche2e.ParseMode(strings.TrimSpace(s))
			if err != nil {
				fail(2, "--only: %v", err)
			}
			opts.Modes = append(opts.Modes, m)
		}
	}

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err = benche2e.Run(ctx, opts)
	stop()
	if err != nil {
		fail(1, "%v", err)
	}
}

func fail(code int, format string, args ...any) {
	fmt.Fprintf(os.Stderr, "regosched-bench-e2e: "+format+"\n", args...)
	os.Exit(code)
}
