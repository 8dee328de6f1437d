// Package frontend groups what kube-scheduler talks to and how a process
// is assembled: extender (HTTP, the four verbs), decision (the verbs over
// the judge) and serve (`regosched serve`). A front end only translates
// to and from the core; it may import every group, and nothing but cmd/
// imports it (regosched-scheduler's plugin, the other front end, lives in
// the scheduler/ module).
package frontend
