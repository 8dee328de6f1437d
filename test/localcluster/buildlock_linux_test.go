package localcluster

import (
	"testing"
	"time"
)

// TestLockBuilds: a second build of one folder waits for the first.
func TestLockBuilds(t *testing.T) {
	dir := t.TempDir()
	unlock, err := lockBuilds(dir)
	if err != nil {
		t.Fatal(err)
	}
	got := make(chan func())
	go func() {
		second, err := lockBuilds(dir)
		if err != nil {
			t.Error(err)
			second = func() {}
		}
		got <- second
	}()
	select {
	case <-got:
		t.Fatal("the second build took the lock while the first held it")
	case <-time.After(100 * time.Millisecond):
	}
	unlock()
	select {
	case second := <-got:
		second()
	case <-time.After(10 * time.Second):
		t.Fatal("the second build never got the lock")
	}
}
