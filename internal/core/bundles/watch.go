package bundles

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"time"

	"github.com/sirupsen/logrus"

	"github.com/regosched/regosched/internal/core/policy"
)

// Watcher reloads a bundle directory or .tar.gz when it changes on disk.
// It polls a fingerprint of the files (names, sizes, modification times),
// and loads a change only once it has held still for one interval, so that
// a bundle being copied file by file is not loaded half-written. A bundle
// that fails to load, compile or pass its smoke test never replaces the
// active policy.
type Watcher struct {
	// Path is the bundle directory or .tar.gz; when empty, FS is the bundle
	// (the embedded default policy) and only Options.DataFile is watched.
	Path     string
	FS       fs.FS
	Interval time.Duration
	// Options are the checks a bundle must pass (signature, tests).
	Options Options
	Active  *Active
	// Activate, when set, makes each new policy active: it builds what
	// depends on the policy (the placement index under its peer_keys) and
	// calls store, so that both take effect together. A nil store call
	// leaves the old policy active. Without Activate the policy is stored
	// at once.
	Activate func(ctx context.Context, p *policy.Policy, store func())
	Log      logrus.FieldLogger
	// Loaded is the Fingerprint of Path taken just before the active policy
	// was loaded from it, so that a change made between that load and Run
	// is still seen. Empty: the content when Run starts counts as loaded.
	Loaded string
}

// Run polls until ctx ends.
func (w *Watcher) Run(ctx context.Context) {
	loaded := w.Loaded
	if loaded == "" {
		loaded, _ = w.fingerprint()
	}
	pending := ""
	ticker := time.NewTicker(w.Interval)
	defer ticker.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-ticker.C:
		}
		fp, err := w.fingerprint()
		if err != nil {
			// Reported once per distinct error, not at every poll.
			if gone := "error: " + err.Error(); gone != loaded {
				loaded = gone
				w.fail(err)
			}
			continue
		}
		if fp == loaded {
			pending = ""
			continue
		}
		if fp != pending {
			pending = fp // changed: wait one interval for it to settle
			continue
		}
		pending = ""
		w.reload(ctx, &loaded, fp)
	}
}

func (w *Watcher) reload(ctx context.Context, loaded *string, fp string) {
	// The content is settled: whatever the outcome, it is not tried again
	// until it changes.
	*loaded = fp
	var p *policy.Policy
	var err error
	if w.Path != "" {
		p, err = w.Options.Load(ctx, w.Path)
	} else {
		p, err = w.Options.LoadFS(ctx, w.FS, EmbeddedName)
	}
	if err != nil {
		w.fail(err)
		return
	}
	activate(ctx, w.Active, p, w.Activate, w.Log)
}

func (w *Watcher) fail(err error) { reject(w.Active, err, w.Log) }

// fingerprint summarises what the watcher watches: the bundle at Path and
// the data overlay.
func (w *Watcher) fingerprint() (string, error) {
	return WatchFingerprint(w.Path, w.Options.DataFile)
}

// WatchFingerprint is what a Watcher of path (none when empty) and of the
// data overlay file (none when empty) compares between polls.
func WatchFingerprint(path, dataFile string) (string, error) {
	var fp string
	if path != "" {
		f, err := Fingerprint(path)
		if err != nil {
			return "", fmt.Errorf("reading policy bundle %s: %w", path, err)
		}
		fp = f
	}
	if dataFile != "" {
		f, err := overlayFingerprint(dataFile)
		if err != nil {
			return "", err
		}
		fp += "+" + f
	}
	return fp, nil
}

// activate makes p the active policy, through fn when set.
func activate(ctx context.Context, a *Active, p *policy.Policy, fn func(context.Context, *policy.Policy, func()), log logrus.FieldLogger) {
	stored := false
	store := func() { a.Store(p); stored = true }
	if fn != nil {
		fn(ctx, p, store)
	} else {
		store()
	}
	if !stored {
		log.WithField("revision", p.Revision()).Warn("policy bundle not activated (shutting down?)")
		return
	}
	a.Replaced()
	log.WithField("revision", p.Revision()).Info("policy bundle reloaded")
}

// reject records a bundle that may not replace the active policy, which stays.
func reject(a *Active, err error, log logrus.FieldLogger) {
	a.Failed(err, time.Now())
	log.WithError(err).WithField("revision", a.Status().Revision).
		Error("policy bundle rejected; the previous policy stays active")
}

// Fingerprint summarises the names, sizes and modification times of the
// files under path (or of the file itself), as the Watcher compares them.
func Fingerprint(path string) (string, error) {
	h := sha256.New()
	err := filepath.WalkDir(path, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		if !d.IsDir() {
			_, _ = fmt.Fprintf(h, "%s\x00%d\x00%d\x00", p, info.Size(), info.ModTime().UnixNano())
		}
		return nil
	})
	if err != nil {
		return "", err
	}
	if _, err := os.Stat(path); err != nil {
		return "", err
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}
