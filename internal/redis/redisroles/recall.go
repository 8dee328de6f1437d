package redisroles

import (
	"maps"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/regosched/regosched/internal/core/model"
)

// Recall gives the labels of pod, as the API server has them, plus the
// live role labels remembered of its identity, when it has none yet (ok):
// a filter call for a recreated pod then decides with its last known role,
// even before recall has written it. Only the API server's view counts
// (the controller's informer, same UID): the pod object a request carries
// can claim any owner.
func (c *Controller) Recall(pod *corev1.Pod) (model.Labels, bool) {
	pol := c.cfg.Policy()
	if pol == nil {
		return model.Labels{}, false
	}
	labels, ok := pol.LiveLabels()
	if !ok {
		return model.Labels{}, false
	}
	if _, has := pod.Labels[labels.Role]; has {
		return model.Labels{}, false
	}
	r, ok := c.memory.get(pod.Namespace, pod.Name)
	if !ok {
		return model.Labels{}, false
	}
	stored := c.storedPod(pod.Namespace, pod.Name, pod.UID)
	if stored == nil {
		return model.Labels{}, false
	}
	if _, has := stored.Labels[labels.Role]; has || hostNetworked(infoOf(stored)) {
		return model.Labels{}, false // a host-networked pod's role is never guessed
	}
	owner := metav1.GetControllerOf(stored)
	if owner == nil || r.Owner != owner.UID {
		return model.Labels{}, false
	}
	m := maps.Clone(stored.Labels)
	if m == nil {
		m = map[string]string{}
	}
	m[labels.Role] = r.Role
	if r.Shard != "" {
		m[labels.Shard] = r.Shard
	}
	return model.NewLabels(m), true
}

// storedPod is the informer's pod namespace/name of the given UID, waiting
// up to recallWait for a pod just created to reach the informer; nil when
// the API server has no such pod.
func (c *Controller) storedPod(namespace, name string, uid types.UID) *corev1.Pod {
	deadline := time.Now().Add(c.recallWait)
	for {
		obj, ok, err := c.pods.GetStore().GetByKey(namespace + "/" + name)
		if p, isPod := obj.(*corev1.Pod); err == nil && ok && isPod && p.UID == uid {
			return p
		}
		if !time.Now().Before(deadline) {
			return nil
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// defaultRecallWait is long enough for a watch event to reach the informer
// after the scheduler saw the pod, even on a loaded machine (250 ms was
// not, in CI: a recreated replica was judged as of unknown role and left
// pending), and short next to a filter call's 5 s. Only a remembered pod
// the informer has not seen yet waits.
const defaultRecallWait = time.Second
