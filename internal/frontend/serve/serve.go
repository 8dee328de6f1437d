// Package serve wires regosched's parts into the running extender: the
// Kubernetes client, the placement cache, the policy, the decider and the
// HTTP server, with readiness tied to the cache and the policy.
//
// Run goes through four steps:
//
//	build       load the policy; make the client, the cache, the decider
//	            (unless Verbs is off) and the handler; listen. Nothing
//	            runs yet.
//	background  start the informers, the policy reloads, the audit, the
//	            Redis roles and the API contact watch, under one errgroup.
//	serve       answer the scheduler until ctx ends, the lease is lost or
//	            a listener fails.
//	drain       finish the requests in flight and step down as leader;
//	            then release the lease, flush the decision log, and stop
//	            and join all of the above.
package serve

import (
	"context"
	"errors"
)

// Run serves until ctx ends, then shuts down gracefully. It returns once
// everything it started has stopped.
func Run(ctx context.Context, opts Options) error {
	s, err := build(ctx, opts)
	if err != nil {
		return err
	}
	stopBackground := s.background(ctx)
	release := s.elect(ctx)
	waitServers, serveErr := s.serve(ctx)
	drainErr := s.drain()
	waitServers()
	release() // only now: another replica must not decide against binds still in flight
	// The verbs have drained, so no event comes after this last flush;
	// after the release, so that a stalled collector delays no failover.
	s.closeDecisionLog()
	return errors.Join(serveErr, drainErr, stopBackground())
}
