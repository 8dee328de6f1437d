package redisroles

import (
	"errors"
	"fmt"
	"net"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// CLUSTER NODES of a three-shard cluster as Redis 7 prints it, myself
// marked on the line named by the test.
const nodes = `07c37dfeb235213a872192d90877d0cd55635b91 127.0.0.1:7004@17004 slave e7d1eecce10fd6bb5eb35b9f99a514335d9ba9ca 0 1426238317239 4 connected
67ed2db8d677e59ec4a4cefb06858cf2a1a89fa1 127.0.0.1:7002@17002 master - 0 1426238316232 2 connected 5461-10922
292f8b365bb7edb5e285caf0b7e6ddc7265d2f4f 127.0.0.1:7003@17003 master - 0 1426238318243 3 connected 10923-16383 [10924->-67ed2db8d677e59ec4a4cefb06858cf2a1a89fa1]
6ec23923021cf3ffec47632106199cb7f496ce01 127.0.0.1:7005@17005 slave 67ed2db8d677e59ec4a4cefb06858cf2a1a89fa1 0 1426238316232 5 connected
824fe116063bc5fcf9f4ffd895bc17aee7731ac3 127.0.0.1:7006@17006 slave 292f8b365bb7edb5e285caf0b7e6ddc7265d2f4f 0 1426238317741 6 connected
e7d1eecce10fd6bb5eb35b9f99a514335d9ba9ca 127.0.0.1:7001@17001 master - 0 0 1 connected 0-5460
a1b2c3d4e5f60718293a4b5c6d7e8f9012345678 127.0.0.1:7007@17007 master - 0 0 7 connected`

// mark flags the node whose id starts with id as myself.
func mark(id string) string {
	var out []string
	for _, line := range strings.Split(nodes, "\n") {
		if strings.HasPrefix(line, id) {
			f := strings.Fields(line)
			f[2] = "myself," + f[2]
			line = strings.Join(f, " ")
		}
		out = append(out, line)
	}
	return strings.Join(out, "\n")
}

func TestFromClusterNodes(t *testing.T) {
	tests := []struct {
		name  string
		reply string
		want  Observation
		err   bool
	}{
		{"master of the first slots", mark("e7d1eecce10f"), Observation{Master, "slot-0"}, false},
		{"its replica names the same shard", mark("07c37dfeb235"), Observation{Replica, "slot-0"}, false},
		{"replica of the middle shard", mark("6ec23923021c"), Observation{Replica, "slot-5461"}, false},
		{"a slot being migrated is left out", mark("292f8b365bb7"), Observation{Master, "slot-10923"}, false},
		{"a master without slots is named by its id", mark("a1b2c3d4e5f6"), Observation{Master, "node-a1b2c3d4e5f6"}, false},
		{"no myself", nodes, Observation{}, true},
		{"short line", "abc 127.0.0.1:1@2 myself,master", Observation{}, true},
		{"bad slot", "abc 127.0.0.1:1@2 myself,master - 0 0 1 connected x-1", Observation{}, true},
		{"replica of an unknown master", "abc 127.0.0.1:1@2 myself,slave def 0 0 1 connected", Observation{}, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := fromClusterNodes(tt.reply)
			if tt.err {
				if err == nil || !errors.Is(err, errProtocol) {
					t.Fatalf("fromClusterNodes() error = %v, want a protocol error", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("fromClusterNodes() mismatch (-want +got):\n%s", diff)
			}
		})
	}
}

func TestReason(t *testing.T) {
	tests := []struct {
		err  error
		want string
	}{
		{protocolError("x"), ReasonProtocol},
		{errors.New("NOAUTH Authentication required."), ReasonAuth},
		{fmt.Errorf("INFO cluster: %w", errors.New("WRONGPASS invalid username-password pair or user is disabled.")), ReasonAuth},
		{&net.OpError{Op: "dial", Err: errors.New("connection refused")}, ReasonUnreachable},
		{errors.New("ERR unknown command"), ReasonError},
		{fmt.Errorf("pod shop/cache-0: %w", ErrHostNetwork), ReasonHostNetwork},
	}
	for _, tt := range tests {
		t.Run(tt.err.Error(), func(t *testing.T) {
			if got := reason(tt.err); got != tt.want {
				t.Errorf("reason(%v) = %q, want %q", tt.err, got, tt.want)
			}
		})
	}
}
