package redisroles

import (
	"context"
	"encoding/json"

	"github.com/sirupsen/logrus"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/regosched/regosched/internal/core/policy"
)

// recall puts the remembered role on a pod that has none yet, e.g. a
// StatefulSet's pod recreated under the same name, until Redis answers.
func (c *Controller) recall(ctx context.Context, info *podInfo, labels policy.LiveLabels, log logrus.FieldLogger) {
	if _, has := info.Labels[labels.Role]; has || info.Owner == "" || hostNetworked(info) {
		return // a host-networked pod's role is never guessed
	}
	r, ok := c.memory.get(info.Namespace, info.Name)
	if !ok || r.Owner != info.Owner {
		return
	}
	c.write(ctx, info, labels, Observation{Role: r.Role, Shard: r.Shard}, "remembered", log)
}

// write patches the role labels when they differ from obs, and the source
// annotation when it differs from source: a remembered role that Redis
// confirms is then said to come from Redis.
func (c *Controller) write(ctx context.Context, info *podInfo, labels policy.LiveLabels, obs Observation, source string, log logrus.FieldLogger) {
	role, shard := info.Labels[labels.Role], info.Labels[labels.Shard]
	same := role == obs.Role && shard == obs.Shard
	if same && info.Source == source {
		return
	}
	meta := map[string]any{"annotations": map[string]string{SourceAnnotation: source}}
	if !same {
		set := map[string]any{labels.Role: obs.Role, labels.Shard: obs.Shard}
		if obs.Shard == "" {
			set[labels.Shard] = nil // replication: one shard, no label
		}
		meta["labels"] = set
	}
	patch, err := json.Marshal(map[string]any{"metadata": meta})
	if err != nil {
		log.WithError(err).Error("encoding a role patch")
		return
	}
	// The UID precondition keeps a patch meant for one incarnation of the
	// pod off the next one.
	patch, err = withUID(patch, info.UID)
	if err != nil {
		log.WithError(err).Error("encoding a role patch")
		return
	}
	if _, err := c.cfg.Client.CoreV1().Pods(info.Namespace).Patch(ctx, info.Name, types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
		c.errorsTotal.WithLabelValues(ReasonPatch).Inc()
		log.WithError(err).Warn("writing the pod's Redis role")
		return
	}
	if same {
		log.WithField("source", source).Debug("Redis role confirmed")
		return
	}
	c.changesTotal.Inc()
	log.WithFields(logrus.Fields{"role": obs.Role, "shard": obs.Shard, "was": role + "/" + shard, "source": source}).Info("Redis role label changed")
}

func withUID(patch []byte, uid types.UID) ([]byte, error) {
	var m map[string]map[string]any
	if err := json.Unmarshal(patch, &m); err != nil {
		return nil, err
	}
	m["metadata"]["uid"] = uid
	return json.Marshal(m)
}

// failed counts a failure and logs it when its reason is new for the pod.
func (c *Controller) failed(key, why string, err error, log logrus.FieldLogger) {
	c.errorsTotal.WithLabelValues(why).Inc()
	c.mu.Lock()
	seen := c.lastErr[key] == why
	c.lastErr[key] = why
	c.mu.Unlock()
	if !seen {
		log.WithError(err).WithField("reason", why).Warn("cannot read the pod's Redis role; its labels stay as they are")
	}
}

func (c *Controller) succeeded(key string, log logrus.FieldLogger) {
	c.mu.Lock()
	_, had := c.lastErr[key]
	delete(c.lastErr, key)
	c.mu.Unlock()
	if had {
		log.Info("reading the pod's Redis role again")
	}
}
