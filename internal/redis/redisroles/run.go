package redisroles

import (
	"context"
	"errors"
	"maps"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"

	"github.com/regosched/regosched/internal/core/model"
	"github.com/regosched/regosched/internal/core/policy"
)

// Run works until ctx ends, then waits for its goroutines.
func (c *Controller) Run(ctx context.Context) error {
	defer c.queue.ShutDown()
	defer c.slow.ShutDown()
	if err := c.memory.load(ctx); err != nil {
		// Not fatal: roles are read from Redis again; only a pod recreated
		// before it answers misses its memory.
		c.cfg.Log.WithError(err).Warn("starting without remembered Redis roles")
	}
	c.factory.Start(ctx.Done())
	defer c.factory.Shutdown()
	if !cache.WaitForCacheSync(ctx.Done(), c.pods.HasSynced) {
		return ctx.Err()
	}
	var wg sync.WaitGroup
	for range c.cfg.Workers {
		wg.Go(func() {
			for c.next(ctx, c.queue) {
			}
		})
	}
	// Pods that fail or are new take at most half the probes in flight.
	for range max(1, c.cfg.Workers/2) {
		wg.Go(func() {
			for c.next(ctx, c.slow) {
			}
		})
	}
	t := time.NewTicker(c.cfg.Interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			c.queue.ShutDown()
			c.slow.ShutDown()
			wg.Wait()
			return nil
		case now := <-t.C:
			for _, key := range c.pods.GetStore().ListKeys() {
				if c.health.isDue(key, now) {
					c.add(key)
				}
			}
			if c.leading() {
				if err := c.memory.save(ctx, now); err != nil {
					c.cfg.Log.WithError(err).Warn("keeping Redis roles for restarts")
				}
			}
		}
	}
}

func (c *Controller) leading() bool { return c.cfg.Leading == nil || c.cfg.Leading() }

func (c *Controller) next(ctx context.Context, queue workqueue.TypedRateLimitingInterface[string]) bool {
	key, quit := queue.Get()
	if quit {
		return false
	}
	defer queue.Done(key)
	queue.Forget(key) // failing pods are backed off by health, not by the queue
	if c.leading() {
		c.check(ctx, key)
	}
	return true
}

// check brings one pod's role labels up to date.
func (c *Controller) check(ctx context.Context, key string) {
	obj, ok, err := c.pods.GetStore().GetByKey(key)
	if err != nil || !ok {
		return
	}
	pod, ok := obj.(*corev1.Pod)
	if !ok {
		return
	}
	pol := c.cfg.Policy()
	if pol == nil {
		return
	}
	labels, ok := pol.LiveLabels()
	if !ok {
		return
	}
	src := c.source(ctx, pol, pod)
	if src == nil {
		c.health.answered(key) // nothing to ask: no reason to keep it apart
		return
	}
	info := infoOf(pod)
	log := c.cfg.Log.WithField("pod", key)
	if !info.Running || info.IP == "" {
		c.health.answered(key)
		c.recall(ctx, info, labels, log)
		return
	}
	obs, err := c.probe(ctx, info, src)
	if err != nil {
		why := reason(err)
		if errors.Is(err, errPassword) {
			why = ReasonPassword
		}
		c.failed(key, why, err, log)
		c.health.failed(key, time.Now())
		if errors.Is(err, ErrHostNetwork) {
			c.markHostNetwork(ctx, info, labels, log)
			return
		}
		c.recall(ctx, info, labels, log)
		return
	}
	c.succeeded(key, log)
	c.memory.set(info.Namespace, info.Name, remembered{Role: obs.Role, Shard: obs.Shard, Owner: info.Owner, Seen: time.Now()})
	c.write(ctx, info, labels, obs, "redis", log)
	// After the write: the audit holds the pod's violations until then
	// (Checked), as its labels may be half written.
	c.health.answered(key)
}

// source classifies pod under pol, from the cache when neither changed.
func (c *Controller) source(ctx context.Context, pol *policy.Policy, pod *corev1.Pod) *policy.LiveSource {
	c.mu.Lock()
	cl, ok := c.classify[pod.UID]
	c.mu.Unlock()
	if ok && cl.policy == pol && maps.Equal(cl.labels, pod.Labels) {
		return cl.source
	}
	// Off the request path, nothing else bounds a policy that loops.
	ectx, cancel := context.WithTimeout(ctx, policy.DescribeTimeout)
	sources, err := pol.LiveRoles(ectx, model.PodFromObject(pod))
	cancel()
	if err != nil {
		c.cfg.Log.WithError(err).WithField("pod", pod.Namespace+"/"+pod.Name).Warn("cannot tell whether to ask the pod for its role")
		return nil
	}
	cl = classified{policy: pol, labels: pod.Labels}
	for _, s := range sources {
		if s.Source == "redis" {
			cl.source = &s
			break
		}
	}
	c.mu.Lock()
	c.classify[pod.UID] = cl
	c.mu.Unlock()
	return cl.source
}
