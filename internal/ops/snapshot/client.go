package snapshot

import (
	"fmt"
	"strconv"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
)

// Client serves the snapshot as a read-only kubernetes.Interface: gets,
// lists and watches (which never send an event) of its nodes, pods and
// apps/v1 StatefulSets, the last for the placement cache's replicas.
// Lists apply field selectors as the API server does, which client-go's
// fakes do not, since the placement cache lists with one
// ("spec.nodeName!=,status.phase!=..."). Writes fail with Forbidden.
func (s *Snapshot) Client() kubernetes.Interface {
	objs := make([]runtime.Object, 0, len(s.Nodes)+len(s.Bound)+len(s.Pending)+len(s.Finished)+len(s.StatefulSets))
	for _, n := range s.Nodes {
		objs = append(objs, n.DeepCopy())
	}
	for _, p := range s.Pods() {
		objs = append(objs, p.DeepCopy())
	}
	for _, set := range s.StatefulSets {
		objs = append(objs, set.DeepCopy())
	}
	client := fake.NewClientset(objs...)
	client.PrependReactor("list", "pods", func(a k8stesting.Action) (bool, runtime.Object, error) {
		sel, err := selector(a, podField)
		if err != nil {
			return true, nil, err
		}
		list := &corev1.PodList{}
		for _, p := range s.Pods() {
			if (a.GetNamespace() == "" || a.GetNamespace() == p.Namespace) && sel.Matches(podFieldSet(p)) {
				list.Items = append(list.Items, *p.DeepCopy())
			}
		}
		return true, list, nil
	})
	client.PrependReactor("list", "nodes", func(a k8stesting.Action) (bool, runtime.Object, error) {
		sel, err := selector(a, nodeField)
		if err != nil {
			return true, nil, err
		}
		list := &corev1.NodeList{}
		for _, n := range s.Nodes {
			if sel.Matches(nodeFieldSet(n)) {
				list.Items = append(list.Items, *n.DeepCopy())
			}
		}
		return true, list, nil
	})
	client.PrependReactor("list", "statefulsets", func(a k8stesting.Action) (bool, runtime.Object, error) {
		sel, err := selector(a, metadataField)
		if err != nil {
			return true, nil, err
		}
		list := &appsv1.StatefulSetList{}
		for _, set := range s.StatefulSets {
			if (a.GetNamespace() == "" || a.GetNamespace() == set.Namespace) && sel.Matches(metadataFieldSet(set.Name, set.Namespace)) {
				list.Items = append(list.Items, *set.DeepCopy())
			}
		}
		return true, list, nil
	})
	// A snapshot is what a cluster was: it refuses every write.
	for _, verb := range []string{"create", "update", "patch", "delete", "delete-collection", "apply"} {
		client.PrependReactor(verb, "*", func(a k8stesting.Action) (bool, runtime.Object, error) {
			r := a.GetResource()
			return true, nil, apierrors.NewForbidden(schema.GroupResource{Group: r.Group, Resource: r.Resource}, "",
				fmt.Errorf("%s is a read-only snapshot", s.Source))
		})
	}
	return client
}

// podField and nodeField say whether the API server supports a field
// label for pods and nodes (pkg/registry/core/{pod,node}/strategy.go); a
// selector on another is refused, as the API server refuses it.
func podField(f string) bool {
	switch f {
	case "metadata.name", "metadata.namespace", "spec.nodeName", "spec.restartPolicy", "spec.schedulerName",
		"spec.serviceAccountName", "spec.hostNetwork", "status.phase", "status.podIP", "status.nominatedNodeName":
		return true
	}
	return false
}

func nodeField(f string) bool { return f == "metadata.name" || f == "spec.unschedulable" }

// metadataField: the API server supports only the metadata fields on a
// StatefulSet (pkg/registry/apps/statefulset/strategy.go).
func metadataField(f string) bool { return f == "metadata.name" || f == "metadata.namespace" }

// selector is a list action's field selector, everything when it has none.
func selector(a k8stesting.Action, supported func(string) bool) (fields.Selector, error) {
	list, ok := a.(k8stesting.ListAction)
	if !ok {
		return fields.Everything(), nil
	}
	sel := list.GetListRestrictions().Fields
	if sel == nil {
		return fields.Everything(), nil
	}
	for _, r := range sel.Requirements() {
		if !supported(r.Field) {
			return nil, apierrors.NewBadRequest(fmt.Sprintf("field label not supported: %s", r.Field))
		}
	}
	return sel, nil
}

func podFieldSet(p *corev1.Pod) fields.Set {
	return fields.Set{
		"metadata.name":            p.Name,
		"metadata.namespace":       p.Namespace,
		"spec.nodeName":            p.Spec.NodeName,
		"spec.restartPolicy":       string(p.Spec.RestartPolicy),
		"spec.schedulerName":       p.Spec.SchedulerName,
		"spec.serviceAccountName":  p.Spec.ServiceAccountName,
		"spec.hostNetwork":         strconv.FormatBool(p.Spec.HostNetwork),
		"status.phase":             string(p.Status.Phase),
		"status.podIP":             p.Status.PodIP,
		"status.nominatedNodeName": p.Status.NominatedNodeName,
	}
}

func metadataFieldSet(name, namespace string) fields.Set {
	return fields.Set{"metadata.name": name, "metadata.namespace": namespace}
}

func nodeFieldSet(n *corev1.Node) fields.Set {
	return fields.Set{"metadata.name": n.Name, "spec.unschedulable": strconv.FormatBool(n.Spec.Unschedulable)}
}
