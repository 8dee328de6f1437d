// Package frontend groups what kube-scheduler talks to and how a process
// is assembled: extender (HTTP, the four verbs), decision (the verbs over
// the judge), serve (`regosched serve`), and what both builds assemble
// from: settings (every setting once, with serve's flag, the plugin's arg
// and the default) and assembly (the policy, the cache's re-index on
// reload, the shadow and the decision log, opened once). A front end only
// translates to and from the core; it may import every group. Only cmd/
// and regosched-scheduler's plugin (the other front end, in the
// scheduler/ module) import it.
package frontend
