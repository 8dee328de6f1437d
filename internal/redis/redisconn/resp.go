// Package redisconn bounds what a Redis client reads from a server it does
// not trust. go-redis allocates a reply's buffer from the length its header
// announces, so a pod that answers `$1099511627776` kills the process with an
// out-of-memory fatal error; the connections made here check the RESP stream
// as it is read and fail the read before such a header reaches the client.
package redisconn

import (
	"errors"
	"fmt"
)

// ErrProtocol marks a reply refused for its size or its form: the
// connection is unusable afterwards.
var ErrProtocol = errors.New("refused Redis reply")

// Default limits, chosen so that what Redis really answers fits with room
// to spare while what a client allocates for one reply stays a few MiB.
const (
	// DefaultMaxBulk caps one bulk string: CLUSTER NODES of a 1,000-node
	// cluster is about 250 KiB (16,384 slots listed one by one add about
	// 100 KiB), INFO all a few KiB.
	DefaultMaxBulk = 1 << 20
	// DefaultMaxLine caps one line (a header, a simple string or error),
	// CRLF included; headers are at most 22 bytes.
	DefaultMaxLine = 64 << 10
	// DefaultMaxElements caps the elements all aggregates of one reply
	// announce together (a map's pairs count twice): go-redis allocates
	// 16 bytes per announced element before reading any of them, 1.6 MB
	// at the cap; ROLE of a master with 1,000 replicas announces about
	// 3,000, CLUSTER SHARDS of 1,000 nodes about 20,000.
	DefaultMaxElements = 100_000
	// DefaultMaxReply caps the bytes of one reply, all of its parts and
	// attributes together.
	DefaultMaxReply = 4 << 20
	// DefaultMaxDepth caps the nesting of aggregates (go-redis reads them
	// recursively); Redis's own replies nest at most 4 deep.
	DefaultMaxDepth = 32
)

// Limits bound what one connection accepts; a zero field takes its default.
type Limits struct {
	MaxBulk, MaxLine, MaxElements, MaxReply int64
	MaxDepth                                int
}

func (l Limits) withDefaults() Limits {
	orDefault := func(v *int64, d int64) {
		if *v <= 0 {
			*v = d
		}
	}
	orDefault(&l.MaxBulk, DefaultMaxBulk)
	orDefault(&l.MaxLine, DefaultMaxLine)
	orDefault(&l.MaxElements, DefaultMaxElements)
	orDefault(&l.MaxReply, DefaultMaxReply)
	if l.MaxDepth <= 0 {
		l.MaxDepth = DefaultMaxDepth
	}
	return l
}

// States of the Validator.
const (
	stType    = iota // expecting a value's type byte
	stHeader         // in the line after the type byte
	stPayload        // in a bulk string's payload
	stCR             // expecting the CR after a payload
	stLF             // expecting the LF after a payload
)

// Validator checks a stream of RESP2/RESP3 replies byte by byte, keeping a
// few integers of state, and refuses the first byte that makes a reply
// exceed its Limits or leave the protocol. Streamed RESP3 strings and
// aggregates (`$?`, `*?`) are refused: no command sent here gets one.
type Validator struct {
	lim Limits
	err error

	state    int
	typ      byte  // type byte of the current line
	lineLen  int64 // bytes of the current line so far
	lastCR   bool  // the previous byte of the line was CR
	num      int64 // the length parsed so far from a header
	digits   int
	negative bool
	payload  int64 // bulk bytes still to come

	open     []int64 // values still to come in each open aggregate
	replyLen int64   // bytes of the current reply
	elements int64   // elements announced in the current reply
}

// NewValidator checks a new stream under lim (zero fields: defaults).
func NewValidator(lim Limits) *Validator {
	return &Validator{lim: lim.withDefaults()}
}

// Feed checks the next bytes of the stream. Once it returned an error it
// returns that error for good: the stream cannot be trusted any further.
func (v *Validator) Feed(p []byte) error {
	if v.err != nil {
		return v.err
	}
	for i := 0; i < len(p); i++ {
		v.replyLen++
		if v.replyLen > v.lim.MaxReply {
			v.fail("a reply longer than %d bytes", v.lim.MaxReply)
			return v.err
		}
		switch v.state {
		case stType:
			v.startLine(p[i])
		case stHeader:
			v.headerByte(p[i])
		case stPayload:
			// Skip the rest of the payload at once, within this reply's cap.
			n := min(v.payload, int64(len(p)-i))
			v.replyLen += n - 1
			if v.replyLen > v.lim.MaxReply {
				v.fail("a reply longer than %d bytes", v.lim.MaxReply)
				return v.err
			}
			v.payload -= n
			i += int(n) - 1
			if v.payload == 0 {
				v.state = stCR
			}
		case stCR:
			if p[i] != '\r' {
				v.fail("a bulk string not followed by CRLF")
			}
			v.state = stLF
		case stLF:
			if p[i] != '\n' {
				v.fail("a bulk string not followed by CRLF")
			}
			v.valueDone()
		}
		if v.err != nil {
			return v.err
		}
	}
	return nil
}

// fail makes the stream's verdict a refusal, for good.
func (v *Validator) fail(format string, args ...any) {
	v.err = fmt.Errorf("%w: %s", ErrProtocol, fmt.Sprintf(format, args...))
}

func (v *Validator) startLine(b byte) {
	switch b {
	case '+', '-', ':', '_', ',', '#', '(', '$', '=', '!', '*', '%', '~', '>', '|':
	default:
		v.fail("%q is not a RESP type", b)
		return
	}
	v.state, v.typ, v.lineLen, v.lastCR = stHeader, b, 1, false
	v.num, v.digits, v.negative = 0, 0, false
}

// lengthType reports whether t's line is a length (of bytes or elements).
func lengthType(t byte) bool {
	switch t {
	case '$', '=', '!', '*', '%', '~', '>', '|':
		return true
	}
	return false
}

func (v *Validator) headerByte(b byte) {
	v.lineLen++
	if v.lineLen > v.lim.MaxLine {
		v.fail("a line longer than %d bytes", v.lim.MaxLine)
		return
	}
	if b == '\n' {
		if !v.lastCR {
			v.fail("a line not ended by CRLF")
			return
		}
		v.lineDone()
		return
	}
	if v.lastCR {
		v.fail("a CR inside a line")
		return
	}
	if b == '\r' {
		v.lastCR = true
		return
	}
	if !lengthType(v.typ) {
		if v.typ == '_' {
			v.fail("a null with content")
		}
		return
	}
	switch {
	case b == '-' && v.digits == 0 && !v.negative:
		v.negative = true
	case b >= '0' && b <= '9':
		v.digits++
		v.num = v.num*10 + int64(b-'0')
		// Checked at each digit, so that no announced length grows
		// past its cap, nor overflows.
		v.checkLength()
	default:
		v.fail("%q in the length of a %q reply", b, v.typ)
	}
}

// checkLength refuses a length, complete or not, over its cap.
func (v *Validator) checkLength() {
	if v.negative {
		if v.num > 1 {
			v.fail("a negative length")
		}
		return
	}
	switch v.typ {
	case '$', '=', '!':
		if v.num > v.lim.MaxBulk {
			v.fail("a %q string of more than %d bytes", v.typ, v.lim.MaxBulk)
		}
	default:
		n := v.num
		if v.typ == '%' || v.typ == '|' {
			n *= 2
		}
		if v.elements+n > v.lim.MaxElements {
			v.fail("a reply announcing more than %d elements", v.lim.MaxElements)
		}
	}
}

func (v *Validator) lineDone() {
	if !lengthType(v.typ) {
		v.valueDone()
		return
	}
	if v.digits == 0 {
		v.fail("a %q reply without a length", v.typ)
		return
	}
	if v.negative {
		// Only RESP2's null bulk string and null array are negative, and
		// only "-1": go-redis reads "$-0" as an empty string.
		if (v.typ != '$' && v.typ != '*') || v.num != 1 {
			v.fail("a negative length %q for %q", "-"+fmt.Sprint(v.num), v.typ)
			return
		}
		v.valueDone()
		return
	}
	switch v.typ {
	case '$', '=', '!':
		v.payload = v.num
		v.state = stPayload
		if v.payload == 0 {
			v.state = stCR
		}
		return
	}
	n := v.num
	if v.typ == '%' || v.typ == '|' {
		n *= 2
	}
	v.elements += n
	if v.typ == '|' {
		n++ // an attribute comes before the value it describes
	}
	if n == 0 {
		v.valueDone()
		return
	}
	if len(v.open) >= v.lim.MaxDepth {
		v.fail("aggregates nested deeper than %d", v.lim.MaxDepth)
		return
	}
	v.open = append(v.open, n)
	v.state = stType
}

// valueDone closes the values this one completes; the last closes a reply,
// whose budget then starts again.
func (v *Validator) valueDone() {
	v.state = stType
	for len(v.open) > 0 {
		top := len(v.open) - 1
		v.open[top]--
		if v.open[top] > 0 {
			return
		}
		v.open = v.open[:top]
	}
	v.replyLen, v.elements = 0, 0
}

// Idle reports whether the stream ends between replies.
func (v *Validator) Idle() bool {
	return v.err == nil && v.state == stType && len(v.open) == 0 && v.replyLen == 0
}
