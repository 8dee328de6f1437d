package redisroles

import (
	"crypto/tls"
	"fmt"
	"maps"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/sirupsen/logrus"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"

	"github.com/regosched/regosched/internal/core/policy"
)

// SourceAnnotation says where the role labels on a pod come from: "redis"
// (asked just now) or "remembered" (the last answer for this pod identity,
// until Redis answers again).
const SourceAnnotation = "regosched.io/role-source"

// Config is what a Controller needs. Client and Policy are required.
type Config struct {
	Client kubernetes.Interface
	// Policy gives the active policy, which says which pods to ask and
	// which labels to write.
	Policy func() *policy.Policy
	// Interval between checks of every Redis pod; pod events trigger a
	// check at once too.
	Interval time.Duration
	// Timeout bounds one probe of one Redis server.
	Timeout time.Duration
	// PasswordFile, when set, holds the password of every Redis (read at
	// each probe, so a rotated file is used at once).
	PasswordFile string
	// PasswordNamespaces are the namespaces whose pods get PasswordFile's
	// password; required with it. Pods elsewhere are asked with their own
	// REDIS_PASSWORD, as without PasswordFile.
	PasswordNamespaces []string
	// PasswordInsecure allows PasswordFile's password over plain TCP or TLS
	// that does not verify the server; New refuses that without it.
	PasswordInsecure bool
	// PodSecrets lets the controller read the Secret key that a pod's own
	// REDIS_PASSWORD (or REDIS_PASSWORD_FILE) comes from; it needs read
	// access to Secrets. A literal REDIS_PASSWORD value is used without it.
	PodSecrets bool
	// TLS, when set, talks TLS to Redis with this configuration.
	TLS *tls.Config
	// MemoryNamespace/MemoryName name the ConfigMap that keeps the last
	// known roles across restarts; an empty MemoryName keeps them in memory.
	MemoryNamespace, MemoryName string
	// MemoryMaxEntries caps the pods remembered (4096 when 0); the
	// ConfigMap's data is also kept under 900 KiB. At the cap the least
	// recently seen are forgotten first.
	MemoryMaxEntries int
	// Leading tells whether this replica may write; nil: always.
	Leading func() bool
	// Workers probe in parallel; 4 when 0.
	Workers    int
	Registerer prometheus.Registerer
	Log        logrus.FieldLogger
}

// Controller keeps the live role labels of Redis pods true to Redis.
type Controller struct {
	cfg     Config
	factory informers.SharedInformerFactory
	pods    cache.SharedIndexInformer
	// queue holds pods that answered their last probe (or need none),
	// slow the others: new pods and failing ones, with fewer workers.
	queue, slow workqueue.TypedRateLimitingInterface[string]
	health      *health
	memory      *memory

	errorsTotal  *prometheus.CounterVec
	changesTotal prometheus.Counter

	mu       sync.Mutex
	lastErr  map[string]string // pod key -> reason last logged
	classify map[types.UID]classified
}

// classified caches which live source a pod has under one policy and
// label set, so that the periodic check evaluates no Rego.
type classified struct {
	policy *policy.Policy
	labels map[string]string
	source *policy.LiveSource // nil: not asked
}

// New builds a controller; Run starts it.
func New(cfg Config) (*Controller, error) {
	if cfg.Interval <= 0 {
		cfg.Interval = 10 * time.Second
	}
	if cfg.Timeout <= 0 {
		cfg.Timeout = 2 * time.Second
	}
	if cfg.Workers <= 0 {
		cfg.Workers = 4
	}
	if err := checkSharedPassword(cfg); err != nil {
		return nil, err
	}
	c := &Controller{
		cfg:      cfg,
		queue:    workqueue.NewTypedRateLimitingQueue(workqueue.DefaultTypedControllerRateLimiter[string]()),
		slow:     workqueue.NewTypedRateLimitingQueue(workqueue.DefaultTypedControllerRateLimiter[string]()),
		health:   newHealth(cfg.Interval),
		memory:   newMemory(cfg.Client, cfg.MemoryNamespace, cfg.MemoryName),
		lastErr:  map[string]string{},
		classify: map[types.UID]classified{},
		errorsTotal: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "regosched_redis_role_errors_total",
			Help: "Failed reads of a Redis pod's role, by reason (unreachable, auth, protocol, password, patch, error; host_network: the pod shares its node's network and is not asked, its role labels are cleared); otherwise the pod's labels stay as they were.",
		}, []string{"reason"}),
		changesTotal: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "regosched_redis_role_changes_total",
			Help: "Role or shard labels written onto Redis pods because Redis (or the memory of a recreated pod) said otherwise.",
		}),
	}
	if cfg.MemoryMaxEntries > 0 {
		c.memory.maxEntries = cfg.MemoryMaxEntries
	}
	c.memory.log = cfg.Log
	c.memory.evictions = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "regosched_redis_role_memory_evictions_total",
		Help: "Remembered Redis roles forgotten because the memory was full (entries or ConfigMap bytes), least recently seen first; such a pod, if recreated before Redis answers, is placed without its last known role.",
	})
	for _, m := range []prometheus.Collector{c.errorsTotal, c.changesTotal, c.memory.evictions} {
		if err := cfg.Registerer.Register(m); err != nil {
			return nil, fmt.Errorf("registering Redis role metrics: %w", err)
		}
	}
	// Finished pods have no Redis to ask; pending ones may need their
	// remembered role.
	selector := "status.phase!=" + string(corev1.PodSucceeded) + ",status.phase!=" + string(corev1.PodFailed)
	c.factory = informers.NewSharedInformerFactoryWithOptions(cfg.Client, 0,
		informers.WithTweakListOptions(func(o *metav1.ListOptions) { o.FieldSelector = selector }),
		informers.WithTransform(stripPod))
	c.pods = c.factory.Core().V1().Pods().Informer()
	_, err := c.pods.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc: c.enqueue,
		UpdateFunc: func(old, obj any) {
			if changed(old, obj) {
				if key, err := cache.MetaNamespaceKeyFunc(obj); err == nil {
					c.health.forget(key)
				}
			}
			c.enqueue(obj)
		},
		DeleteFunc: func(obj any) {
			if p, ok := obj.(*corev1.Pod); ok {
				c.mu.Lock()
				delete(c.classify, p.UID)
				delete(c.lastErr, p.Namespace+"/"+p.Name)
				c.mu.Unlock()
				c.health.forget(p.Namespace + "/" + p.Name)
			}
		},
	})
	if err != nil {
		return nil, fmt.Errorf("registering Redis pod event handler: %w", err)
	}
	return c, nil
}

func (c *Controller) enqueue(obj any) {
	if key, err := cache.MetaNamespaceKeyFunc(obj); err == nil {
		c.add(key)
	}
}

// add queues key in its lane.
func (c *Controller) add(key string) {
	if c.health.fast(key) {
		c.queue.Add(key)
	} else {
		c.slow.Add(key)
	}
}

// changed reports whether a pod changed in what a probe depends on: then
// its failures are forgotten.
func changed(old, obj any) bool {
	a, ok1 := old.(*corev1.Pod)
	b, ok2 := obj.(*corev1.Pod)
	if !ok1 || !ok2 {
		return true
	}
	x, y := infoOf(a), infoOf(b)
	return x.UID != y.UID || x.IP != y.IP || x.Running != y.Running || !maps.Equal(x.Ports, y.Ports) || x.Password != y.Password ||
		hostNetworked(x) != hostNetworked(y)
}
