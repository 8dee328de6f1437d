package redisroles

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"

	"github.com/sirupsen/logrus"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/regosched/regosched/internal/core/policy"
)

// ErrHostNetwork is the answer, before any connection, for a pod that
// shares its node's network: its IP is the node's, so the port it names
// may be another team's Redis listening on that node.
var ErrHostNetwork = errors.New("the pod shares its node's network (hostNetwork, or its IP is its node's): its Redis is not asked")

// hostNetworked reports whether info's IP reaches its node rather than a
// pod of its own.
func hostNetworked(info *podInfo) bool {
	if info.HostNetwork {
		return true
	}
	ip := net.ParseIP(info.IP)
	for _, h := range info.HostIPs {
		if h == info.IP || (ip != nil && ip.Equal(net.ParseIP(h))) {
			return true
		}
	}
	return false
}

// ownNetwork refuses a host-networked pod, for every dial to go through.
func ownNetwork(info *podInfo) error {
	if hostNetworked(info) {
		return fmt.Errorf("pod %s/%s: %w", info.Namespace, info.Name, ErrHostNetwork)
	}
	return nil
}

// markHostNetwork clears the live role labels of a host-networked pod,
// which may have been read from another Redis on its node, and labels it
// with why its role stays unknown, for explain and verify to say so.
func (c *Controller) markHostNetwork(ctx context.Context, info *podInfo, labels policy.LiveLabels, log logrus.FieldLogger) {
	_, hasRole := info.Labels[labels.Role]
	_, hasShard := info.Labels[labels.Shard]
	if !hasRole && !hasShard && info.Labels[policy.UnreadableLabel] == policy.HostNetwork {
		return
	}
	patch, err := json.Marshal(map[string]any{"metadata": map[string]any{
		"uid":         info.UID, // keeps the patch off the pod's next incarnation
		"labels":      map[string]any{labels.Role: nil, labels.Shard: nil, policy.UnreadableLabel: policy.HostNetwork},
		"annotations": map[string]any{SourceAnnotation: nil},
	}})
	if err != nil {
		log.WithError(err).Error("encoding a role patch")
		return
	}
	if _, err := c.cfg.Client.CoreV1().Pods(info.Namespace).Patch(ctx, info.Name, types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
		c.errorsTotal.WithLabelValues(ReasonPatch).Inc()
		log.WithError(err).Warn("marking the pod's Redis role unreadable")
		return
	}
	log.WithField("reason", policy.HostNetwork).Info("Redis role labels cleared: the pod shares its node's network")
}
