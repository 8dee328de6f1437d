package redisroles

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/regosched/regosched/internal/core/policy"
)

func TestInfoOf(t *testing.T) {
	yes := true
	owner := metav1.OwnerReference{Kind: "StatefulSet", Name: "cache", UID: "sts-uid", Controller: &yes}
	secretEnv := corev1.EnvVar{Name: "REDIS_PASSWORD", ValueFrom: &corev1.EnvVarSource{SecretKeyRef: &corev1.SecretKeySelector{
		LocalObjectReference: corev1.LocalObjectReference{Name: "cache-redis"}, Key: "redis-password"}}}
	fileEnv := corev1.EnvVar{Name: "REDIS_PASSWORD_FILE", Value: "/opt/bitnami/redis/secrets/redis-password"}
	secretVolume := corev1.Volume{Name: "redis-password", VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{SecretName: "cache-redis"}}}
	mount := corev1.VolumeMount{Name: "redis-password", MountPath: "/opt/bitnami/redis/secrets/"}
	pod := func(env []corev1.EnvVar, volumes []corev1.Volume, mounts []corev1.VolumeMount) *corev1.Pod {
		return &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "cache-0", UID: "u", OwnerReferences: []metav1.OwnerReference{owner}},
			Spec: corev1.PodSpec{Volumes: volumes, Containers: []corev1.Container{{
				Name: "redis", Env: env, VolumeMounts: mounts,
				Ports: []corev1.ContainerPort{{Name: "tcp-redis", ContainerPort: 6380}, {ContainerPort: 9121}},
			}}},
			Status: corev1.PodStatus{Phase: corev1.PodRunning, PodIP: "10.0.0.7"},
		}
	}
	base := podInfo{Namespace: "shop", Name: "cache-0", UID: "u", Owner: "sts-uid", IP: "10.0.0.7", Running: true,
		Ports: map[string]int32{"tcp-redis": 6380}}
	with := func(ref passwordRef) *podInfo { i := base; i.Password = ref; return &i }
	tests := []struct {
		name string
		pod  *corev1.Pod
		want *podInfo
	}{
		{"no password", pod(nil, nil, nil), with(passwordRef{})},
		{"literal", pod([]corev1.EnvVar{{Name: "REDIS_PASSWORD", Value: "s3cret"}}, nil, nil), with(passwordRef{Value: "s3cret"})},
		{"secret key", pod([]corev1.EnvVar{secretEnv}, nil, nil), with(passwordRef{Secret: "cache-redis", SecretKey: "redis-password"})},
		{"file from a secret volume", pod([]corev1.EnvVar{fileEnv}, []corev1.Volume{secretVolume}, []corev1.VolumeMount{mount}),
			with(passwordRef{Secret: "cache-redis", SecretKey: "redis-password"})},
		{"file outside any secret", pod([]corev1.EnvVar{fileEnv}, nil, nil), with(passwordRef{})},
		// Bitnami's valkey and valkey-cluster charts.
		{"valkey literal", pod([]corev1.EnvVar{{Name: "VALKEY_PASSWORD", Value: "v4lkey"}}, nil, nil), with(passwordRef{Value: "v4lkey"})},
		{"valkey secret key", pod([]corev1.EnvVar{{Name: "VALKEY_PASSWORD", ValueFrom: &corev1.EnvVarSource{SecretKeyRef: &corev1.SecretKeySelector{
			LocalObjectReference: corev1.LocalObjectReference{Name: "sessions-valkey-cluster"}, Key: "valkey-password"}}}}, nil, nil),
			with(passwordRef{Secret: "sessions-valkey-cluster", SecretKey: "valkey-password"})},
		{"valkey file from a secret volume", pod(
			[]corev1.EnvVar{{Name: "VALKEY_PASSWORD_FILE", Value: "/opt/bitnami/valkey/secrets/valkey-password"}},
			[]corev1.Volume{{Name: "valkey-password", VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{SecretName: "sessions-valkey-cluster"}}}},
			[]corev1.VolumeMount{{Name: "valkey-password", MountPath: "/opt/bitnami/valkey/secrets/"}}),
			with(passwordRef{Secret: "sessions-valkey-cluster", SecretKey: "valkey-password"})},
		// valkey-io's operator: its probe user's password, and the user.
		{"valkey-io operator user", pod([]corev1.EnvVar{{Name: "VALKEY_USER", Value: "_operator"}, {Name: "VALKEYCLI_AUTH", ValueFrom: &corev1.EnvVarSource{SecretKeyRef: &corev1.SecretKeySelector{
			LocalObjectReference: corev1.LocalObjectReference{Name: "internal-sessions-acl"}, Key: "_operator"}}}}, nil, nil),
			with(passwordRef{Secret: "internal-sessions-acl", SecretKey: "_operator", User: "_operator"})},
		{"a user for VALKEYCLI_AUTH only", pod([]corev1.EnvVar{{Name: "VALKEY_USER", Value: "_operator"}, {Name: "VALKEY_PASSWORD", Value: "v4lkey"}}, nil, nil),
			with(passwordRef{Value: "v4lkey"})},
		{"another variable", pod([]corev1.EnvVar{{Name: "REDISCLI_AUTH", Value: "x"}, {Name: "PASSWORD", Value: "y"}}, nil, nil), with(passwordRef{})},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			stripped, err := stripPod(tt.pod)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tt.want, infoOf(stripped.(*corev1.Pod))); diff != "" {
				t.Errorf("infoOf(stripPod()) mismatch (-want +got):\n%s", diff)
			}
		})
	}
}

func TestPort(t *testing.T) {
	info := &podInfo{Ports: map[string]int32{"tcp-redis": 6380, "metrics": 9121}}
	tests := []struct {
		name string
		src  policy.LiveSource
		want int
	}{
		{"named port", policy.LiveSource{PortNames: []string{"redis", "tcp-redis"}, Port: 6379}, 6380},
		{"default", policy.LiveSource{PortNames: []string{"redis"}, Port: 6379}, 6379},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := port(info, &tt.src); got != tt.want {
				t.Errorf("port() = %d, want %d", got, tt.want)
			}
		})
	}
}
