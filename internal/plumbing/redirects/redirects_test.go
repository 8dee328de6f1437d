package redirects

import (
	"errors"
	"net/http"
	"net/url"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestSameOrigin(t *testing.T) {
	request := func(t *testing.T, raw string) *http.Request {
		t.Helper()
		u, err := url.Parse(raw)
		if err != nil {
			t.Fatal(err)
		}
		return &http.Request{URL: u}
	}
	tests := []struct {
		name     string
		from, to string
		// earlier is how many requests came before the redirect's, the
		// first included.
		earlier int
		// wantErr is the whole error; "": followed.
		wantErr string
	}{
		{name: "same host, another path", from: "https://logs.example/a", to: "https://logs.example/b", earlier: 1},
		{name: "host letters in another case", from: "https://Logs.Example/a", to: "https://logs.example/b", earlier: 1},
		{name: "plain http within its host", from: "http://logs.example:8080/a", to: "http://logs.example:8080/b", earlier: 1},
		{name: "the 9th in a row", from: "https://logs.example/a", to: "https://logs.example/b", earlier: 9},
		{
			name: "https to http", from: "https://logs.example/a", to: "http://logs.example/a", earlier: 1,
			wantErr: "refused the redirect of decision log https://logs.example/a to http://logs.example/a: it goes from https to http, in clear",
		},
		{
			name: "another host", from: "https://logs.example/a", to: "https://evil.example/a", earlier: 1,
			wantErr: "refused the redirect of decision log https://logs.example/a to https://evil.example/a: it goes to another host or port than logs.example",
		},
		{
			name: "another port", from: "https://logs.example:8443/a", to: "https://logs.example:9443/a", earlier: 1,
			wantErr: "refused the redirect of decision log https://logs.example:8443/a to https://logs.example:9443/a: it goes to another host or port than logs.example:8443",
		},
		{
			name: "the 10th in a row", from: "https://logs.example/a", to: "https://logs.example/b", earlier: 10,
			wantErr: "refused the redirect of decision log https://logs.example/a to https://logs.example/b: it is the 10th in a row",
		},
		{
			name: "a password in the URL is not told", from: "https://u:secret@logs.example/a", to: "http://u:secret@logs.example/a", earlier: 1,
			wantErr: "refused the redirect of decision log https://u:xxxxx@logs.example/a to http://u:xxxxx@logs.example/a: it goes from https to http, in clear",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			via := []*http.Request{request(t, tt.from)}
			for len(via) < tt.earlier {
				via = append(via, request(t, tt.to))
			}
			err := SameOrigin("decision log")(request(t, tt.to), via)
			got := ""
			if err != nil {
				got = err.Error()
				if !errors.Is(err, ErrRefused) {
					t.Errorf("error %v does not wrap ErrRefused", err)
				}
			}
			if diff := cmp.Diff(tt.wantErr, got); diff != "" {
				t.Errorf("SameOrigin()() error (-want +got):\n%s", diff)
			}
		})
	}
}
