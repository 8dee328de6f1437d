package localcluster

import (
	"encoding/pem"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

func TestControllerManagerArgs(t *testing.T) {
	tests := []struct {
		name        string
		controllers []string
		want        string
	}{
		{"defaults", DefaultControllers, "--controllers=deployment-controller,replicaset-controller,disruption-controller"},
		{"one", []string{"disruption-controller"}, "--controllers=disruption-controller"},
		{"aliases pass through", []string{"deployment", "replicaset"}, "--controllers=deployment,replicaset"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			args := controllerManagerArgs("/d/admin.kubeconfig", "/d/pki/kcm", 12345, tt.controllers)
			for _, want := range []string{
				tt.want,
				"--kubeconfig=/d/admin.kubeconfig",
				"--secure-port=12345",
				"--cert-dir=/d/pki/kcm",
				"--leader-elect=false",
				"--use-service-account-credentials=false",
			} {
				if !slices.Contains(args, want) {
					t.Errorf("args lack %s:\n%s", want, strings.Join(args, "\n"))
				}
			}
		})
	}
}

func TestProbeHealthz(t *testing.T) {
	status := http.StatusOK
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/healthz" {
			http.NotFound(w, r)
			return
		}
		w.WriteHeader(status)
	}))
	defer srv.Close()
	dir := t.TempDir()
	caFile := filepath.Join(dir, "server.crt")
	caPEM := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw})

	tests := []struct {
		name   string
		caPEM  []byte // nil: no file
		status int
		want   bool
	}{
		{"certificate not written yet", nil, http.StatusOK, false},
		{"certificate partly written", caPEM[:20], http.StatusOK, false},
		{"unhealthy", caPEM, http.StatusInternalServerError, false},
		{"healthy", caPEM, http.StatusOK, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			os.Remove(caFile)
			if tt.caPEM != nil {
				if err := os.WriteFile(caFile, tt.caPEM, 0o644); err != nil {
					t.Fatal(err)
				}
			}
			status = tt.status
			got, err := probeHealthz(srv.URL+"/healthz", caFile)(t.Context())
			if err != nil {
				t.Fatalf("probe error = %v", err)
			}
			if got != tt.want {
				t.Errorf("probe = %v, want %v", got, tt.want)
			}
		})
	}
}
