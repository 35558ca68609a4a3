package archive

import (
	"bytes"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
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
//	S              string            {"S":"text"}
//	N              Number            {"N":"12.5"}: the decimal text, exactly as stored
//	B              []byte            {"B":"base64"}: standard base64, with padding
//	BOOL           bool              {"BOOL":true}
//	NULL           nil               {"NULL":true}
//	SS             []string          {"SS":["a","b"]}: sorted
//	NS             []Number          {"NS":["1","10"]}: sorted by numeric value
//	BS             [][]byte          {"BS":["base64",…]}: sorted by bytes
//	L              []any             {"L":[…]}: in order
//	M              map[string]any    {"M":{…}}: keys sorted
//
// The JSON is DynamoDB's own type-tagged JSON (the format of the low-level
// API and of a table export), so it is lossless: an image read back with
// ParseImage is the image written, a number set still a number set, a
// 38-digit number still exact. Numbers are JSON strings, as DynamoDB sends
// them, so no SQL engine rounds them through a double. Set members are
// sorted because DynamoDB sets have no order: the same set read from a
// stream and from a Scan then gives the same JSON and checksum.
//
// In SQL: json_extract_scalar(extra, '$.votes.N') in Athena,
// extra->>'$.votes.N' in DuckDB (cast as needed).
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

// Values makes an Item's attribute values (see Item), one method per
// DynamoDB type; it keeps the slices and maps it is given. It is
// the one mapping from DynamoDB's types to an Item's values: the archiver
// reads a stream image with it (ddbstream.FromLambda, in archivelambda) and
// the rotator a scanned item (archiveddb.Plain), so that both sides of the
// verification read an item alike.
type Values struct{}

func (Values) S(s string) any         { return s }
func (Values) N(text string) any      { return Number(text) }
func (Values) B(b []byte) any         { return b }
func (Values) BOOL(b bool) any        { return b }
func (Values) NULL() any              { return nil }
func (Values) SS(ss []string) any     { return ss }
func (Values) BS(bs [][]byte) any     { return bs }
func (Values) L(l []any) any          { return l }
func (Values) M(m map[string]any) any { return m }
func (Values) NS(texts []string) any {
	ns := make([]Number, len(texts))
	for i, t := range texts {
		ns[i] = Number(t)
	}
	return ns
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
	tag := func(t string) { b.WriteString(`{"` + t + `":`) }
	switch v := v.(type) {
	case nil:
		b.WriteString(`{"NULL":true}`)
		return nil
	case string:
		tag("S")
		appendString(b, v)
	case Number:
		if err := v.Validate(); err != nil {
			return fmt.Errorf("%s: %w", pathName(path), err)
		}
		tag("N")
		appendString(b, string(v))
	case []byte:
		tag("B")
		appendBase64(b, v)
	case bool:
		tag("BOOL")
		if v {
			b.WriteString("true")
		} else {
			b.WriteString("false")
		}
	case []string:
		ss := slices.Clone(v)
		sort.Strings(ss)
		tag("SS")
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
		tag("NS")
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
		tag("BS")
		b.WriteByte('[')
		for i, x := range bs {
			if i > 0 {
				b.WriteByte(',')
			}
			appendBase64(b, x)
		}
		b.WriteByte(']')
	case []any:
		tag("L")
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
		tag("M")
		if err := encodeMap(b, v, path, depth); err != nil {
			return err
		}
	case Item:
		tag("M")
		if err := encodeMap(b, v, path, depth); err != nil {
			return err
		}
	default:
		return fmt.Errorf("%w: %s holds a %T", ErrUnsupportedValue, pathName(path), v)
	}
	b.WriteByte('}')
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

// ParseImage decodes an image encoded by ImageJSON; "" gives a nil image.
// ImageJSON(ParseImage(s)) == s for every s ImageJSON wrote.
func ParseImage(s string) (Item, error) {
	if s == "" {
		return nil, nil
	}
	var raw map[string]json.RawMessage
	if err := json.Unmarshal([]byte(s), &raw); err != nil {
		return nil, fmt.Errorf("%w: image JSON: %v", ErrUnsupportedValue, err)
	}
	img := make(Item, len(raw))
	for name, r := range raw {
		v, err := parseValue(r, 0)
		if err != nil {
			return nil, fmt.Errorf("attribute %q: %w", name, err)
		}
		img[name] = v
	}
	return img, nil
}

func parseValue(r json.RawMessage, depth int) (any, error) {
	if depth > maxDepth {
		return nil, fmt.Errorf("%w: nested deeper than %d levels", ErrUnsupportedValue, maxDepth)
	}
	var tagged map[string]json.RawMessage
	if err := json.Unmarshal(r, &tagged); err != nil || len(tagged) != 1 {
		return nil, fmt.Errorf("%w: %.40s is not a type-tagged value", ErrUnsupportedValue, r)
	}
	for t, body := range tagged {
		bad := func(err error) (any, error) {
			return nil, fmt.Errorf("%w: %s value %.40s: %v", ErrUnsupportedValue, t, body, err)
		}
		switch t {
		case "S":
			var s string
			if err := json.Unmarshal(body, &s); err != nil {
				return bad(err)
			}
			return s, nil
		case "N":
			var s string
			if err := json.Unmarshal(body, &s); err != nil {
				return bad(err)
			}
			return Number(s), nil
		case "B":
			var b []byte // encoding/json decodes standard base64
			if err := json.Unmarshal(body, &b); err != nil {
				return bad(err)
			}
			if b == nil {
				b = []byte{}
			}
			return b, nil
		case "BOOL":
			var v bool
			if err := json.Unmarshal(body, &v); err != nil {
				return bad(err)
			}
			return v, nil
		case "NULL":
			return nil, nil
		case "SS":
			var ss []string
			if err := json.Unmarshal(body, &ss); err != nil {
				return bad(err)
			}
			return nonNil(ss), nil
		case "NS":
			var ss []string
			if err := json.Unmarshal(body, &ss); err != nil {
				return bad(err)
			}
			ns := make([]Number, len(ss))
			for i, s := range ss {
				ns[i] = Number(s)
			}
			return ns, nil
		case "BS":
			var bs [][]byte
			if err := json.Unmarshal(body, &bs); err != nil {
				return bad(err)
			}
			return nonNil(bs), nil
		case "L":
			var items []json.RawMessage
			if err := json.Unmarshal(body, &items); err != nil {
				return bad(err)
			}
			l := make([]any, len(items))
			for i, it := range items {
				v, err := parseValue(it, depth+1)
				if err != nil {
					return nil, fmt.Errorf("[%d]: %w", i, err)
				}
				l[i] = v
			}
			return l, nil
		case "M":
			var m map[string]json.RawMessage
			if err := json.Unmarshal(body, &m); err != nil {
				return bad(err)
			}
			out := make(map[string]any, len(m))
			for k, it := range m {
				v, err := parseValue(it, depth+1)
				if err != nil {
					return nil, fmt.Errorf("%s: %w", k, err)
				}
				out[k] = v
			}
			return out, nil
		default:
			return nil, fmt.Errorf("%w: unknown type tag %q", ErrUnsupportedValue, t)
		}
	}
	panic("unreachable")
}

func nonNil[T any](s []T) []T {
	if s == nil {
		return []T{}
	}
	return s
}
