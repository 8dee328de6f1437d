package placement

import (
	"context"

	appsv1 "k8s.io/api/apps/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/cache"
)

// WithStatefulSets has a cache from NewFromInformers read StatefulSets
// from informer (its owner's, as the node and pod informers are), for
// Replicas. Without it, Replicas knows none.
func WithStatefulSets(informer cache.SharedIndexInformer) Option {
	return func(c *Cache) { c.statefulSets = informer }
}

// Replicas is the desired replicas of the StatefulSet namespace/name, and
// whether the cache knows it: the size of a group whose members it holds.
func (c *Cache) Replicas(namespace, name string) (int, bool) {
	if c.statefulSets == nil || name == "" {
		return 0, false
	}
	obj, ok, err := c.statefulSets.GetIndexer().GetByKey(namespace + "/" + name)
	if err != nil || !ok {
		return 0, false
	}
	s, ok := obj.(*appsv1.StatefulSet)
	if !ok {
		return 0, false
	}
	if s.Spec.Replicas == nil {
		return 1, true // the API server's default
	}
	return int(*s.Spec.Replicas), true
}

// stripStatefulSet is the informer transform for StatefulSets: policies
// read their replicas only.
func stripStatefulSet(obj any) (any, error) {
	s, ok := obj.(*appsv1.StatefulSet)
	if !ok {
		return obj, nil
	}
	return &appsv1.StatefulSet{
		ObjectMeta: metav1.ObjectMeta{
			Namespace:       s.Namespace,
			Name:            s.Name,
			UID:             s.UID,
			ResourceVersion: s.ResourceVersion,
		},
		Spec: appsv1.StatefulSetSpec{Replicas: s.Spec.Replicas},
	}, nil
}

// statefulSetsSynced: listed, or refused. Credentials that may not list
// StatefulSets (a CLI user's) do not keep the cache from serving: group
// sizes are then counted from their members, and the refusal is logged.
func (c *Cache) statefulSetsSynced() bool {
	return c.statefulSetsForbidden.Load() || c.statefulSets.HasSynced()
}

// statefulSetsError notes a refusal to list StatefulSets, logged once,
// and hands every error on to the informer's default handling.
func (c *Cache) statefulSetsError(ctx context.Context, r *cache.Reflector, err error) {
	if apierrors.IsForbidden(err) && c.statefulSetsForbidden.CompareAndSwap(false, true) {
		c.log.WithError(err).Warn("may not list StatefulSets: the size of a quorum's group is counted from its members")
	}
	cache.DefaultWatchErrorHandler(ctx, r, err)
}
