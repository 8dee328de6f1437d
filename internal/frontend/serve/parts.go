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

	"github.com/regosched/regosched/internal/core/bundles"
	"github.com/regosched/regosched/internal/core/placement"
	"github.com/regosched/regosched/internal/ops/audit"
	"github.com/regosched/regosched/internal/ops/repair"
	"github.com/regosched/regosched/internal/plumbing/apicontact"
	"github.com/regosched/regosched/internal/redis/redisroles"
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

// auditParts is what newAudit wires: the audit, and after each of its
// passes the repair (--repair).
type auditParts struct {
	client   kubernetes.Interface
	recorder events.EventRecorder
	cache    *placement.Cache
	active   *bundles.Active
	roles    *redisroles.Controller // nil without --redis-roles
	contact  *apicontact.Watch
	repair   RepairOptions
	leaderNS string
	reg      prometheus.Registerer
	log      logrus.FieldLogger
}

func (s *server) auditParts(client kubernetes.Interface, reg prometheus.Registerer) auditParts {
	return auditParts{client: client, recorder: s.recorder, cache: s.parts.Cache, active: s.parts.Active, roles: s.roles, contact: s.contact,
		repair: s.opts.Repair, leaderNS: s.opts.Leader.Namespace, reg: reg, log: s.log}
}

// newRecorder starts the recorder of every Event regosched writes (the
// audit's, the repair's, the rules per zone yielded), through client (the
// background one: Events never queue binds); stop flushes and stops it.
func newRecorder(ctx context.Context, client kubernetes.Interface) (events.EventRecorder, func(), error) {
	broadcaster := events.NewBroadcaster(&events.EventSinkImpl{Interface: client.EventsV1()})
	if err := broadcaster.StartRecordingToSinkWithContext(ctx); err != nil {
		return nil, nil, fmt.Errorf("starting the event recorder: %w", err)
	}
	return broadcaster.NewRecorder(scheme.Scheme, "regosched"), broadcaster.Shutdown, nil
}

// newAudit builds the audit of bound pods, which reports violations as
// events, and the repair that follows its passes.
func newAudit(p auditParts) (*audit.Auditor, error) {
	recorder := p.recorder
	cfg := audit.Config{
		Cache: p.cache, Policies: p.active.Load, Recorder: recorder,
		Log: p.log.WithField("component", "audit"), Registerer: p.reg,
		TriggerGap: audit.DefaultTriggerGap,
	}
	if p.roles != nil {
		cfg.RoleChecked = p.roles.Checked
	}
	if m := p.repair.Mode; m != "" && m != repair.Off {
		rcfg := repair.Config{
			Mode: m, Cache: p.cache, Policies: p.active.Load, Kube: p.client, Recorder: recorder,
			Contact:   p.contact.Err,
			Namespace: p.leaderNS, ConfigMap: p.repair.ConfigMap,
			MaxPerHour: p.repair.MaxPerHour, Timeout: p.repair.Timeout, Cooldown: p.repair.Cooldown,
			MaxLagBytes: p.repair.MaxLagBytes,
			Log:         p.log.WithField("component", "repair"), Registerer: p.reg,
		}
		if p.roles != nil {
			rcfg.Redis = p.roles
		}
		r, err := repair.New(rcfg)
		if err != nil {
			return nil, err
		}
		cfg.AfterPass = r.Pass
	}
	return audit.New(cfg)
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
