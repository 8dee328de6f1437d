package repair

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/sirupsen/logrus"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"

	"github.com/regosched/regosched/internal/core/model"
)

// state is what the leader keeps of repairs, in a ConfigMap, so that the
// next leader follows up the repair in flight and keeps the budget, the
// cooldowns and the back-offs.
type state struct {
	InFlight *inFlight `json:"inFlight,omitempty"`
	// Done are the repairs ended, oldest first, within the last hour or
	// the cooldown, whichever is longer.
	Done []record `json:"done,omitempty"`
	// Failovers are the last role change seen in each cluster (by the
	// labels, or a failover regosched sent).
	Failovers map[string]time.Time `json:"failovers,omitempty"`
	// Backoff holds the clusters whose last repair failed.
	Backoff map[string]backoff `json:"backoff,omitempty"`

	// version is the ConfigMap's resourceVersion, and exists whether it
	// was there: a write fails when another writer came in between.
	version string
	exists  bool
}

// inFlight is a repair whose action was (or is about to be) sent and whose
// violation has not cleared yet.
type inFlight struct {
	Cluster   string          `json:"cluster"`
	Action    Action          `json:"action"`
	Target    string          `json:"target"`
	TargetUID types.UID       `json:"targetUID"`
	Violation violationRecord `json:"violation"`
	Started   time.Time       `json:"started"`
}

type violationRecord struct {
	Rule string   `json:"rule"`
	Pods []string `json:"pods"`
}

type record struct {
	Cluster string    `json:"cluster"`
	Action  Action    `json:"action"`
	Target  string    `json:"target"`
	Outcome string    `json:"outcome"`
	Started time.Time `json:"started"`
	Ended   time.Time `json:"ended"`
}

type backoff struct {
	Until    time.Time `json:"until"`
	Failures int       `json:"failures"`
}

// target is the pod the repair acts on, by name and UID: it may be gone
// (evicted) by the time the repair is followed up.
func (f *inFlight) target() *model.Pod {
	ns, name, _ := strings.Cut(f.Target, "/")
	return &model.Pod{Namespace: ns, Name: name, UID: f.TargetUID}
}

// rolesChanged records a role change in cluster (seen, or sent) at now.
func (st *state) rolesChanged(cluster string, now time.Time) {
	if st.Failovers == nil {
		st.Failovers = map[string]time.Time{}
	}
	st.Failovers[cluster] = now
}

// maxRecords bounds the history the ConfigMap keeps, whatever the flags.
const maxRecords = 256

// stateKey is the ConfigMap's data key.
const stateKey = "state.json"

// store reads and writes the state ConfigMap.
type store struct {
	kube            kubernetes.Interface
	namespace, name string
	// log and metrics tell what the bounds drop and the writes that fail,
	// which otherwise stop every repair unseen; nil tells nothing.
	log     logrus.FieldLogger
	metrics *stateMetrics
}

func (s store) load(ctx context.Context) (*state, error) {
	cm, err := s.kube.CoreV1().ConfigMaps(s.namespace).Get(ctx, s.name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return &state{}, nil
	}
	if err != nil {
		return nil, fmt.Errorf("reading ConfigMap %s/%s: %w", s.namespace, s.name, err)
	}
	st := &state{}
	if raw := cm.Data[stateKey]; raw != "" {
		if err := json.Unmarshal([]byte(raw), st); err != nil {
			// A state that cannot be read could hide a repair in flight:
			// better to stop than to act twice.
			return nil, fmt.Errorf("ConfigMap %s/%s: %s is not a repair state: %w", s.namespace, s.name, stateKey, err)
		}
	}
	st.version, st.exists = cm.ResourceVersion, true
	return st, nil
}

// save writes st where it was read from, within its bounds (what is
// beyond is dropped from st too); it fails when the ConfigMap changed since.
func (s store) save(ctx context.Context, st *state) error {
	raw, err := s.encode(st)
	if err != nil {
		return s.failed(err, len(raw))
	}
	cm := &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Namespace: s.namespace, Name: s.name, ResourceVersion: st.version,
			Labels: map[string]string{"app.kubernetes.io/name": "regosched", "app.kubernetes.io/component": "repair"}},
		Data: map[string]string{stateKey: string(raw)},
	}
	var out *corev1.ConfigMap
	if !st.exists {
		out, err = s.kube.CoreV1().ConfigMaps(s.namespace).Create(ctx, cm, metav1.CreateOptions{})
	} else {
		out, err = s.kube.CoreV1().ConfigMaps(s.namespace).Update(ctx, cm, metav1.UpdateOptions{})
	}
	if err != nil {
		return s.failed(fmt.Errorf("writing ConfigMap %s/%s: %w", s.namespace, s.name, err), len(raw))
	}
	st.version, st.exists = out.ResourceVersion, true
	return nil
}

// encode is st within its bounds, encoded; it counts and logs what the
// bounds dropped.
func (s store) encode(st *state) ([]byte, error) {
	raw, dropped, err := st.encodeBounded(maxFailovers, maxStateBytes)
	s.metrics.countDropped(dropped)
	if len(dropped.byReason) > 0 && s.log != nil {
		s.log.WithFields(logrus.Fields{"dropped": dropped.byReason, "namespaces": dropped.top(3), "bytes": len(raw),
			"failovers": len(st.Failovers), "records": len(st.Done)}).
			Warn("repair: the repair state outgrew its bounds; the oldest role changes of the namespaces holding the most were dropped")
	}
	return raw, err
}

// failed counts and logs a write of the state that failed, and returns err.
func (s store) failed(err error, size int) error {
	s.metrics.countFailure()
	if s.log != nil {
		s.log.WithError(err).WithField("bytes", size).Error("repair: the repair state cannot be written; no repair starts until it can")
	}
	return err
}

// prune forgets the records older than keep, and the oldest beyond
// maxRecords, and the back-offs and failovers that ended.
func (st *state) prune(now time.Time, keep time.Duration) {
	i := 0
	for i < len(st.Done) && now.Sub(st.Done[i].Ended) > keep {
		i++
	}
	st.Done = st.Done[i:]
	if n := len(st.Done); n > maxRecords {
		st.Done = st.Done[n-maxRecords:]
	}
	for c, b := range st.Backoff {
		if now.After(b.Until) && now.Sub(b.Until) > keep {
			delete(st.Backoff, c)
		}
	}
	for c, t := range st.Failovers {
		if now.Sub(t) > keep {
			delete(st.Failovers, c)
		}
	}
}
