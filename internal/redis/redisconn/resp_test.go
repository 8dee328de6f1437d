package redisconn

import (
	"errors"
	"fmt"
	"strings"
	"testing"
)

// clusterNodes is CLUSTER NODES of a cluster of n nodes, half of them
// masters listing their slots one range at a time, as a bulk string.
func clusterNodes(n int) string {
	var b strings.Builder
	for i := range n {
		id := fmt.Sprintf("%040x", i)
		if i%2 == 0 {
			fmt.Fprintf(&b, "%s 10.0.%d.%d:6379@16379 master - 0 1700000000000 %d connected", id, i/256, i%256, i)
			// 16,384 slots spread over the masters, every other slot on
			// its own: the longest lines a real cluster prints.
			for s := i / 2; s < 16384; s += n / 2 * 2 {
				fmt.Fprintf(&b, " %d", s)
			}
		} else {
			fmt.Fprintf(&b, "%s 10.0.%d.%d:6379@16379 slave %040x 0 1700000000000 %d connected", id, i/256, i%256, i-1, i)
		}
		b.WriteString("\n")
	}
	return fmt.Sprintf("$%d\r\n%s\r\n", b.Len(), b.String())
}

func TestValidator(t *testing.T) {
	small := Limits{MaxBulk: 16, MaxLine: 24, MaxElements: 10, MaxReply: 64, MaxDepth: 3}
	tests := []struct {
		name  string
		lim   Limits
		in    string
		err   bool
		idle  bool // between replies at the end
		error string
	}{
		{name: "INFO", in: "$28\r\n# Cluster\r\ncluster_enabled:0\r\n", idle: true},
		{name: "ROLE of a master", in: "*3\r\n$6\r\nmaster\r\n:0\r\n*0\r\n", idle: true},
		{name: "simple, error, integer, null", in: "+OK\r\n-ERR no\r\n:12\r\n$-1\r\n*-1\r\n", idle: true},
		{name: "RESP3 scalars", in: "_\r\n,1.5\r\n#t\r\n(123456789012345678901234567890\r\n=8\r\ntxt:abcd\r\n!3\r\nERR\r\n", idle: true},
		{name: "RESP3 map, set, push, attribute", in: "%1\r\n+k\r\n~2\r\n:1\r\n:2\r\n>1\r\n+m\r\n|1\r\n+a\r\n+b\r\n:7\r\n", idle: true},
		{name: "a reply in the middle", in: "*2\r\n:1\r\n"},
		{name: "a header split before its CRLF", in: "$10995"},
		{name: "CLUSTER NODES of 1,000 nodes", in: clusterNodes(1000), idle: true},

		{name: "INFO claiming 1 TiB", in: "$1099511627776\r\n", err: true, error: "more than 1048576 bytes"},
		{name: "the 1 TiB refused before its line ends", in: "$1099511627", err: true},
		{name: "ROLE claiming 2^32 elements", in: "*4294967296\r\n", err: true, error: "more than 100000 elements"},
		{name: "a length that would overflow", in: "*99999999999999999999999999\r\n", err: true},
		{name: "a map counts its pairs twice", lim: small, in: "%6\r\n", err: true},
		{name: "elements add up over a reply", lim: small, in: "*6\r\n*5\r\n", err: true},
		{name: "elements start again at the next reply", lim: small, in: "*5\r\n:1\r\n:1\r\n:1\r\n:1\r\n:1\r\n*5\r\n", idle: false},
		{name: "nested too deep", lim: small, in: "*1\r\n*1\r\n*1\r\n*1\r\n", err: true, error: "deeper than 3"},
		{name: "a line too long", lim: small, in: "+" + strings.Repeat("a", 30) + "\r\n", err: true, error: "line longer"},
		{name: "a reply too long", lim: small, in: "*8\r\n" + strings.Repeat("$7\r\n1234567\r\n", 5), err: true, error: "reply longer"},
		{name: "a bulk string without CRLF", in: "$2\r\nabX\r\n", err: true},
		{name: "a line without CR", in: "+OK\n", err: true},
		{name: "a CR inside a line", in: "+O\rK\r\n", err: true},
		{name: "an unknown type", in: "?1\r\n", err: true},
		{name: "a streamed string", in: "$?\r\n", err: true},
		{name: "a length with a sign", in: "$+1\r\n", err: true},
		{name: "a negative length other than -1", in: "*-2\r\n", err: true},
		{name: "minus zero", in: "$-0\r\n", err: true},
		{name: "a null map", in: "%-1\r\n", err: true},
		{name: "a length-less header", in: "*\r\n", err: true},
		{name: "a null with content", in: "_x\r\n", err: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			// Whole, then one byte at a time: the verdict must not depend
			// on how the stream is cut.
			for _, chunk := range []int{len(tt.in), 1} {
				v := NewValidator(tt.lim)
				var err error
				for i := 0; i < len(tt.in) && err == nil; i += chunk {
					err = v.Feed([]byte(tt.in[i:min(i+chunk, len(tt.in))]))
				}
				if (err != nil) != tt.err {
					t.Fatalf("chunks of %d: Feed() = %v, want error %v", chunk, err, tt.err)
				}
				if err != nil && !errors.Is(err, ErrProtocol) {
					t.Errorf("Feed() = %v, not an ErrProtocol", err)
				}
				if err != nil && !strings.Contains(err.Error(), tt.error) {
					t.Errorf("Feed() = %v, want it to say %q", err, tt.error)
				}
				if !tt.err && v.Idle() != tt.idle {
					t.Errorf("Idle() = %v, want %v", v.Idle(), tt.idle)
				}
				if err != nil {
					if again := v.Feed([]byte("+OK\r\n")); !errors.Is(again, ErrProtocol) {
						t.Errorf("Feed() after a refusal = %v, want the refusal again", again)
					}
				}
			}
		})
	}
}
