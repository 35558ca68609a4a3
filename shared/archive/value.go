package archive

import (
	"bytes"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"math/big"
	"slices"
	"sort"
	"strings"
	"unicode/utf8"
)

// Item is one item image (Keys, NewImage or OldImage) as plain Go values.
// Each attribute value is one of:
//
//	DynamoDB type  Go value          JSON in the archive
//	S              string            string
//	N              Number            string: the number's decimal text, exactly as stored
//	B              []byte            string: standard base64, with padding
//	BOOL           bool              true / false
//	NULL           nil               null
//	SS             []string          array of strings, sorted
//	NS             []Number          array of strings, sorted by numeric value
//	BS             [][]byte          array of base64 strings, sorted by bytes
//	L              []any             array, in order
//	M              map[string]any    object, keys sorted
//
// Numbers are JSON strings, not JSON numbers, because SQL engines parse JSON
// numbers as doubles: DuckDB reads 12345678901234567890.123456789 back as
// 12345678901234567000. As text they stay exact, and cast as needed:
// CAST(newImage->>'$.votes' AS DECIMAL(38,9)) in DuckDB,
// CAST(json_extract_scalar(newImage, '$.votes') AS DECIMAL(38,9)) in Athena.
//
// The JSON is plain, for SQL: it does not tell a binary or a number from a
// string, nor a set from a list. Set members are sorted because DynamoDB sets
// have no order: the same set read from a stream and from a Scan then gives
// the same JSON and checksum.
//
// A nil Item is an absent image (a REMOVE has no NewImage) and encodes as "";
// an empty non-nil Item encodes as "{}".
type Item map[string]any

// Number is a DynamoDB number: its decimal string, exactly as DynamoDB gave
// it ("12345678901234567890.123456789" is never rounded through float64).
type Number string

// Validate checks that n is a decimal number: an optional sign, digits with
// at most one ".", and an optional exponent ("1E+125"). DynamoDB's own limits
// (38 digits, the exponent range) are ddbstream's to check.
func (n Number) Validate() error {
	_, err := n.value()
	return err
}

// value is n as an exact rational, for sorting number sets.
func (n Number) value() (*big.Rat, error) {
	s := string(n)
	bad := func() (*big.Rat, error) {
		return nil, fmt.Errorf("%w: number %q", ErrUnsupportedValue, s)
	}
	body := strings.TrimPrefix(strings.TrimPrefix(s, "-"), "+")
	if len(s)-len(body) > 1 {
		return bad()
	}
	mantissa, exp := body, ""
	if i := strings.IndexAny(body, "eE"); i >= 0 {
		mantissa, exp = body[:i], body[i+1:]
		digits := strings.TrimPrefix(strings.TrimPrefix(exp, "+"), "-")
		if len(exp)-len(digits) > 1 || !isDigits(digits) || len(digits) > 6 {
			return bad()
		}
	}
	intPart, frac, _ := strings.Cut(mantissa, ".")
	if intPart+frac == "" || (intPart != "" && !isDigits(intPart)) || (frac != "" && !isDigits(frac)) {
		return bad()
	}
	// big.Rat wants digits on both sides of the point ("0.5", "5.0").
	norm := strings.TrimSuffix(s[:len(s)-len(body)], "+") + cmpOr(intPart, "0") + "." + cmpOr(frac, "0")
	if exp != "" {
		norm += "e" + exp
	}
	r, ok := new(big.Rat).SetString(norm)
	if !ok {
		return bad()
	}
	return r, nil
}

func cmpOr(s, def string) string {
	if s == "" {
		return def
	}
	return s
}

func isDigits(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return true
}

// ImageJSON encodes an image as the archive's JSON (see Item): compact, keys
// sorted, sets sorted, no HTML escaping. A nil image gives "".
func ImageJSON(img Item) (string, error) {
	if img == nil {
		return "", nil
	}
	var b bytes.Buffer
	if err := encodeMap(&b, img, "", 0); err != nil {
		return "", err
	}
	return b.String(), nil
}

// Checksum is the hex SHA-256 of an image's JSON: the fingerprint the
// verification compares between the archive and a Scan of the table.
func Checksum(img Item) (string, error) {
	j, err := ImageJSON(img)
	if err != nil {
		return "", err
	}
	return ChecksumJSON(j), nil
}

// ChecksumJSON is Checksum for an image already encoded by ImageJSON, as
// stored in a Row.
func ChecksumJSON(imageJSON string) string {
	sum := sha256.Sum256([]byte(imageJSON))
	return hex.EncodeToString(sum[:])
}

// KeyJSON encodes the key attributes of a full item (e.g. one from a Scan)
// exactly as a stream record's Keys encode: the item's identity in the
// verification. Every name must be present.
func KeyJSON(item Item, keyNames ...string) (string, error) {
	if len(keyNames) == 0 {
		return "", fmt.Errorf("%w: no key attribute names", ErrInvalidRecord)
	}
	keys := make(Item, len(keyNames))
	for _, k := range keyNames {
		v, ok := item[k]
		if !ok {
			return "", fmt.Errorf("%w: item has no key attribute %q", ErrInvalidRecord, k)
		}
		keys[k] = v
	}
	return ImageJSON(keys)
}

// maxDepth is DynamoDB's nesting limit; deeper values cannot come from it.
const maxDepth = 32

func encodeValue(b *bytes.Buffer, v any, path string, depth int) error {
	if depth > maxDepth {
		return fmt.Errorf("%w: %s nested deeper than %d levels", ErrUnsupportedValue, pathName(path), maxDepth)
	}
	switch v := v.(type) {
	case nil:
		b.WriteString("null")
	case string:
		appendString(b, v)
	case Number:
		if err := v.Validate(); err != nil {
			return fmt.Errorf("%s: %w", pathName(path), err)
		}
		appendString(b, string(v))
	case []byte:
		appendBase64(b, v)
	case bool:
		if v {
			b.WriteString("true")
		} else {
			b.WriteString("false")
		}
	case []string:
		ss := slices.Clone(v)
		sort.Strings(ss)
		b.WriteByte('[')
		for i, s := range ss {
			if i > 0 {
				b.WriteByte(',')
			}
			appendString(b, s)
		}
		b.WriteByte(']')
	case []Number:
		ns, err := sortNumbers(v)
		if err != nil {
			return fmt.Errorf("%s: %w", pathName(path), err)
		}
		b.WriteByte('[')
		for i, n := range ns {
			if i > 0 {
				b.WriteByte(',')
			}
			appendString(b, string(n))
		}
		b.WriteByte(']')
	case [][]byte:
		bs := slices.Clone(v)
		slices.SortFunc(bs, bytes.Compare)
		b.WriteByte('[')
		for i, x := range bs {
			if i > 0 {
				b.WriteByte(',')
			}
			appendBase64(b, x)
		}
		b.WriteByte(']')
	case []any:
		b.WriteByte('[')
		for i, x := range v {
			if i > 0 {
				b.WriteByte(',')
			}
			if err := encodeValue(b, x, fmt.Sprintf("%s[%d]", path, i), depth+1); err != nil {
				return err
			}
		}
		b.WriteByte(']')
	case map[string]any:
		return encodeMap(b, v, path, depth)
	case Item:
		return encodeMap(b, v, path, depth)
	default:
		return fmt.Errorf("%w: %s holds a %T", ErrUnsupportedValue, pathName(path), v)
	}
	return nil
}

func encodeMap(b *bytes.Buffer, m map[string]any, path string, depth int) error {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	b.WriteByte('{')
	for i, k := range keys {
		if i > 0 {
			b.WriteByte(',')
		}
		appendString(b, k)
		b.WriteByte(':')
		child := k
		if path != "" {
			child = path + "." + k
		}
		if err := encodeValue(b, m[k], child, depth+1); err != nil {
			return err
		}
	}
	b.WriteByte('}')
	return nil
}

func pathName(path string) string {
	if path == "" {
		return "image"
	}
	return fmt.Sprintf("attribute %q", path)
}

// sortNumbers returns a number set sorted by value; equal values (which a
// DynamoDB set cannot hold) keep a stable textual order.
func sortNumbers(ns []Number) ([]Number, error) {
	vals := make([]*big.Rat, len(ns))
	idx := make([]int, len(ns))
	for i, n := range ns {
		v, err := n.value()
		if err != nil {
			return nil, err
		}
		vals[i], idx[i] = v, i
	}
	slices.SortStableFunc(idx, func(a, b int) int {
		if c := vals[a].Cmp(vals[b]); c != 0 {
			return c
		}
		return strings.Compare(string(ns[a]), string(ns[b]))
	})
	out := make([]Number, len(ns))
	for i, j := range idx {
		out[i] = ns[j]
	}
	return out, nil
}

func appendBase64(b *bytes.Buffer, v []byte) {
	b.WriteByte('"')
	b.WriteString(base64.StdEncoding.EncodeToString(v))
	b.WriteByte('"')
}

const hexDigits = "0123456789abcdef"

// appendString writes s as a JSON string: quotes, backslashes and control
// characters escaped, invalid UTF-8 replaced by U+FFFD (as encoding/json
// does), everything else as is.
func appendString(b *bytes.Buffer, s string) {
	b.WriteByte('"')
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			switch {
			case c == '"' || c == '\\':
				b.WriteByte('\\')
				b.WriteByte(c)
			case c == '\n':
				b.WriteString(`\n`)
			case c == '\r':
				b.WriteString(`\r`)
			case c == '\t':
				b.WriteString(`\t`)
			case c < 0x20:
				b.WriteString(`\u00`)
				b.WriteByte(hexDigits[c>>4])
				b.WriteByte(hexDigits[c&0xf])
			default:
				b.WriteByte(c)
			}
			i++
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 {
			b.WriteString(`\ufffd`)
		} else {
			b.WriteString(s[i : i+size])
		}
		i += size
	}
	b.WriteByte('"')
}
