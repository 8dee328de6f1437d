package redisroles

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
)

// memoryTTL is how long a pod that is gone is remembered: long enough for
// a node to come back or a StatefulSet to recreate the pod elsewhere.
const memoryTTL = 24 * time.Hour

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

	mu      sync.Mutex
	entries map[string]remembered
	dirty   bool
}

func newMemory(client kubernetes.Interface, namespace, name string) *memory {
	return &memory{client: client, namespace: namespace, name: name, entries: map[string]remembered{}}
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

func (m *memory) set(namespace, name string, r remembered) {
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
	if m.name == "" || !m.dirty {
		m.mu.Unlock()
		return nil
	}
	data := make(map[string]string, len(m.entries))
	for k, r := range m.entries {
		b, err := json.Marshal(r)
		if err != nil {
			m.mu.Unlock()
			return fmt.Errorf("encoding remembered role of %s: %w", k, err)
		}
		data[k] = string(b)
	}
	m.dirty = false
	m.mu.Unlock()

	cms := m.client.CoreV1().ConfigMaps(m.namespace)
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: m.namespace, Name: m.name,
		Labels: map[string]string{"app.kubernetes.io/name": "regosched", "app.kubernetes.io/component": "redis-roles"}}, Data: data}
	_, err := cms.Update(ctx, cm, metav1.UpdateOptions{})
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
