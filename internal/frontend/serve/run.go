package serve

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/sirupsen/logrus"
	"golang.org/x/sync/errgroup"

	"github.com/regosched/regosched/internal/ops/certroll"
)

// background starts the informers and every loop that runs beside the HTTP
// server, under one errgroup; stop cancels them and returns once all have
// returned and the informers have shut down.
func (s *server) background(ctx context.Context) (stop func() error) {
	ctx, cancel := context.WithCancel(ctx)
	g, ctx := errgroup.WithContext(ctx)
	cache := s.parts.Cache
	cache.Start(ctx)
	if s.pending != nil {
		// Not waited for: a pod it has not described yet is described by
		// its filter call.
		s.pending.Start(ctx)
	}
	g.Go(func() error { s.contact.Run(ctx); return nil })
	g.Go(func() error {
		if cache.WaitForSync(ctx) {
			s.log.WithFields(logrus.Fields{"pods": cache.PodCount(), "nodes": cache.NodeCount()}).Info("placement cache synced; ready")
		}
		return nil
	})
	// The policy's and the shadow policy's reloads, and the shadow's judge.
	g.Go(func() error { s.parts.Run(ctx); return nil })
	if s.roles != nil {
		g.Go(func() error {
			if err := s.roles.Run(ctx); err != nil && !errors.Is(err, context.Canceled) {
				s.log.WithError(err).Error("Redis roles stopped")
			}
			return nil
		})
	}
	if s.audit != nil {
		g.Go(func() error { s.auditLoop(ctx); return nil })
	}
	if s.certRoll != nil {
		g.Go(func() error {
			if err := certroll.Run(ctx, *s.certRoll); err != nil {
				s.log.WithError(err).Error("watching the scheduler's client certificate stopped")
			}
			return nil
		})
	}
	return func() error {
		cancel()
		err := g.Wait()
		// The informers stop only once ctx is cancelled: cancel, then wait.
		cache.Shutdown()
		if s.pending != nil {
			s.pending.Shutdown()
		}
		s.stopEvents()
		return err
	}
}

// auditLoop audits bound pods once the cache has synced and while this
// replica leads: another replica would announce the same violations twice.
func (s *server) auditLoop(ctx context.Context) {
	if !s.parts.Cache.WaitForSync(ctx) {
		return
	}
	for s.elector != nil && !s.elector.Leading() {
		select {
		case <-ctx.Done():
			return
		case <-time.After(time.Second):
		}
	}
	s.audit.Loop(ctx, s.opts.AuditInterval, s.auditTrigger)
}

// elect campaigns for the lease, when leader election is on. The elector
// outlives ctx: release releases the lease only when called, once the
// binds in flight have drained, or another replica could decide against
// placements this one is still making.
func (s *server) elect(ctx context.Context) (release func()) {
	if s.elector == nil {
		return func() {}
	}
	ctx, stop := context.WithCancel(context.WithoutCancel(ctx))
	done := make(chan struct{})
	go func() { s.elector.Run(ctx); close(done) }()
	return func() { stop(); <-done }
}

// serve answers on every listener until ctx ends, the lease is lost, or a
// listener fails. wait returns once every server goroutine has returned,
// which they do after drain.
func (s *server) serve(ctx context.Context) (wait func(), err error) {
	var g errgroup.Group
	errc := make(chan error, len(s.servers))
	for i, srv := range s.servers {
		ln := s.listeners[i]
		g.Go(func() error {
			var err error
			if i == 0 && s.tls {
				err = srv.ServeTLS(ln, "", "") // certificates come from TLSConfig
			} else {
				err = srv.Serve(ln)
			}
			errc <- err
			return nil
		})
	}
	s.log.WithFields(logrus.Fields{
		"address": s.listeners[0].Addr().String(), "urlPrefix": s.opts.URLPrefix,
		"tls": s.tls, "clientAuth": s.opts.TLS.ClientCAFile != "",
	}).Info("serving")
	if len(s.listeners) > 1 {
		s.log.WithField("address", s.listeners[1].Addr().String()).Info("serving health endpoints over plain HTTP")
	}
	wait = func() { _ = g.Wait() }
	var lost <-chan struct{}
	if s.elector != nil {
		lost = s.elector.Lost()
	}
	select {
	case err := <-errc:
		for _, srv := range s.servers {
			_ = srv.Close() // the other listener must not outlive Run
		}
		return wait, fmt.Errorf("serving HTTP: %w", err)
	case <-lost:
		// Another replica may lead now; this one's in-flight state is stale.
		return wait, errors.New("lost the leader lease")
	case <-ctx.Done():
		return wait, nil
	}
}

// drain lets the requests in flight finish, then removes the leader label
// from this pod, before the lease is released.
func (s *server) drain() error {
	s.log.Info("shutting down: draining requests in flight")
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var err error
	for _, srv := range s.servers {
		if e := srv.Shutdown(ctx); e != nil && !errors.Is(e, http.ErrServerClosed) {
			err = errors.Join(err, fmt.Errorf("shutting down HTTP server: %w", e))
		}
	}
	if err == nil {
		s.log.Info("requests drained")
	}
	if s.elector != nil {
		stepCtx, cancelStep := context.WithTimeout(context.Background(), 5*time.Second)
		if e := s.elector.StepDown(stepCtx); e != nil {
			s.log.WithError(e).Warn("cannot remove the leader label before releasing the lease")
		}
		cancelStep()
	}
	return err
}
