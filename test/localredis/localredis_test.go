//go:build e2e

package localredis

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/sirupsen/logrus"
)

// testLogger sends logrus output to t.Log, so it shows next to the failure.
func testLogger(t *testing.T) *logrus.Logger {
	l := logrus.New()
	l.SetOutput(tWriter{t})
	l.SetLevel(logrus.DebugLevel)
	return l
}

type tWriter struct{ t *testing.T }

func (w tWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}

// processesUnder returns the pids of processes whose working directory is
// under dir: every child this package starts runs in a folder of Options.Dir.
func processesUnder(t *testing.T, dir string) []string {
	t.Helper()
	cwds, err := filepath.Glob("/proc/[0-9]*/cwd")
	if err != nil {
		t.Fatal(err)
	}
	var pids []string
	for _, cwd := range cwds {
		target, err := os.Readlink(cwd)
		if err == nil && (target == dir || strings.HasPrefix(target, dir+"/")) {
			pids = append(pids, filepath.Base(filepath.Dir(cwd)))
		}
	}
	return pids
}

// checkStopped fails the test if any process of g is still alive or any
// process still runs under dir.
func checkStopped(t *testing.T, g group, dir string) {
	t.Helper()
	for _, s := range g {
		if err := signalZero(s.proc.PID()); !errors.Is(err, syscall.ESRCH) {
			t.Errorf("after Stop, signal 0 to %s (pid %d) = %v, want ESRCH", s.name, s.proc.PID(), err)
		}
	}
	if pids := processesUnder(t, dir); len(pids) > 0 {
		t.Errorf("after Stop, processes still running under %s: %v", dir, pids)
	}
}

func dumpLogsOnFailure(t *testing.T, g *group) {
	t.Cleanup(func() {
		if !t.Failed() {
			return
		}
		for _, s := range *g {
			t.Logf("end of %s:\n%s", s.proc.LogPath, s.proc.LogTail(30))
		}
	})
}

func TestCluster(t *testing.T) {
	ctx := t.Context()
	dir := t.TempDir()

	start := time.Now()
	c, err := StartCluster(ctx, Options{Dir: dir, Log: testLogger(t)}, 3, 1)
	if err != nil {
		t.Fatalf("StartCluster() error = %v", err)
	}
	t.Logf("cluster of 3 masters + 3 replicas formed in %s", time.Since(start).Round(time.Millisecond))
	t.Cleanup(c.Stop)
	dumpLogsOnFailure(t, &c.servers)

	nodes, err := c.Nodes(ctx)
	if err != nil {
		t.Fatalf("Nodes() error = %v", err)
	}

	t.Run("shape", func(t *testing.T) {
		roles := map[string]int{}
		replicasOf := map[int]int{}
		ids := map[string]bool{}
		for _, n := range nodes {
			roles[n.Role]++
			if n.Role == RoleReplica {
				replicasOf[n.MasterPort]++
			}
			if len(n.ID) != 40 || ids[n.ID] {
				t.Errorf("node %d: ID %q is not a fresh 40-character node id", n.Port, n.ID)
			}
			ids[n.ID] = true
		}
		if diff := cmp.Diff(map[string]int{RoleMaster: 3, RoleReplica: 3}, roles); diff != "" {
			t.Errorf("roles (-want +got):\n%s", diff)
		}
		var perMaster []int
		for _, n := range replicasOf {
			perMaster = append(perMaster, n)
		}
		if diff := cmp.Diff([]int{1, 1, 1}, perMaster); diff != "" {
			t.Errorf("replicas per master (-want +got):\n%s", diff)
		}
	})

	t.Run("Role and MasterOf", func(t *testing.T) {
		for _, n := range nodes {
			role, err := c.Role(ctx, n.Port)
			if err != nil {
				t.Fatalf("Role(%d) error = %v", n.Port, err)
			}
			if role != n.Role {
				t.Errorf("Role(%d) = %q, Nodes() said %q", n.Port, role, n.Role)
			}
			master, err := c.MasterOf(ctx, n.Port)
			switch {
			case n.Role == RoleMaster && err == nil:
				t.Errorf("MasterOf(master %d) = %d, want an error", n.Port, master)
			case n.Role == RoleReplica && err != nil:
				t.Errorf("MasterOf(replica %d) error = %v", n.Port, err)
			case n.Role == RoleReplica && master != n.MasterPort:
				t.Errorf("MasterOf(%d) = %d, Nodes() said %d", n.Port, master, n.MasterPort)
			}
		}
	})

	t.Run("errors", func(t *testing.T) {
		var masterPort int
		for _, n := range nodes {
			if n.Role == RoleMaster {
				masterPort = n.Port
			}
		}
		for _, tc := range []struct {
			name string
			call func() error
			want string
		}{
			{"Role of a stranger", func() error { _, err := c.Role(ctx, 1); return err }, "no server on port 1"},
			{"Failover on a master", func() error { return c.Failover(ctx, masterPort) }, `want "slave"`},
		} {
			t.Run(tc.name, func(t *testing.T) {
				if err := tc.call(); err == nil || !strings.Contains(err.Error(), tc.want) {
					t.Errorf("error = %v, want one containing %q", err, tc.want)
				}
			})
		}
	})

	t.Run("Failover", func(t *testing.T) {
		replica := slices.IndexFunc(nodes, func(n Node) bool { return n.Role == RoleReplica })
		a, b := nodes[replica].Port, nodes[replica].MasterPort
		// Each step fails over a replica; the second one hands the role back,
		// which also shows that Failover leaves the cluster ready for another.
		for _, step := range []struct {
			name              string
			replica, oldOwner int
		}{
			{"replica takes over", a, b},
			{"old master takes back", b, a},
		} {
			t.Run(step.name, func(t *testing.T) {
				start := time.Now()
				if err := c.Failover(ctx, step.replica); err != nil {
					t.Fatalf("Failover(%d) error = %v", step.replica, err)
				}
				t.Logf("failover to %d took %s", step.replica, time.Since(start).Round(time.Millisecond))
				type state struct {
					NewRole, OldRole string
					OldMasterOf      int
				}
				var got state
				var err error
				if got.NewRole, err = c.Role(ctx, step.replica); err != nil {
					t.Fatal(err)
				}
				if got.OldRole, err = c.Role(ctx, step.oldOwner); err != nil {
					t.Fatal(err)
				}
				if got.OldMasterOf, err = c.MasterOf(ctx, step.oldOwner); err != nil {
					t.Fatal(err)
				}
				want := state{NewRole: RoleMaster, OldRole: RoleReplica, OldMasterOf: step.replica}
				if diff := cmp.Diff(want, got); diff != "" {
					t.Errorf("after Failover(%d) (-want +got):\n%s", step.replica, diff)
				}
			})
		}
	})

	t.Run("Stop", func(t *testing.T) {
		c.Stop()
		c.Stop() // twice is fine
		checkStopped(t, c.servers, dir)
	})
}

func TestReplication(t *testing.T) {
	ctx := t.Context()
	dir := t.TempDir()

	start := time.Now()
	r, err := StartReplication(ctx, Options{Dir: dir, Log: testLogger(t)}, 2)
	if err != nil {
		t.Fatalf("StartReplication() error = %v", err)
	}
	t.Logf("master + 2 replicas in sync in %s", time.Since(start).Round(time.Millisecond))
	t.Cleanup(r.Stop)
	dumpLogsOnFailure(t, &r.servers)

	ports := r.Ports()
	if len(ports) != 3 {
		t.Fatalf("Ports() = %v, want 3 ports", ports)
	}
	// roles maps each port to "master" or "slave of <port index>".
	roles := func(t *testing.T) map[int]string {
		t.Helper()
		got := map[int]string{}
		for i, p := range ports {
			role, err := r.Role(ctx, p)
			if err != nil {
				t.Fatal(err)
			}
			got[i] = role
			if role == RoleReplica {
				m, err := r.MasterOf(ctx, p)
				if err != nil {
					t.Fatal(err)
				}
				got[i] += " of " + strconv.Itoa(slices.Index(ports, m))
			}
		}
		return got
	}
	if diff := cmp.Diff(map[int]string{0: "master", 1: "slave of 0", 2: "slave of 0"}, roles(t)); diff != "" {
		t.Errorf("roles after start (-want +got):\n%s", diff)
	}

	for _, tc := range []struct {
		name    string
		promote int // index into ports
		want    map[int]string
	}{
		{"replica promoted", 2, map[int]string{0: "slave of 2", 1: "slave of 2", 2: "master"}},
		{"first master back", 0, map[int]string{0: "master", 1: "slave of 0", 2: "slave of 0"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			start := time.Now()
			if err := r.Promote(ctx, ports[tc.promote]); err != nil {
				t.Fatalf("Promote(%d) error = %v", ports[tc.promote], err)
			}
			t.Logf("promotion of %d took %s", ports[tc.promote], time.Since(start).Round(time.Millisecond))
			if diff := cmp.Diff(tc.want, roles(t)); diff != "" {
				t.Errorf("roles (-want +got):\n%s", diff)
			}

			// Writes on the new master reach every replica.
			master := newClient(ports[tc.promote], "")
			defer master.Close()
			if err := master.Set(ctx, "k", tc.name, 0).Err(); err != nil {
				t.Fatalf("SET on the new master: %v", err)
			}
			if n, err := master.Wait(ctx, 2, 5*time.Second).Result(); err != nil || n != 2 {
				t.Fatalf("WAIT 2 = %d, %v; want 2 replicas to acknowledge", n, err)
			}
			for i, p := range ports {
				cl := newClient(p, "")
				got, err := cl.Get(ctx, "k").Result()
				_ = cl.Close()
				if err != nil || got != tc.name {
					t.Errorf("GET k on server %d = %q, %v; want %q", i, got, err, tc.name)
				}
			}
		})
	}

	t.Run("Stop", func(t *testing.T) {
		r.Stop()
		checkStopped(t, r.servers, dir)
	})
}

func TestPassword(t *testing.T) {
	const password = `s3cr3t "quoted" \ pass`
	for _, tc := range []struct {
		name  string
		start func(ctx context.Context, opts Options) (ports []int, stop func(), err error)
	}{
		{"cluster", func(ctx context.Context, opts Options) ([]int, func(), error) {
			c, err := StartCluster(ctx, opts, 3, 1)
			if err != nil {
				return nil, nil, err
			}
			return c.Ports(), c.Stop, nil
		}},
		{"replication", func(ctx context.Context, opts Options) ([]int, func(), error) {
			r, err := StartReplication(ctx, opts, 1)
			if err != nil {
				return nil, nil, err
			}
			return r.Ports(), r.Stop, nil
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := t.Context()
			// Replicas are only in sync if masterauth works, which start waits for.
			ports, stop, err := tc.start(ctx, Options{Dir: t.TempDir(), Password: password, Log: testLogger(t)})
			if err != nil {
				t.Fatalf("start error = %v", err)
			}
			t.Cleanup(stop)
			for _, auth := range []struct {
				name, password, want string
			}{
				{"no password", "", "NOAUTH"},
				{"wrong password", "wrong", "WRONGPASS"},
				{"right password", password, "PONG"},
			} {
				t.Run(auth.name, func(t *testing.T) {
					for _, p := range ports {
						cl := newClient(p, auth.password)
						got, err := cl.Ping(ctx).Result()
						_ = cl.Close()
						if err != nil {
							got = err.Error()
						}
						if !strings.HasPrefix(got, auth.want) {
							t.Errorf("PING on %d = %q, want %s...", p, got, auth.want)
						}
					}
				})
			}
		})
	}
}

func TestStartFailsCleanly(t *testing.T) {
	for _, tc := range []struct {
		name    string
		timeout time.Duration
		start   func(ctx context.Context, opts Options) error
	}{
		{"too few masters", time.Minute, func(ctx context.Context, opts Options) error {
			_, err := StartCluster(ctx, opts, 2, 1)
			return err
		}},
		// Deadlines that end the start halfway: while servers start, while
		// redis-cli runs, or while the cluster settles.
		{"cluster cut short early", 30 * time.Millisecond, func(ctx context.Context, opts Options) error {
			_, err := StartCluster(ctx, opts, 3, 1)
			return err
		}},
		{"cluster cut short late", 800 * time.Millisecond, func(ctx context.Context, opts Options) error {
			_, err := StartCluster(ctx, opts, 3, 1)
			return err
		}},
		{"replication cut short", 30 * time.Millisecond, func(ctx context.Context, opts Options) error {
			_, err := StartReplication(ctx, opts, 2)
			return err
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			ctx, cancel := context.WithTimeout(t.Context(), tc.timeout)
			defer cancel()
			err := tc.start(ctx, Options{Dir: dir, Log: testLogger(t)})
			if err == nil {
				t.Fatalf("start succeeded within %s, want an error", tc.timeout)
			}
			t.Logf("error (as expected): %v", err)
			if pids := processesUnder(t, dir); len(pids) > 0 {
				t.Errorf("after a failed start, processes still running under %s: %v", dir, pids)
			}
		})
	}
}
