package benche2e

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/sirupsen/logrus"
	extenderv1 "k8s.io/kube-scheduler/extender/v1"
	"sigs.k8s.io/yaml"
)

func TestNullExtenderConfig(t *testing.T) {
	deployed, err := os.ReadFile(filepath.Join("..", "..", "deploy", "scheduler", "kube-scheduler-config.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	out, err := nullExtenderConfig(deployed, "http://127.0.0.1:1234/scheduler", "bench-null-extender")
	if err != nil {
		t.Fatal(err)
	}
	var got, want map[string]any
	if err := yaml.Unmarshal(out, &got); err != nil {
		t.Fatal(err)
	}
	if err := yaml.Unmarshal(deployed, &want); err != nil {
		t.Fatal(err)
	}
	// Only the URL, the verbs the scheduler takes back and the profile name
	// differ from the deployed configuration.
	ext := want["extenders"].([]any)[0].(map[string]any)
	ext["urlPrefix"] = "http://127.0.0.1:1234/scheduler"
	delete(ext, "bindVerb")
	delete(ext, "preemptVerb")
	want["profiles"].([]any)[0].(map[string]any)["schedulerName"] = "bench-null-extender"
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("nullExtenderConfig (-want +got):\n%s", diff)
	}
}

func TestNullExtenderPassesEveryNode(t *testing.T) {
	log := logrus.New()
	log.SetOutput(io.Discard)
	e, err := startNullExtender(log)
	if err != nil {
		t.Fatal(err)
	}
	defer e.stop()
	nodes := []string{"node-1", "node-2", "node-3"}
	post := func(verb string, out any) {
		t.Helper()
		body := []byte(`{"Pod":{"metadata":{"name":"p","namespace":"ns"}},"NodeNames":["node-1","node-2","node-3"]}`)
		resp, err := http.Post(e.url+"/"+verb, "application/json", bytes.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		defer func() { _ = resp.Body.Close() }()
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("%s: status %d", verb, resp.StatusCode)
		}
		if err := json.NewDecoder(resp.Body).Decode(out); err != nil {
			t.Fatal(err)
		}
	}
	var filtered extenderv1.ExtenderFilterResult
	post("filter", &filtered)
	if filtered.NodeNames == nil || filtered.Error != "" {
		t.Fatalf("filter = %+v", filtered)
	}
	if diff := cmp.Diff(nodes, *filtered.NodeNames); diff != "" {
		t.Errorf("filter kept (-want +got):\n%s", diff)
	}
	var scores extenderv1.HostPriorityList
	post("prioritize", &scores)
	if len(scores) != 0 {
		t.Errorf("prioritize = %v, want no preference", scores)
	}
}
