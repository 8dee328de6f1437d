package deploytest

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// pinnedImage is a registry reference with a tag and a sha256 digest.
var pinnedImage = regexp.MustCompile(`^[a-z0-9./-]+:[A-Za-z0-9._-]+@sha256:[0-9a-f]{64}$`)

// baseImages returns the image of each FROM line of a Dockerfile that is
// not an earlier stage, in order.
func baseImages(dockerfile string) []string {
	stages := map[string]bool{}
	var images []string
	for line := range strings.SplitSeq(dockerfile, "\n") {
		f := strings.Fields(line)
		if len(f) < 2 || !strings.EqualFold(f[0], "FROM") {
			continue
		}
		f = f[1:]
		for len(f) > 0 && strings.HasPrefix(f[0], "--") {
			f = f[1:] // --platform=...
		}
		if len(f) == 0 {
			continue
		}
		if !stages[f[0]] {
			images = append(images, f[0])
		}
		if len(f) == 3 && strings.EqualFold(f[1], "AS") {
			stages[f[2]] = true
		}
	}
	return images
}

// Every base image of the Dockerfile is pinned by digest, with its tag kept
// for readers (issue 34 item 18): a tag can be moved to other content.
func TestDockerfileBaseImagesPinned(t *testing.T) {
	b, err := os.ReadFile(filepath.Join(repoRoot(t), "Dockerfile"))
	if err != nil {
		t.Fatal(err)
	}
	images := baseImages(string(b))
	if len(images) == 0 {
		t.Fatal("no FROM line with a base image in the Dockerfile")
	}
	var unpinned []string
	for _, img := range images {
		if img != "scratch" && !pinnedImage.MatchString(img) { // scratch: no image at all
			unpinned = append(unpinned, img)
		}
	}
	if len(unpinned) > 0 {
		t.Errorf("base images not pinned as name:tag@sha256:digest: %v", unpinned)
	}
}

func TestBaseImages(t *testing.T) {
	tests := []struct {
		name, dockerfile string
		want             []string
	}{
		{"stages are not images", "FROM --platform=$BUILDPLATFORM golang:1.26 AS builder\nFROM builder AS b2\nFROM scratch\n", []string{"golang:1.26", "scratch"}},
		{"lower case", "from alpine:3@sha256:" + strings.Repeat("a", 64) + " as x\nfrom x\n", []string{"alpine:3@sha256:" + strings.Repeat("a", 64)}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if diff := cmp.Diff(tt.want, baseImages(tt.dockerfile)); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}
