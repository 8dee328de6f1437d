package serve

import (
	"errors"
	"fmt"
	"time"

	"github.com/sirupsen/logrus"
	"k8s.io/client-go/kubernetes"

	"github.com/regosched/regosched/internal/core/bundles"
	"github.com/regosched/regosched/internal/frontend/settings"
	"github.com/regosched/regosched/internal/ops/decisionlog"
	"github.com/regosched/regosched/internal/ops/repair"
	"github.com/regosched/regosched/internal/plumbing/leader"
	"github.com/regosched/regosched/internal/plumbing/tlsserve"
)

// Options are the settings of `regosched serve`.
type Options struct {
	Listen string
	// HealthListen, when set, serves /healthz, /readyz, /version and
	// /metrics (and nothing else) over plain HTTP on a second address, for
	// probes that cannot present a client certificate to Listen.
	HealthListen string
	Kubeconfig   string
	// KubeContext is the context of Kubeconfig to use ("": its current
	// context), as kubectl's --context.
	KubeContext string
	// Client, when set, is used instead of one built from Kubeconfig.
	Client kubernetes.Interface
	// APILostAfter is how long the API server may not answer before
	// readiness turns false (0: apicontact.DefaultThreshold).
	APILostAfter time.Duration
	// Policy is where the policy comes from and the checks every bundle
	// passes (bundles.Open); its Log is set by Run.
	Policy       bundles.Config
	URLPrefix    string
	MaxBodyBytes int64
	// MaxConcurrent bounds the verb requests served at once.
	MaxConcurrent int
	// InFlightTTL and InFlightWait bound the wait for peers that passed
	// filter but whose binding is not yet seen (see decision.Options).
	InFlightTTL  time.Duration
	InFlightWait time.Duration
	// SoftInFilter folds the soft rules into filter (see
	// decision.Options).
	SoftInFilter bool
	// ShadowPolicy, when set, is a second bundle (directory, .tar.gz or
	// bundle server URL) judged beside the active policy on every filter
	// call and never enforced, loaded with Policy's checks (see
	// internal/ops/shadow); empty (the default) judges nothing twice.
	ShadowPolicy string
	// Verbs serves the extender verbs. Without them (--verbs=false) no
	// decider and no pending pods are built, and the verbs answer 404:
	// regosched runs beside regosched-scheduler, which decides in process,
	// for the Redis roles, the audit and the repair.
	Verbs bool
	// SchedulerName is the profile whose pods alone are reserved and bound,
	// and whose pending pods are described as soon as they are created,
	// ahead of their filter calls; required with Verbs, unused without.
	SchedulerName string
	// KubeAPIQPS and KubeAPIBurst bound the API requests of the verbs
	// (binds, reads) and of the informers.
	KubeAPIQPS   float32
	KubeAPIBurst int
	// BackgroundQPS and BackgroundBurst bound the writes that are not binds
	// (audit Events, Redis role labels and their memory), on a client of
	// their own, so that a burst of them never delays a bind (0: a fifth of
	// KubeAPIQPS and KubeAPIBurst).
	BackgroundQPS   float32
	BackgroundBurst int
	// TLS, when its CertFile is set, serves HTTPS (with client certificate
	// authentication when ClientCAFile is set too).
	TLS tlsserve.Files
	// LeaderElect makes replicas elect one leader through a Lease: every
	// synced replica is ready, the leader alone answers the verbs and labels
	// its pod (leader.Label) for the Service to select.
	LeaderElect bool
	Leader      leader.Config
	// RedisRoles, when On, reads Redis pods' roles from Redis and writes
	// them onto the pods (see redisroles).
	RedisRoles RedisRolesOptions
	// AuditInterval is the period of the audit of bound pods (the leader
	// only); 0 turns it off.
	AuditInterval time.Duration
	// Repair says what the leader does of the audit's violations after
	// each pass (see internal/ops/repair); it needs the audit.
	Repair RepairOptions
	// CertRoll, when both its names are set, rolls the scheduler's
	// Deployment when its client certificate Secret changes (the leader
	// only; see internal/ops/certroll), in Leader.PodNamespace.
	CertRoll CertRollOptions
	// DecisionLog, when its Target is set, logs every verb's decision as
	// an OPA decision log event (see internal/ops/decisionlog), checked and
	// opened as the plugin build's decisionLog arg is.
	DecisionLog decisionlog.Settings
	// Profiling serves pprof profiles under /debug/pprof/.
	Profiling bool
	Version   string
	Log       logrus.FieldLogger
}

// RepairOptions are the settings of --repair.
type RepairOptions struct {
	// Mode is off, plan or on; "" is off.
	Mode       repair.Mode
	MaxPerHour int
	Timeout    time.Duration
	Cooldown   time.Duration
	// MaxLagBytes is how far a replica may lag behind its master and
	// still be handed its shard.
	MaxLagBytes int64
	// ConfigMap names the ConfigMap, in the leader election namespace,
	// that keeps the repair in flight and the recent ones.
	ConfigMap string
}

// CertRollOptions are the settings of --scheduler-client-secret and
// --scheduler-deployment.
type CertRollOptions struct {
	Secret, Deployment string
}

// On says whether the scheduler's client certificate is watched.
func (o CertRollOptions) On() bool { return o.Secret != "" || o.Deployment != "" }

// RedisRolesOptions are the settings of --redis-roles.
type RedisRolesOptions struct {
	On       bool
	Interval time.Duration
	// PasswordFile holds the password of every Redis; PodSecrets reads the
	// Secret behind each pod's own REDIS_PASSWORD instead.
	PasswordFile string
	// PasswordNamespaces are the only namespaces whose pods are sent the
	// PasswordFile's password; required with it.
	PasswordNamespaces []string
	// PasswordInsecure allows sending the PasswordFile's password without
	// TLS that verifies the server.
	PasswordInsecure bool
	PodSecrets       bool
	// TLS to Redis: on with TLS, verified with CAFile (the system's roots
	// when empty) unless SkipVerify; CertFile/KeyFile as client certificate.
	TLS                       bool
	CAFile, CertFile, KeyFile string
	ServerName                string
	SkipVerify                bool
	// Memory names the ConfigMap, in the leader election namespace, that
	// keeps the last known roles across restarts.
	Memory string
}

// decisionLogFlags names the decision log's settings as serve's flags.
func decisionLogFlags(setting string) string {
	return settings.FlagOf(settings.DecisionLog(&decisionlog.Settings{}), setting)
}

// check refuses settings that would leave a door open, before anything is
// built.
func (o Options) check() error {
	if o.DecisionLog.On() && !o.Verbs {
		return errors.New("--decision-log needs the verbs: without them regosched makes no decision to log")
	}
	if err := o.DecisionLog.Check(decisionLogFlags); err != nil {
		return err
	}
	if o.ShadowPolicy != "" && !o.Verbs {
		return errors.New("--shadow-policy needs the verbs: without them there is no filter call to judge it beside")
	}
	if o.Verbs && o.SchedulerName == "" {
		return errors.New("--scheduler-name is empty: name the scheduler profile that calls regosched, whose pods alone it may bind")
	}
	// Without client certificates there is no name to check: the list
	// would be a restriction that restricts nothing.
	if len(o.TLS.AllowedClientNames) > 0 && (o.TLS.CertFile == "" || o.TLS.ClientCAFile == "") {
		return errors.New("--tls-allowed-client-names needs --tls-cert-file and --client-ca-file: without them no client certificate is asked for")
	}
	if c := o.CertRoll; c.On() && (c.Secret == "" || c.Deployment == "") {
		return errors.New("--scheduler-client-secret and --scheduler-deployment go together: the Secret whose renewal rolls the Deployment")
	}
	if o.CertRoll.On() && o.Leader.PodNamespace == "" {
		return errors.New("--scheduler-client-secret needs --pod-namespace, the namespace of the Secret and the scheduler's Deployment")
	}
	if m := o.Repair.Mode; m != "" && m != repair.Off && o.AuditInterval <= 0 {
		return fmt.Errorf("--repair=%s needs the audit (--audit-interval above 0): repairs follow its passes", m)
	}
	return nil
}
