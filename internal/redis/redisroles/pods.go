package redisroles

import (
	"path"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// podInfo is what the controller keeps of a pod: enough to classify it,
// reach its Redis and authenticate, and nothing of the rest of its spec.
type podInfo struct {
	Namespace, Name string
	UID             types.UID
	Labels          map[string]string
	// Owner is the controller owning the pod (a StatefulSet), whose pods
	// come back under the same name and Redis identity.
	Owner   types.UID
	IP      string
	Running bool
	// HostNetwork and HostIPs (its node's addresses) tell whether IP is
	// its node's, where the controller must not dial.
	HostNetwork bool
	HostIPs     []string
	// Ports maps container port names to numbers.
	Ports    map[string]int32
	Password passwordRef
	// Source is the pod's SourceAnnotation: where its role labels came from.
	Source string
}

// passwordRef is where the pod's own REDIS_PASSWORD (or VALKEY_PASSWORD)
// comes from, Bitnami's convention: a literal value, a Secret key, or a file
// mounted from a Secret (REDIS_PASSWORD_FILE, VALKEY_PASSWORD_FILE).
type passwordRef struct {
	Value             string
	Secret, SecretKey string
	// User is the ACL user the password belongs to (VALKEY_USER beside
	// VALKEYCLI_AUTH, as valkey-io's operator sets them); empty: the
	// default user.
	User string
}

func (r passwordRef) empty() bool { return r.Value == "" && r.Secret == "" }

// stripPod is the informer transform: a pod keeps only what infoOf reads
// (of its environment, only where its password comes from), so that
// watching every pod of a large cluster costs little memory.
func stripPod(obj any) (any, error) {
	p, ok := obj.(*corev1.Pod)
	if !ok {
		return obj, nil // tombstones pass unchanged
	}
	out := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			Namespace: p.Namespace, Name: p.Name, UID: p.UID, ResourceVersion: p.ResourceVersion,
			Labels: p.Labels, OwnerReferences: p.OwnerReferences,
			Annotations: sourceOnly(p.Annotations),
		},
		Spec:   corev1.PodSpec{HostNetwork: p.Spec.HostNetwork},
		Status: corev1.PodStatus{Phase: p.Status.Phase, PodIP: p.Status.PodIP, HostIP: p.Status.HostIP, HostIPs: p.Status.HostIPs},
	}
	secretFile := false
	for _, c := range p.Spec.Containers {
		kept := corev1.Container{Name: c.Name}
		for _, port := range c.Ports {
			if port.Name != "" {
				kept.Ports = append(kept.Ports, corev1.ContainerPort{Name: port.Name, ContainerPort: port.ContainerPort})
			}
		}
		for _, e := range c.Env {
			if v, ok := passwordEnv(e.Name); ok {
				kept.Env = append(kept.Env, e)
				secretFile = secretFile || v.file
			} else if e.Name == userEnv {
				kept.Env = append(kept.Env, corev1.EnvVar{Name: e.Name, Value: e.Value})
			}
		}
		if len(kept.Env) > 0 {
			kept.VolumeMounts = c.VolumeMounts
		}
		out.Spec.Containers = append(out.Spec.Containers, kept)
	}
	if secretFile {
		for _, v := range p.Spec.Volumes {
			if v.Secret != nil {
				out.Spec.Volumes = append(out.Spec.Volumes, corev1.Volume{Name: v.Name, VolumeSource: corev1.VolumeSource{Secret: v.Secret}})
			}
		}
	}
	return out, nil
}

// infoOf reads a (stripped) pod.
// sourceOnly keeps of annotations only SourceAnnotation, which the
// controller reads back; nil when it is not there.
func sourceOnly(annotations map[string]string) map[string]string {
	if v, ok := annotations[SourceAnnotation]; ok {
		return map[string]string{SourceAnnotation: v}
	}
	return nil
}

func infoOf(p *corev1.Pod) *podInfo {
	info := &podInfo{
		Namespace: p.Namespace, Name: p.Name, UID: p.UID, Labels: p.Labels,
		IP: p.Status.PodIP, Running: p.Status.Phase == corev1.PodRunning,
		HostNetwork: p.Spec.HostNetwork, Source: p.Annotations[SourceAnnotation],
	}
	if p.Status.HostIP != "" {
		info.HostIPs = append(info.HostIPs, p.Status.HostIP)
	}
	for _, h := range p.Status.HostIPs {
		if h.IP != "" && h.IP != p.Status.HostIP {
			info.HostIPs = append(info.HostIPs, h.IP)
		}
	}
	if c := metav1.GetControllerOf(p); c != nil {
		info.Owner = c.UID
	}
	for _, c := range p.Spec.Containers {
		for _, port := range c.Ports {
			if port.Name != "" {
				if info.Ports == nil {
					info.Ports = map[string]int32{}
				}
				info.Ports[port.Name] = port.ContainerPort
			}
		}
		if info.Password.empty() {
			info.Password = passwordOf(p, c)
		}
	}
	return info
}

// passwordOf reads where container c of p takes REDIS_PASSWORD from.
func passwordOf(p *corev1.Pod, c corev1.Container) passwordRef {
	for _, e := range c.Env {
		v, ok := passwordEnv(e.Name)
		var ref passwordRef
		switch {
		case !ok:
			continue
		case !v.file && e.Value != "":
			ref = passwordRef{Value: e.Value}
		case !v.file && e.ValueFrom != nil && e.ValueFrom.SecretKeyRef != nil:
			ref = passwordRef{Secret: e.ValueFrom.SecretKeyRef.Name, SecretKey: e.ValueFrom.SecretKeyRef.Key}
		case v.file:
			ref, _ = mountedSecretFile(p, c, e.Value)
		}
		if ref.empty() {
			continue
		}
		if v.withUser {
			ref.User = envValue(c, userEnv)
		}
		return ref
	}
	return passwordRef{}
}

// userEnv names the ACL user of VALKEYCLI_AUTH's password.
const userEnv = "VALKEY_USER"

// passwordVar is what a variable a pod's own password comes from holds:
// the password, or a file of it; and whether VALKEY_USER names its user.
type passwordVar struct{ file, withUser bool }

// passwordEnv says whether name is a variable a pod's own password comes
// from, and how: Bitnami's convention, REDIS_PASSWORD and
// REDIS_PASSWORD_FILE in its redis charts, VALKEY_PASSWORD and
// VALKEY_PASSWORD_FILE in its valkey charts; and valkey-io's operator's
// VALKEYCLI_AUTH, the password of the user VALKEY_USER (Valkey answers
// the same commands, so its pods are read as Redis pods are).
func passwordEnv(name string) (passwordVar, bool) {
	switch name {
	case "REDIS_PASSWORD", "VALKEY_PASSWORD":
		return passwordVar{}, true
	case "REDIS_PASSWORD_FILE", "VALKEY_PASSWORD_FILE":
		return passwordVar{file: true}, true
	case "VALKEYCLI_AUTH":
		return passwordVar{withUser: true}, true
	}
	return passwordVar{}, false
}

// envValue is the literal value of c's variable name, or "".
func envValue(c corev1.Container, name string) string {
	for _, e := range c.Env {
		if e.Name == name {
			return e.Value
		}
	}
	return ""
}

// mountedSecretFile finds the Secret key behind file, a path under one of
// c's volume mounts of a Secret volume.
func mountedSecretFile(p *corev1.Pod, c corev1.Container, file string) (passwordRef, bool) {
	for _, m := range c.VolumeMounts {
		dir := strings.TrimSuffix(m.MountPath, "/") + "/"
		if !strings.HasPrefix(file, dir) {
			continue
		}
		rel := strings.TrimPrefix(file, dir)
		for _, v := range p.Spec.Volumes {
			if v.Name != m.Name || v.Secret == nil {
				continue
			}
			key := path.Clean(rel)
			for _, item := range v.Secret.Items {
				if item.Path == key {
					key = item.Key
				}
			}
			return passwordRef{Secret: v.Secret.SecretName, SecretKey: key}, true
		}
	}
	return passwordRef{}, false
}
