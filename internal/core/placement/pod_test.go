package placement

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"

	"github.com/regosched/regosched/internal/core/model"
	"github.com/regosched/regosched/test/fixture"
)

func TestPodFromObject(t *testing.T) {
	labels := map[string]string{"a": "b"}
	tests := []struct {
		name string
		in   *corev1.Pod
		want *model.Pod
	}{
		{
			name: "bound with priority",
			in:   fixture.MakePod().Namespace("shop").Name("p").Labels(labels).Node("n1").Priority(-5).Obj(),
			want: &model.Pod{Namespace: "shop", Name: "p", UID: "uid-p", Labels: model.NewLabels(labels), Priority: -5, Node: "n1"},
		},
		{
			name: "pending, nil priority and labels",
			in:   fixture.MakePod().Namespace("shop").Name("p").Phase(corev1.PodPending).Obj(),
			want: &model.Pod{Namespace: "shop", Name: "p", UID: "uid-p"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if diff := cmp.Diff(tt.want, model.PodFromObject(tt.in)); diff != "" {
				t.Errorf("model.PodFromObject() mismatch (-want +got):\n%s", diff)
			}
		})
	}
}
