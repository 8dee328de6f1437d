package serve

import (
	"context"
	"errors"
	"fmt"
	"net/http"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/sirupsen/logrus"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/tools/events"

	"github.com/regosched/regosched/internal/apicontact"
	"github.com/regosched/regosched/internal/audit"
	"github.com/regosched/regosched/internal/bundles"
	"github.com/regosched/regosched/internal/placement"
	"github.com/regosched/regosched/internal/redisroles"
)

// pingAPI asks the API server for one node: any answer, even a refusal,
// shows that it is in reach.
func pingAPI(client kubernetes.Interface) apicontact.Ping {
	return func(ctx context.Context) error {
		_, err := client.CoreV1().Nodes().List(ctx, metav1.ListOptions{Limit: 1})
		var status apierrors.APIStatus
		if err != nil && errors.As(err, &status) && status.Status().Code < http.StatusInternalServerError {
			return nil
		}
		return err
	}
}

// newAudit builds the audit of bound pods, which reports violations as
// events; stop stops its event recorder.
func newAudit(ctx context.Context, client kubernetes.Interface, cache *placement.Cache, active *bundles.Active,
	reg prometheus.Registerer, log logrus.FieldLogger) (a *audit.Auditor, stop func(), err error) {
	broadcaster := events.NewBroadcaster(&events.EventSinkImpl{Interface: client.EventsV1()})
	if err := broadcaster.StartRecordingToSinkWithContext(ctx); err != nil {
		return nil, nil, fmt.Errorf("starting the event recorder: %w", err)
	}
	a, err = audit.New(audit.Config{
		Cache: cache, Policies: active.Load, Recorder: broadcaster.NewRecorder(scheme.Scheme, "regosched"),
		Log: log.WithField("component", "audit"), Registerer: reg,
	})
	if err != nil {
		broadcaster.Shutdown()
		return nil, nil, err
	}
	return a, broadcaster.Shutdown, nil
}

// newRedisRoles builds the --redis-roles controller, which writes only
// while leading.
func newRedisRoles(opts Options, client kubernetes.Interface, active *bundles.Active, reg prometheus.Registerer, leading func() bool) (*redisroles.Controller, error) {
	o := opts.RedisRoles
	cfg := redisroles.Config{
		Client: client, Policy: active.Load, Interval: o.Interval,
		PasswordFile: o.PasswordFile, PasswordNamespaces: o.PasswordNamespaces, PasswordInsecure: o.PasswordInsecure,
		PodSecrets:      o.PodSecrets,
		MemoryNamespace: opts.Leader.Namespace, MemoryName: o.Memory,
		Leading: leading, Registerer: reg, Log: opts.Log.WithField("component", "redis-roles"),
	}
	if o.TLS {
		tlsConfig, err := redisroles.TLSConfig(o.CAFile, o.CertFile, o.KeyFile, o.ServerName, o.SkipVerify)
		if err != nil {
			return nil, err
		}
		cfg.TLS = tlsConfig
	}
	return redisroles.New(cfg)
}
