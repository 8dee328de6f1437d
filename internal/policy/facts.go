package policy

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/open-policy-agent/opa/v1/ast"
)

// Facts is what a policy's facts rule answered for one pod. It is handed
// back (pod.facts) only to the policy that computed it: another policy may
// read facts differently.
//
// The value is kept packed: the placement cache holds the facts of every
// bound pod, and as Rego terms (maps of terms, hashes, sort state) the facts
// of one Redis pod take about 1.1 KB of heap, as much as the rest of the
// cached pod; packed (70 bytes) they took about 150 bytes with this struct
// (measured when the default policy had facts). Unpacking costs about 2 µs
// per peer per request (BenchmarkFactsTerm), against the tens of
// microseconds of Rego that facts save per peer.
type Facts struct {
	policy *Policy
	packed string // "" when the policy has no facts rule or it is undefined for the pod
	claims claims // zero when the policy has no claims rule
}

// SameAs reports whether other is facts of the same policy saying the same
// (placement.SameFacts): a relabelled pod whose facts are the same needs no
// new audit.
func (f *Facts) SameAs(other any) bool {
	o, ok := other.(*Facts)
	if !ok {
		return false
	}
	if f == nil || o == nil {
		return f == o
	}
	return f.policy == o.policy && f.packed == o.packed && f.claims.same(o.claims)
}

// packFacts packs the value of the facts rule, which must be a ground
// value (a rule's result is).
func packFacts(v ast.Value) (string, error) {
	var b strings.Builder
	if err := pack(&b, v); err != nil {
		return "", fmt.Errorf("%s: %w", FactsRule, err)
	}
	return b.String(), nil
}

// term unpacks the facts for an input.
func (f *Facts) term() (*ast.Term, error) {
	t, rest, err := unpack(f.packed)
	if err == nil && rest != "" {
		err = errors.New("trailing bytes")
	}
	if err != nil {
		return nil, fmt.Errorf("unpacking facts: %w", err)
	}
	return t, nil
}

// The packed form: a tag byte, then for scalars a uvarint length and the
// text, for collections a uvarint count and the elements (object: key,
// value, key, value...). Numbers keep their exact text.
const (
	tagNull   = 'n'
	tagFalse  = 'f'
	tagTrue   = 't'
	tagNumber = 'd'
	tagString = 's'
	tagArray  = 'a'
	tagSet    = 'S'
	tagObject = 'o'
)

func pack(b *strings.Builder, v ast.Value) error {
	switch x := v.(type) {
	case ast.Null:
		b.WriteByte(tagNull)
	case ast.Boolean:
		if x {
			b.WriteByte(tagTrue)
		} else {
			b.WriteByte(tagFalse)
		}
	case ast.Number:
		packText(b, tagNumber, string(x))
	case ast.String:
		packText(b, tagString, string(x))
	case *ast.Array:
		packCount(b, tagArray, x.Len())
		for i := range x.Len() {
			if err := pack(b, x.Elem(i).Value); err != nil {
				return err
			}
		}
	case ast.Set:
		packCount(b, tagSet, x.Len())
		return x.Iter(func(t *ast.Term) error { return pack(b, t.Value) })
	case ast.Object:
		packCount(b, tagObject, x.Len())
		return x.Iter(func(k, v *ast.Term) error {
			if err := pack(b, k.Value); err != nil {
				return err
			}
			return pack(b, v.Value)
		})
	default:
		return fmt.Errorf("%v (%T) is not a ground value", v, v)
	}
	return nil
}

func packCount(b *strings.Builder, tag byte, n int) {
	b.WriteByte(tag)
	var buf [binary.MaxVarintLen64]byte
	b.Write(buf[:binary.PutUvarint(buf[:], uint64(n))])
}

func packText(b *strings.Builder, tag byte, s string) {
	packCount(b, tag, len(s))
	b.WriteString(s)
}

var errTruncated = errors.New("truncated")

// unpack reads one value from s and returns what follows it. Strings of the
// result share s's memory.
func unpack(s string) (*ast.Term, string, error) {
	if s == "" {
		return nil, "", errTruncated
	}
	tag, s := s[0], s[1:]
	switch tag {
	case tagNull:
		return ast.NullTerm(), s, nil
	case tagFalse, tagTrue:
		return ast.BooleanTerm(tag == tagTrue), s, nil
	}
	n, s, err := count(s)
	if err != nil {
		return nil, "", err
	}
	switch tag {
	case tagNumber, tagString:
		if n > uint64(len(s)) {
			return nil, "", errTruncated
		}
		text, rest := s[:n], s[n:]
		if tag == tagNumber {
			return ast.NumberTerm(json.Number(text)), rest, nil
		}
		return ast.StringTerm(text), rest, nil
	case tagArray, tagSet:
		elems, rest, err := unpackN(s, n)
		if err != nil {
			return nil, "", err
		}
		if tag == tagArray {
			return ast.ArrayTerm(elems...), rest, nil
		}
		return ast.SetTerm(elems...), rest, nil
	case tagObject:
		if n > uint64(len(s))/2 {
			return nil, "", errTruncated
		}
		items := make([][2]*ast.Term, n)
		for i := range items {
			if items[i][0], s, err = unpack(s); err != nil {
				return nil, "", err
			}
			if items[i][1], s, err = unpack(s); err != nil {
				return nil, "", err
			}
		}
		return ast.ObjectTerm(items...), s, nil
	default:
		return nil, "", fmt.Errorf("unknown tag %q", tag)
	}
}

func unpackN(s string, n uint64) ([]*ast.Term, string, error) {
	if n > uint64(len(s)) { // every element takes at least one byte
		return nil, "", errTruncated
	}
	elems := make([]*ast.Term, n)
	var err error
	for i := range elems {
		if elems[i], s, err = unpack(s); err != nil {
			return nil, "", err
		}
	}
	return elems, s, nil
}

func count(s string) (uint64, string, error) {
	n, size := binary.Uvarint([]byte(s[:min(len(s), binary.MaxVarintLen64)]))
	if size <= 0 {
		return 0, "", errTruncated
	}
	return n, s[size:], nil
}
