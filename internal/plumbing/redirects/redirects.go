// Package redirects keeps an HTTP client that sends credentials from
// following a redirect elsewhere than where it was pointed: Go's client
// follows https to http, and to other hosts, with the request's own
// headers, so the policy bundle loader and the decision log's sink share
// this one check rather than each trusting the server they call.
package redirects

import (
	"errors"
	"fmt"
	"net/http"
	"strings"
)

// ErrRefused is wrapped by every error of a check that SameOrigin builds,
// so that a caller can tell a refused redirect, which no retry changes,
// from a server not reachable yet.
var ErrRefused = errors.New("refused the redirect")

// SameOrigin returns a check for http.Client.CheckRedirect that follows a
// redirect only to the host (port included) of the first request, never
// from https to another scheme, and at most 10 in a row (Go's default);
// what names what is fetched in its errors ("policy bundle").
func SameOrigin(what string) func(req *http.Request, via []*http.Request) error {
	return func(req *http.Request, via []*http.Request) error {
		from, to := via[0].URL, req.URL
		var why string
		switch {
		case from.Scheme == "https" && to.Scheme != "https":
			why = "it goes from https to " + to.Scheme + ", in clear"
		case !strings.EqualFold(from.Host, to.Host):
			why = "it goes to another host or port than " + from.Host
		case len(via) >= 10:
			why = "it is the 10th in a row"
		default:
			return nil
		}
		return fmt.Errorf("%w of %s %s to %s: %s", ErrRefused, what, from.Redacted(), to.Redacted(), why)
	}
}
