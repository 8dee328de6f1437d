package redisconn

import (
	"context"
	"errors"
	"net"
	"runtime"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/regosched/regosched/test/localredis/fakeredis"
)

// peakHeap samples HeapAlloc while f runs and returns the largest growth
// over the heap before it.
func peakHeap(f func()) uint64 {
	var ms runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&ms)
	base := ms.HeapAlloc
	var peak atomic.Uint64
	done := make(chan struct{})
	stopped := make(chan struct{})
	go func() {
		defer close(stopped)
		var ms runtime.MemStats
		for {
			runtime.ReadMemStats(&ms)
			if ms.HeapAlloc > base && ms.HeapAlloc-base > peak.Load() {
				peak.Store(ms.HeapAlloc - base)
			}
			select {
			case <-done:
				return
			case <-time.After(time.Millisecond):
			}
		}
	}()
	f()
	close(done)
	<-stopped
	runtime.ReadMemStats(&ms)
	if ms.HeapAlloc > base && ms.HeapAlloc-base > peak.Load() {
		peak.Store(ms.HeapAlloc - base)
	}
	return peak.Load()
}

// A real TCP listener answers with headers announcing 1 TiB and 2^32
// elements, whole or a byte at a time: go-redis gets an ErrProtocol
// instead of allocating them, and this process's heap barely moves.
func TestBoundedClientAgainstHostileServer(t *testing.T) {
	tests := []struct {
		name    string
		command []any
		answer  func([]string) []byte
		chunked bool
	}{
		{"INFO claims 1 TiB", []any{"INFO", "cluster"}, fakeredis.HostileAnswer, false},
		{"ROLE claims 2^32 elements", []any{"ROLE"}, fakeredis.HostileAnswer, false},
		{"INFO claims 1 TiB a byte at a time", []any{"INFO", "cluster"}, fakeredis.HostileAnswer, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			fake, err := startFake(t, tt.answer, tt.chunked)
			if err != nil {
				t.Fatal(err)
			}
			client := NewClient(redis.Options{Addr: fake, Protocol: 2, MaxRetries: -1, DialTimeout: 2 * time.Second,
				ReadTimeout: 2 * time.Second, PoolSize: 1, DisableIdentity: true}, Limits{})
			defer func() { _ = client.Close() }()
			var cmdErr error
			peak := peakHeap(func() {
				cmdErr = client.Do(t.Context(), tt.command...).Err()
			})
			if !errors.Is(cmdErr, ErrProtocol) {
				t.Fatalf("Do(%v) = %v, want an ErrProtocol", tt.command, cmdErr)
			}
			t.Logf("Do(%v) = %v; peak heap growth %d KiB", tt.command, cmdErr, peak>>10)
			if peak > 8<<20 {
				t.Errorf("peak heap growth %d bytes, want under 8 MiB", peak)
			}
		})
	}
}

// startFake serves answer on loopback; chunked sends each answer a byte at
// a time, so that headers arrive split.
func startFake(t *testing.T, answer func([]string) []byte, chunked bool) (string, error) {
	t.Helper()
	if !chunked {
		f, err := fakeredis.Start(answer)
		if err != nil {
			return "", err
		}
		t.Cleanup(f.Close)
		return "127.0.0.1:" + strconv.Itoa(f.Port()), nil
	}
	// A proxy in front of the fake that forwards its answers byte by byte.
	f, err := fakeredis.Start(answer)
	if err != nil {
		return "", err
	}
	t.Cleanup(f.Close)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	t.Cleanup(func() { _ = ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			up, err := net.Dial("tcp", "127.0.0.1:"+strconv.Itoa(f.Port()))
			if err != nil {
				_ = c.Close()
				return
			}
			go func() { // client -> fake, as is
				buf := make([]byte, 4096)
				for {
					n, err := c.Read(buf)
					if n > 0 {
						_, _ = up.Write(buf[:n])
					}
					if err != nil {
						_ = up.Close()
						return
					}
				}
			}()
			go func() { // fake -> client, a byte per write
				defer func() { _ = c.Close() }()
				b := make([]byte, 1)
				for {
					if _, err := up.Read(b); err != nil {
						return
					}
					if _, err := c.Write(b); err != nil {
						return
					}
					time.Sleep(time.Millisecond)
				}
			}()
		}
	}()
	return ln.Addr().String(), nil
}

// An honest server's replies pass, CLUSTER NODES of 1,000 nodes included,
// over the same bounded connection one after another.
func TestBoundedClientAgainstHonestServer(t *testing.T) {
	nodes := clusterNodes(1000)
	fake, err := fakeredis.Start(func(args []string) []byte {
		if strings.EqualFold(args[0], "CLUSTER") {
			return []byte(nodes)
		}
		return fakeredis.MasterAnswer(args)
	})
	if err != nil {
		t.Fatal(err)
	}
	defer fake.Close()
	client := NewClient(redis.Options{Addr: "127.0.0.1:" + strconv.Itoa(fake.Port()), Protocol: 2, MaxRetries: -1, PoolSize: 1, DisableIdentity: true}, Limits{})
	defer func() { _ = client.Close() }()
	ctx := context.Background()
	info, err := client.Info(ctx, "cluster").Result()
	if err != nil || !strings.Contains(info, "cluster_enabled:0") {
		t.Fatalf("INFO = %q, %v", info, err)
	}
	role, err := client.Do(ctx, "ROLE").Slice()
	if err != nil || len(role) != 3 || role[0] != "master" {
		t.Fatalf("ROLE = %v, %v", role, err)
	}
	got, err := client.ClusterNodes(ctx).Result()
	if err != nil {
		t.Fatalf("CLUSTER NODES of %d bytes: %v", len(nodes), err)
	}
	t.Logf("CLUSTER NODES of 1,000 nodes: %d bytes (bulk cap %d)", len(got), DefaultMaxBulk)
	if lines := strings.Count(got, "\n"); lines != 1000 {
		t.Errorf("CLUSTER NODES has %d lines, want 1000", lines)
	}
}
