package objects

import (
	"fmt"
	"math"
	"strings"
)

// Range is a span of a document's bytes, [Start, End).
type Range struct{ Start, End int64 }

// Len is the number of bytes in r.
func (r Range) Len() int64 { return r.End - r.Start }

// Last is the last byte of r, as HTTP's Content-Range counts (inclusive).
func (r Range) Last() int64 { return r.End - 1 }

// RangeSpec is one byte range as a Range header names it, before the size
// of the document is known: bytes=First-Last, bytes=First- (Last < 0: to
// the end), or bytes=-Suffix (IsSuffix: the last Suffix bytes).
type RangeSpec struct {
	First, Last int64
	IsSuffix    bool
	Suffix      int64
}

// String is the spec as a Range header's value.
func (s RangeSpec) String() string {
	switch {
	case s.IsSuffix:
		return fmt.Sprintf("bytes=-%d", s.Suffix)
	case s.Last < 0:
		return fmt.Sprintf("bytes=%d-", s.First)
	}
	return fmt.Sprintf("bytes=%d-%d", s.First, s.Last)
}

// ParseRange reads a Range header's value (RFC 9110, section 14.2) for
// one range of bytes. ok is false when there is nothing to honour and the
// whole document is the answer: no header, or a range unit other than
// bytes (which RFC 9110 says a server must ignore). The refusals are
// *InvalidError:
//
//   - bad-range: the value is not bytes=first-last, bytes=first- or
//     bytes=-suffix (digits only), or its last byte is before its first;
//   - multiple-ranges: more than one range (overlapping or not); this store
//     serves one range per request. S3 answers the whole object to such a
//     request, silently; refusing says why and costs no read.
//
// A position too large for an int64 saturates: as a first byte it is past
// any document, as a last byte or a suffix it means "to the end".
func ParseRange(h string) (spec RangeSpec, ok bool, err error) {
	h = strings.TrimSpace(h)
	if h == "" {
		return RangeSpec{}, false, nil
	}
	unit, set, found := strings.Cut(h, "=")
	if !found || !isToken(unit) {
		return RangeSpec{}, false, invalid(ReasonBadRange, "Range %q: want bytes=first-last, bytes=first- or bytes=-suffix", clip(h, 64))
	}
	if !strings.EqualFold(unit, "bytes") {
		return RangeSpec{}, false, nil
	}
	var specs []RangeSpec
	for elem := range strings.SplitSeq(set, ",") {
		elem = strings.Trim(elem, " \t")
		if elem == "" {
			continue // RFC 9110's lists allow empty elements
		}
		s, err := parseRangeSpec(elem)
		if err != nil {
			return RangeSpec{}, false, err
		}
		specs = append(specs, s)
	}
	switch {
	case len(specs) == 0:
		return RangeSpec{}, false, invalid(ReasonBadRange, "Range %q names no range: want bytes=first-last, bytes=first- or bytes=-suffix", clip(h, 64))
	case len(specs) > 1:
		return RangeSpec{}, false, invalid(ReasonMultipleRanges, "Range names %d ranges; one range per request is served: ask for each in its own request", len(specs))
	}
	return specs[0], true, nil
}

func parseRangeSpec(elem string) (RangeSpec, error) {
	first, last, found := strings.Cut(elem, "-")
	bad := func(why string) error {
		return invalid(ReasonBadRange, "range %q %s: want first-last, first- or -suffix, in digits", clip(elem, 40), why)
	}
	if !found {
		return RangeSpec{}, bad("has no -")
	}
	if first == "" {
		n, ok := digits(last)
		if !ok {
			return RangeSpec{}, bad("has a suffix that is not a number")
		}
		return RangeSpec{IsSuffix: true, Suffix: n}, nil
	}
	f, ok := digits(first)
	if !ok {
		return RangeSpec{}, bad("has a first byte that is not a number")
	}
	if last == "" {
		return RangeSpec{First: f, Last: -1}, nil
	}
	l, ok := digits(last)
	if !ok {
		return RangeSpec{}, bad("has a last byte that is not a number")
	}
	if l < f {
		return RangeSpec{}, invalid(ReasonBadRange, "range %q ends (byte %d) before it starts (byte %d)", clip(elem, 40), l, f)
	}
	return RangeSpec{First: f, Last: l}, nil
}

// digits reads a non-empty run of ASCII digits, saturating at MaxInt64.
func digits(s string) (int64, bool) {
	if s == "" {
		return 0, false
	}
	var n int64
	for _, c := range []byte(s) {
		if c < '0' || c > '9' {
			return 0, false
		}
		d := int64(c - '0')
		if n > (math.MaxInt64-d)/10 {
			n = math.MaxInt64
			continue
		}
		n = n*10 + d
	}
	return n, true
}

// isToken reports whether s is an HTTP token (RFC 9110, section 5.6.2).
func isToken(s string) bool {
	if s == "" {
		return false
	}
	for _, c := range []byte(s) {
		if c <= ' ' || c >= 0x7f || strings.IndexByte(`"(),/:;<=>?@[\]{}`, c) >= 0 {
			return false
		}
	}
	return true
}

// Resolve returns the bytes of a document of size bytes that s names: a
// last byte past the end stops at the end, and a suffix longer than the
// document is the whole document. partial is false for an empty document,
// which has no byte a range can name: its answer is the whole (empty)
// document, as Go's net/http serves one. A range that starts past the end
// (or a suffix of 0 bytes) is a *InvalidError, range-not-satisfiable.
func (s RangeSpec) Resolve(size int64) (r Range, partial bool, err error) {
	if size <= 0 {
		return Range{}, false, nil
	}
	if s.IsSuffix {
		if s.Suffix == 0 {
			return Range{}, false, invalid(ReasonRangeNotSatisfiable, "bytes=-0 names no byte of the %d-byte document", size)
		}
		return Range{Start: max(0, size-s.Suffix), End: size}, true, nil
	}
	if s.First >= size {
		return Range{}, false, invalid(ReasonRangeNotSatisfiable, "the range starts at byte %d; the document has %d bytes (0 to %d)", s.First, size, size-1)
	}
	end := size
	if s.Last >= 0 && s.Last < size-1 {
		end = s.Last + 1
	}
	return Range{Start: s.First, End: end}, true, nil
}

func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return strings.ToValidUTF8(s[:n], "") + "…"
}
