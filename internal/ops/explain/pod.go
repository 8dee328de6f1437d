package explain

import (
	"fmt"
	"io"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	"k8s.io/client-go/kubernetes/scheme"
)

// maxPodBytes bounds a pod file; a pod manifest is a few KiB.
const maxPodBytes = 4 << 20

// ReadPod decodes one Pod manifest, YAML or JSON, with its apiVersion and
// kind. Decoding is strict: a misspelt field (say "lables") is an error
// rather than a pod that silently no rule applies to.
func ReadPod(r io.Reader) (*corev1.Pod, error) {
	data, err := io.ReadAll(io.LimitReader(r, maxPodBytes+1))
	if err != nil {
		return nil, fmt.Errorf("reading the pod: %w", err)
	}
	if len(data) > maxPodBytes {
		return nil, fmt.Errorf("the pod manifest exceeds %d bytes", maxPodBytes)
	}
	decoder := serializer.NewCodecFactory(scheme.Scheme, serializer.EnableStrict).UniversalDeserializer()
	obj, gvk, err := decoder.Decode(data, nil, nil)
	if err != nil {
		return nil, fmt.Errorf("decoding the pod: %w", err)
	}
	pod, ok := obj.(*corev1.Pod)
	if !ok {
		return nil, fmt.Errorf("decoding the pod: want a v1 Pod, got %s", gvk)
	}
	return pod, nil
}
