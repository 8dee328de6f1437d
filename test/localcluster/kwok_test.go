package localcluster

import (
	"bytes"
	"errors"
	"net"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/yaml"
)

// TestKwokKey checks that each kwok version has a cache folder of its own,
// so that a bump never reuses the old binary.
func TestKwokKey(t *testing.T) {
	seen := map[string]string{}
	for _, v := range []string{KwokVersion, "v0.7.0", "v0.6.1"} {
		key := kwokKey(v)
		if len(key) < 16 {
			t.Fatalf("kwokKey(%s) = %q, too short for a folder name", v, key)
		}
		if other, ok := seen[key[:16]]; ok {
			t.Errorf("kwok %s and %s share the cache folder bin-%s", v, other, key[:16])
		}
		seen[key[:16]] = v
	}
}

// TestKwokArgs pins what keeps kwok off everything but its own nodes, and
// every address it hands out on loopback.
func TestKwokArgs(t *testing.T) {
	args := kwokArgs("/k/admin.kubeconfig", "/k/kwok/kwok.yaml", "127.0.0.1:1234", 77)
	for _, want := range []string{
		"--kubeconfig=/k/admin.kubeconfig",
		"--config=/k/kwok/kwok.yaml",
		"--manage-all-nodes=false",
		"--manage-nodes-with-annotation-selector=kwok.x-k8s.io/node=fake",
		"--cidr=127.77.255.0/24",
		"--node-ip=127.77.0.1",
		"--server-address=127.0.0.1:1234",
	} {
		if !slices.Contains(args, want) {
			t.Errorf("kwokArgs() = %v, want %q among them", args, want)
		}
	}
	for _, a := range args {
		value, ok := strings.CutPrefix(a, "--cidr=")
		if !ok {
			value, ok = strings.CutPrefix(a, "--node-ip=")
			value += "/32"
		}
		if !ok {
			continue
		}
		if ip, _, err := net.ParseCIDR(value); err != nil || !ip.IsLoopback() {
			t.Errorf("%s: want a loopback address (%v)", a, err)
		}
	}
}

func TestKwokNodeCIDRs(t *testing.T) {
	c := &Cluster{}
	k := &Kwok{c: c, octet: 99}
	tests := []struct {
		name    string
		handed  int // CIDRs handed out before
		want    string
		wantErr error
	}{
		{name: "first", handed: 0, want: "127.99.1.0/24"},
		{name: "second", handed: 1, want: "127.99.2.0/24"},
		{name: "last", handed: 253, want: "127.99.254.0/24"},
		{name: "none left: .255 is the default range", handed: 254, wantErr: errNoCIDR},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c.kwok.cidrs = tt.handed
			got, err := k.nextCIDR()
			if !errors.Is(err, tt.wantErr) || got != tt.want {
				t.Errorf("nextCIDR() = %q, %v; want %q, %v", got, err, tt.want, tt.wantErr)
			}
		})
	}
}

func TestKwokNode(t *testing.T) {
	n := kwokNode("kwok-1", "zone-b", "127.99.3.0/24")
	got := map[string]any{
		"annotation": n.Annotations[KwokNodeAnnotation],
		"label":      n.Labels[KwokNodeLabel],
		"hostname":   n.Labels[LabelHostname],
		"zone":       n.Labels[LabelZone],
		"podCIDRs":   n.Spec.PodCIDRs,
		"podCIDR":    n.Spec.PodCIDR,
		"uid":        string(n.UID),
	}
	want := map[string]any{
		"annotation": "fake", "label": "fake", "hostname": "kwok-1", "zone": "zone-b",
		"podCIDRs": []string{"127.99.3.0/24"}, "podCIDR": "127.99.3.0/24", "uid": "",
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("kwokNode() mismatch (-want +got):\n%s", diff)
	}
	// The taint keeps the other tests' pods off; the toleration lets the
	// loop's pods on.
	tol := KwokToleration()
	if len(n.Spec.Taints) != 1 || n.Spec.Taints[0].Effect != corev1.TaintEffectNoSchedule || tol.Operator != corev1.TolerationOpEqual ||
		tol.Key != n.Spec.Taints[0].Key || tol.Value != n.Spec.Taints[0].Value || tol.Effect != n.Spec.Taints[0].Effect {
		t.Errorf("taints %v, toleration %v: want one NoSchedule taint the toleration tolerates", n.Spec.Taints, tol)
	}
}

// TestKwokStages checks the stages file holds the stages the harness
// relies on, each a kwok Stage of the resource it acts on.
func TestKwokStages(t *testing.T) {
	var got []string
	for _, doc := range bytes.Split(kwokStages, []byte("\n---\n")) {
		var stage struct {
			APIVersion, Kind string
			Metadata         struct{ Name string }
			Spec             struct {
				ResourceRef struct{ Kind string } `json:"resourceRef"`
			}
		}
		if err := yaml.Unmarshal(doc, &stage); err != nil {
			t.Fatalf("a stage does not parse: %v\n%s", err, doc)
		}
		if stage.APIVersion != "kwok.x-k8s.io/v1alpha1" || stage.Kind != "Stage" {
			t.Errorf("stage %s is a %s %s", stage.Metadata.Name, stage.APIVersion, stage.Kind)
		}
		got = append(got, stage.Spec.ResourceRef.Kind+"/"+stage.Metadata.Name)
	}
	want := []string{"Node/node-initialize", "Pod/pod-ready", "Pod/pod-delete"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("stages mismatch (-want +got):\n%s", diff)
	}
}
