package redisroles

import (
	"context"
	"maps"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/regosched/regosched/internal/core/model"
)

// Recall gives the labels of pod, as the API server has them, plus the
// live role labels remembered of its identity, when it has none yet (ok):
// a filter call for a recreated pod then decides with its last known role,
// even before recall has written it. Only the API server's view counts
// (same UID): the pod object a request carries can claim any owner.
func (c *Controller) Recall(ctx context.Context, pod *corev1.Pod) (model.Labels, bool) {
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
	stored := c.storedPod(ctx, pod.Namespace, pod.Name, pod.UID)
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

// Checked reports whether the pod namespace/name was checked (its role
// read from Redis, or the read tried, or none needed) since it last
// changed in what the read depends on (its IP, ports, running): until
// then its role labels may be half written, and the audit holds its
// violations (audit.Config.RoleChecked).
func (c *Controller) Checked(namespace, name string) bool {
	return c.health.known(namespace + "/" + name)
}

// storedPod is the API server's pod namespace/name of the given UID, or
// nil. The informer answers when it has that incarnation; a pod just
// created may not have reached it yet, and is read from the API server
// itself: a wait on the informer, however long, was a race on a busy
// machine. Only remembered pods without role labels get here.
func (c *Controller) storedPod(ctx context.Context, namespace, name string, uid types.UID) *corev1.Pod {
	obj, ok, err := c.pods.GetStore().GetByKey(namespace + "/" + name)
	if p, isPod := obj.(*corev1.Pod); err == nil && ok && isPod && p.UID == uid {
		return p
	}
	ctx, cancel := context.WithTimeout(ctx, recallReadTimeout)
	defer cancel()
	p, err := c.cfg.Client.CoreV1().Pods(namespace).Get(ctx, name, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		return nil
	case err != nil:
		c.cfg.Log.WithError(err).WithField("pod", namespace+"/"+name).Debug("redis-roles: cannot read a recreated pod to recall its role")
		return nil
	case p.UID != uid:
		return nil
	}
	return p
}

// recallReadTimeout bounds the read of a pod the informer has not seen
// yet, well within a filter call's 5 s.
const recallReadTimeout = 2 * time.Second
