package redisconn

import (
	"bytes"
	"errors"
	"strconv"
	"testing"
)

// fuzzLimits are small, so that random inputs reach every cap.
var fuzzLimits = Limits{MaxBulk: 64, MaxLine: 32, MaxElements: 16, MaxReply: 256, MaxDepth: 4}

var errIncomplete = errors.New("incomplete")

// reference parses whole replies from a complete buffer, recursively: an
// independent statement of what the streaming Validator accepts.
type reference struct {
	lim             Limits
	b               []byte
	start, elements int64
}

func (r *reference) line(i int) (string, int, error) {
	end := bytes.IndexByte(r.b[i:], '\n')
	if end < 0 {
		return "", 0, errIncomplete
	}
	end += i
	if int64(end-i+1) > r.lim.MaxLine || end-i < 2 || r.b[end-1] != '\r' || bytes.IndexByte(r.b[i:end-1], '\r') >= 0 {
		return "", 0, ErrProtocol
	}
	if int64(end+1)-r.start > r.lim.MaxReply {
		return "", 0, ErrProtocol
	}
	return string(r.b[i+1 : end-1]), end + 1, nil
}

func (r *reference) value(i, depth int) (int, error) {
	if i >= len(r.b) {
		return 0, errIncomplete
	}
	typ := r.b[i]
	text, next, err := r.line(i)
	if err != nil {
		return 0, err
	}
	switch typ {
	case '+', '-', ':', ',', '#', '(':
		return next, nil
	case '_':
		if text != "" {
			return 0, ErrProtocol
		}
		return next, nil
	case '$', '=', '!', '*', '%', '~', '>', '|':
	default:
		return 0, ErrProtocol
	}
	digits := text
	if len(text) > 1 && text[0] == '-' {
		digits = text[1:] // go-redis reads "-01" as -1 too
	}
	for _, c := range digits {
		if c < '0' || c > '9' {
			return 0, ErrProtocol
		}
	}
	n, err := strconv.ParseInt(text, 10, 64)
	switch {
	case err != nil:
		return 0, ErrProtocol
	case n == -1 && (typ == '$' || typ == '*') && text[0] == '-':
		return next, nil
	case n < 0 || text[0] == '-':
		return 0, ErrProtocol
	}
	switch typ {
	case '$', '=', '!':
		if n > r.lim.MaxBulk {
			return 0, ErrProtocol
		}
		end := next + int(n) + 2
		if int64(min(end, len(r.b)))-r.start > r.lim.MaxReply {
			return 0, ErrProtocol
		}
		if end > len(r.b) {
			return 0, errIncomplete
		}
		if r.b[end-2] != '\r' || r.b[end-1] != '\n' {
			return 0, ErrProtocol
		}
		return end, nil
	}
	if typ == '%' || typ == '|' {
		n *= 2
	}
	if r.elements+n > r.lim.MaxElements {
		return 0, ErrProtocol
	}
	r.elements += n
	if typ == '|' {
		n++
	}
	if n > 0 && depth >= r.lim.MaxDepth {
		return 0, ErrProtocol
	}
	for range n {
		if next, err = r.value(next, depth+1); err != nil {
			return 0, err
		}
	}
	return next, nil
}

// parse reads replies until b ends: nil when b is whole replies only.
func (r *reference) parse() error {
	for i := 0; i < len(r.b); {
		r.start, r.elements = int64(i), 0
		next, err := r.value(i, 0)
		if err != nil {
			return err
		}
		i = next
	}
	return nil
}

// FuzzRESPValidator checks that the streaming Validator never panics, that
// its verdict does not depend on how the stream is cut, and that on input
// the reference parser settles (whole replies, or a refusal) it agrees with
// it.
func FuzzRESPValidator(f *testing.F) {
	for _, seed := range []string{
		"$28\r\n# Cluster\r\ncluster_enabled:0\r\n",
		"*3\r\n$6\r\nmaster\r\n:0\r\n*0\r\n",
		"+OK\r\n-ERR no\r\n:1\r\n$-1\r\n*-1\r\n",
		"%1\r\n+k\r\n~2\r\n:1\r\n:2\r\n|1\r\n+a\r\n+b\r\n:7\r\n",
		"$1099511627776\r\n",
		"*4294967296\r\n",
		"*1\r\n*1\r\n*1\r\n*1\r\n*1\r\n:1\r\n",
	} {
		f.Add([]byte(seed), uint(3))
	}
	f.Fuzz(func(t *testing.T, in []byte, cut uint) {
		whole := NewValidator(fuzzLimits)
		wholeErr := whole.Feed(in)
		split := NewValidator(fuzzLimits)
		at := int(cut % uint(len(in)+1))
		splitErr := split.Feed(in[:at])
		if splitErr == nil {
			splitErr = split.Feed(in[at:])
		}
		if (wholeErr == nil) != (splitErr == nil) {
			t.Fatalf("whole: %v, cut at %d: %v", wholeErr, at, splitErr)
		}
		if wholeErr != nil && !errors.Is(wholeErr, ErrProtocol) {
			t.Fatalf("Feed() = %v, not an ErrProtocol", wholeErr)
		}
		if len(whole.open) > fuzzLimits.MaxDepth {
			t.Fatalf("%d open aggregates, over the depth cap %d", len(whole.open), fuzzLimits.MaxDepth)
		}
		ref := &reference{lim: fuzzLimits, b: in}
		switch refErr := ref.parse(); {
		case errors.Is(refErr, errIncomplete):
			if wholeErr == nil && whole.Idle() {
				t.Fatalf("the validator is between replies where the reference expects more")
			}
		case refErr != nil:
			if wholeErr == nil {
				t.Fatalf("the reference refuses %q, the validator accepts it", in)
			}
		default:
			if wholeErr != nil || !whole.Idle() {
				t.Fatalf("the reference accepts %q as whole replies, the validator says %v (idle %v)", in, wholeErr, whole.Idle())
			}
		}
	})
}
