package explain

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestReadPod(t *testing.T) {
	want := &corev1.Pod{
		TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Pod"},
		ObjectMeta: metav1.ObjectMeta{Name: "cache-2-master", Namespace: "shop", Labels: map[string]string{
			"app.kubernetes.io/name": "redis", "app.kubernetes.io/component": "master",
		}},
		Spec: corev1.PodSpec{SchedulerName: "regosched", Containers: []corev1.Container{{Name: "redis", Image: "redis:7"}}},
	}
	tests := []struct {
		name    string
		in      string
		want    *corev1.Pod
		wantErr string
	}{
		{"yaml", `apiVersion: v1
kind: Pod
metadata:
  name: cache-2-master
  namespace: shop
  labels:
    app.kubernetes.io/name: redis
    app.kubernetes.io/component: master
spec:
  schedulerName: regosched
  containers: [{name: redis, image: "redis:7"}]
`, want, ""},
		{"json", `{"apiVersion":"v1","kind":"Pod","metadata":{"name":"cache-2-master","namespace":"shop",
"labels":{"app.kubernetes.io/name":"redis","app.kubernetes.io/component":"master"}},
"spec":{"schedulerName":"regosched","containers":[{"name":"redis","image":"redis:7"}]}}`, want, ""},
		{"misspelt field", "apiVersion: v1\nkind: Pod\nmetadata:\n  name: p\n  lables: {a: b}\n", nil, `unknown field "metadata.lables"`},
		{"not a pod", "apiVersion: v1\nkind: Service\nmetadata:\n  name: s\n", nil, "want a v1 Pod, got /v1, Kind=Service"},
		{"no kind", "metadata:\n  name: p\n", nil, "Kind' is missing"},
		{"not a manifest", "{", nil, "decoding the pod"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := ReadPod(strings.NewReader(tt.in))
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("ReadPod() error = %v, want %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("ReadPod() mismatch (-want +got):\n%s", diff)
			}
		})
	}
}
