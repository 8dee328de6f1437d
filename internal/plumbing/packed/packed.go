// Package packed stores short strings back to back in one string, each as a
// uvarint length then its bytes. The placement cache keeps a few such
// strings for every bound pod in the cluster (its labels, its marks): one
// allocation without pointers each, which the garbage collector never scans,
// where maps and slices of strings cost a dozen heap objects.
//
// Readers never panic on a truncated or corrupt packing: they report the end.
package packed

import "encoding/binary"

// AppendString appends s to b as a uvarint length and the bytes.
func AppendString(b []byte, s string) []byte {
	return append(binary.AppendUvarint(b, uint64(len(s))), s...)
}

// AppendUvarint appends n to b as a uvarint.
func AppendUvarint(b []byte, n uint64) []byte {
	return binary.AppendUvarint(b, n)
}

// Uvarint reads a uvarint at the start of s; ok is false at the end of s or
// when s does not start with a complete uvarint.
func Uvarint(s string) (n uint64, rest string, ok bool) {
	for i, shift := 0, uint(0); i < len(s) && i < binary.MaxVarintLen64; i, shift = i+1, shift+7 {
		b := s[i]
		n |= uint64(b&0x7f) << shift
		if b < 0x80 {
			return n, s[i+1:], true
		}
	}
	return 0, "", false
}

// Next reads a string AppendString wrote at the start of s; str is a
// substring of s (no copy). ok is false at the end of s or when the packing
// is cut short.
func Next(s string) (str, rest string, ok bool) {
	n, rest, ok := Uvarint(s)
	if !ok || n > uint64(len(rest)) {
		return "", "", false
	}
	return rest[:n], rest[n:], true
}
