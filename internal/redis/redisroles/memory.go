package redisroles

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/sirupsen/logrus"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
)

// memoryTTL is how long a pod that is gone is remembered: long enough for
// a node to come back or a StatefulSet to recreate the pod elsewhere.
const memoryTTL = 24 * time.Hour

// Caps of the memory. A ConfigMap holds at most 1 MiB; an entry takes 120
// to 450 bytes (its key is the pod's namespace and name), so the byte cap
// binds first for long names, the entry cap otherwise.
const (
	defaultMemoryEntries = 4096
	memoryMaxBytes       = 900 << 10
	// memoryEntryOverhead is what the ConfigMap's encoding adds per entry
	// (quotes, separators).
	memoryEntryOverhead = 8
)

// remembered is the last role Redis reported for a pod identity
// (namespace/name), with the controller that owned the pod: a StatefulSet's
// pod comes back under the same name as the same Redis node, another
// owner's pod of that name is a different one.
type remembered struct {
	Role  string    `json:"role"`
	Shard string    `json:"shard,omitempty"`
	Owner types.UID `json:"owner"`
	Seen  time.Time `json:"seen"`
}

// memory keeps the last known role of each Redis pod identity and, when
// given a ConfigMap, keeps it there, so that it survives a restart of
// regosched and a move of its leadership.
type memory struct {
	client          kubernetes.Interface
	namespace, name string // the ConfigMap; name "": kept in memory only
	maxEntries      int
	evictions       prometheus.Counter
	log             logrus.FieldLogger

	mu      sync.Mutex
	entries map[string]remembered
	dirty   bool
}

func newMemory(client kubernetes.Interface, namespace, name string) *memory {
	return &memory{client: client, namespace: namespace, name: name, entries: map[string]remembered{},
		maxEntries: defaultMemoryEntries, evictions: prometheus.NewCounter(prometheus.CounterOpts{Name: "unregistered"}),
		log: logrus.New()}
}

// ConfigMap keys allow [-._a-zA-Z0-9]: a namespace has no dot, so the first
// dot separates it from the pod's name.
func memoryKey(namespace, name string) string { return namespace + "." + name }

func (m *memory) get(namespace, name string) (remembered, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	r, ok := m.entries[memoryKey(namespace, name)]
	return r, ok
}

// set remembers r, unless it has no owner: only a controller's pod comes
// back as the same Redis node, so no other is ever recalled.
func (m *memory) set(namespace, name string, r remembered) {
	if r.Owner == "" {
		return
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	k := memoryKey(namespace, name)
	old, ok := m.entries[k]
	// Seen alone changing is written at the next save that has a real change,
	// or not at all: it only bounds how long a gone pod is kept.
	if !ok || old.Role != r.Role || old.Shard != r.Shard || old.Owner != r.Owner {
		m.dirty = true
	}
	m.entries[k] = r
}

// load reads the ConfigMap, if any; a missing one is an empty memory.
func (m *memory) load(ctx context.Context) error {
	if m.name == "" {
		return nil
	}
	cm, err := m.client.CoreV1().ConfigMaps(m.namespace).Get(ctx, m.name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("reading remembered Redis roles from ConfigMap %s/%s: %w", m.namespace, m.name, err)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	for k, v := range cm.Data {
		var r remembered
		if err := json.Unmarshal([]byte(v), &r); err != nil || !strings.Contains(k, ".") {
			continue // not ours: leave it to whoever wrote it
		}
		m.entries[k] = r
	}
	return nil
}

// save writes the memory to its ConfigMap when it changed, dropping pods
// not seen for memoryTTL.
func (m *memory) save(ctx context.Context, now time.Time) error {
	m.mu.Lock()
	for k, r := range m.entries {
		if now.Sub(r.Seen) > memoryTTL {
			delete(m.entries, k)
			m.dirty = true
		}
	}
	data, evicted, err := m.encodeLocked()
	if err != nil {
		m.mu.Unlock()
		return err
	}
	if m.name == "" || !m.dirty {
		m.mu.Unlock()
		return nil
	}
	m.dirty = false
	m.mu.Unlock()
	if evicted > 0 {
		m.log.WithFields(logrus.Fields{"dropped": evicted, "kept": len(data), "max_entries": m.maxEntries, "max_bytes": memoryMaxBytes}).
			Warn("the memory of Redis roles is full: the least recently seen pods are forgotten, and placed without their last known role if recreated before Redis answers")
	}

	cms := m.client.CoreV1().ConfigMaps(m.namespace)
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: m.namespace, Name: m.name,
		Labels: map[string]string{"app.kubernetes.io/name": "regosched", "app.kubernetes.io/component": "redis-roles"}}, Data: data}
	_, err = cms.Update(ctx, cm, metav1.UpdateOptions{})
	if apierrors.IsNotFound(err) {
		_, err = cms.Create(ctx, cm, metav1.CreateOptions{})
	}
	if err != nil {
		m.mu.Lock()
		m.dirty = true // try again at the next save
		m.mu.Unlock()
		return fmt.Errorf("writing remembered Redis roles to ConfigMap %s/%s: %w", m.namespace, m.name, err)
	}
	return nil
}

// encodeLocked encodes the entries, most recently seen first, until either
// cap is reached; the rest are dropped and counted. m.mu must be held.
func (m *memory) encodeLocked() (map[string]string, int, error) {
	keys := make([]string, 0, len(m.entries))
	for k := range m.entries {
		keys = append(keys, k)
	}
	slices.SortFunc(keys, func(a, b string) int {
		if c := m.entries[b].Seen.Compare(m.entries[a].Seen); c != 0 {
			return c
		}
		return strings.Compare(a, b)
	})
	data := make(map[string]string, min(len(keys), m.maxEntries))
	size, evicted := 0, 0
	for _, k := range keys {
		b, err := json.Marshal(m.entries[k])
		if err != nil {
			return nil, 0, fmt.Errorf("encoding remembered role of %s: %w", k, err)
		}
		n := len(k) + len(b) + memoryEntryOverhead
		if len(data) >= m.maxEntries || size+n > memoryMaxBytes {
			delete(m.entries, k)
			evicted++
			continue
		}
		data[k] = string(b)
		size += n
	}
	if evicted > 0 {
		m.evictions.Add(float64(evicted))
		m.dirty = true
	}
	return data, evicted, nil
}
