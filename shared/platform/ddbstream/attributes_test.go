package ddbstream

import (
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"reflect"
	"strconv"
	"testing"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/attributevalue"
	dynamotypes "github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	streamtypes "github.com/aws/aws-sdk-go-v2/service/dynamodbstreams/types"
)

// gen makes random but valid stream images covering every attribute kind.
type gen struct {
	r        *rand.Rand
	maxDepth int
}

var interestingNumbers = []string{
	"0", "-0", "1", "-1", "42", "3.14159", "-0.000001", "1e3", "1E+125", "-1E-130",
	"12345678901234567890.123456789", "99999999999999999999999999999999999999",
	"9.9999999999999999999999999999999999999E+125", "0.10", "+7", ".5", "5.",
}

func (g gen) str() string {
	const alphabet = "abcXYZ019 #/.é✓\u0000\"\\<>&\n"
	runes := []rune(alphabet)
	n := g.r.IntN(8)
	b := make([]rune, n)
	for i := range b {
		b[i] = runes[g.r.IntN(len(runes))]
	}
	return string(b)
}

func (g gen) bytes() []byte {
	b := make([]byte, g.r.IntN(6))
	for i := range b {
		b[i] = []byte{0x00, 0x01, 0x7f, 0x80, 0xff}[g.r.IntN(5)]
	}
	return b
}

func (g gen) number() string {
	if g.r.IntN(2) == 0 {
		return interestingNumbers[g.r.IntN(len(interestingNumbers))]
	}
	return strconv.FormatInt(g.r.Int64N(1<<62)-1<<61, 10)
}

func (g gen) value(depth int) streamtypes.AttributeValue {
	kinds := 8
	if depth < g.maxDepth {
		kinds = 10
	}
	switch g.r.IntN(kinds) {
	case 0:
		return &streamtypes.AttributeValueMemberS{Value: g.str()}
	case 1:
		return &streamtypes.AttributeValueMemberN{Value: g.number()}
	case 2:
		return &streamtypes.AttributeValueMemberB{Value: g.bytes()}
	case 3:
		return &streamtypes.AttributeValueMemberBOOL{Value: g.r.IntN(2) == 0}
	case 4:
		return &streamtypes.AttributeValueMemberNULL{Value: true}
	case 5:
		n := 1 + g.r.IntN(4)
		ss := make([]string, n)
		for i := range ss {
			ss[i] = fmt.Sprintf("%s-%d", g.str(), i)
		}
		return &streamtypes.AttributeValueMemberSS{Value: ss}
	case 6:
		n := 1 + g.r.IntN(4)
		ns := make([]string, n)
		for i := range ns {
			ns[i] = fmt.Sprintf("%d.%03d", i, g.r.IntN(1000)) // distinct integer parts
		}
		return &streamtypes.AttributeValueMemberNS{Value: ns}
	case 7:
		n := 1 + g.r.IntN(4)
		bs := make([][]byte, n)
		for i := range bs {
			bs[i] = append([]byte{byte(i)}, g.bytes()...) // distinct first bytes
		}
		return &streamtypes.AttributeValueMemberBS{Value: bs}
	case 8:
		l := make([]streamtypes.AttributeValue, g.r.IntN(4))
		for i := range l {
			l[i] = g.value(depth + 1)
		}
		return &streamtypes.AttributeValueMemberL{Value: l}
	default:
		return &streamtypes.AttributeValueMemberM{Value: g.item(depth + 1)}
	}
}

func (g gen) item(depth int) map[string]streamtypes.AttributeValue {
	m := make(map[string]streamtypes.AttributeValue)
	for i := range g.r.IntN(5) {
		m[fmt.Sprintf("%s%d", g.str(), i)] = g.value(depth)
	}
	return m
}

// nested builds an item whose attribute "a" nests depth lists and maps.
func nested(depth int) map[string]streamtypes.AttributeValue {
	var v streamtypes.AttributeValue = &streamtypes.AttributeValueMemberN{Value: "12345678901234567890.123456789"}
	for i := range depth {
		if i%2 == 0 {
			v = &streamtypes.AttributeValueMemberL{Value: []streamtypes.AttributeValue{v, &streamtypes.AttributeValueMemberB{Value: []byte{0, 0}}}}
		} else {
			v = &streamtypes.AttributeValueMemberM{Value: map[string]streamtypes.AttributeValue{"k": v}}
		}
	}
	return map[string]streamtypes.AttributeValue{"a": v}
}

// TestRoundTrips checks, over random images of every kind, that the two
// readers and Lambda's JSON carry every value unchanged: an image read from
// a stream, delivered to Lambda and read back into the dynamodb SDK's values
// is the image the SDK's own conversion gives (attributevalue's
// FromDynamoDBStreamsMap, which checks nothing):
//
//	LambdaToDynamo(StreamToLambda(x))                 == FromDynamoDBStreamsMap(x)
//	LambdaToDynamo(json round trip of StreamToLambda(x)) == FromDynamoDBStreamsMap(x)
func TestRoundTrips(t *testing.T) {
	items := map[string]map[string]streamtypes.AttributeValue{
		"nested depth 10": nested(10),
		"nested depth 32": nested(32),
		"empty item":      {},
		"all kinds": {
			"s": &streamtypes.AttributeValueMemberS{Value: ""}, "n": &streamtypes.AttributeValueMemberN{Value: "-1E-130"},
			"b": &streamtypes.AttributeValueMemberB{Value: []byte{}}, "bool": &streamtypes.AttributeValueMemberBOOL{},
			"null": &streamtypes.AttributeValueMemberNULL{Value: true}, "ss": &streamtypes.AttributeValueMemberSS{Value: []string{""}},
			"ns": &streamtypes.AttributeValueMemberNS{Value: []string{"1", "2"}}, "bs": &streamtypes.AttributeValueMemberBS{Value: [][]byte{{}, {0}}},
			"l": &streamtypes.AttributeValueMemberL{}, "m": &streamtypes.AttributeValueMemberM{},
		},
	}
	g := gen{r: rand.New(rand.NewPCG(7, 11)), maxDepth: 10}
	for i := range 500 {
		items[fmt.Sprintf("random %d", i)] = g.item(0)
	}
	for name, x := range items {
		t.Run(name, func(t *testing.T) {
			want, err := attributevalue.FromDynamoDBStreamsMap(x)
			if err != nil {
				t.Fatalf("FromDynamoDBStreamsMap: %v", err)
			}
			s2l, err := StreamToLambda(x)
			if err != nil {
				t.Fatalf("StreamToLambda: %v", err)
			}
			l2d, err := LambdaToDynamo(s2l)
			if err != nil {
				t.Fatalf("LambdaToDynamo: %v", err)
			}
			if !reflect.DeepEqual(l2d, want) {
				t.Errorf("LambdaToDynamo(StreamToLambda(x)) = %v, want %v", l2d, want)
			}

			wire, err := json.Marshal(s2l)
			if err != nil {
				t.Fatalf("marshal Lambda image: %v", err)
			}
			assertNoJSONNull(t, wire)
			var fromJSON map[string]events.DynamoDBAttributeValue
			if err := json.Unmarshal(wire, &fromJSON); err != nil {
				t.Fatalf("unmarshal Lambda image %s: %v", wire, err)
			}
			j2d, err := LambdaToDynamo(fromJSON)
			if err != nil {
				t.Fatalf("LambdaToDynamo after JSON: %v", err)
			}
			if !reflect.DeepEqual(j2d, want) {
				t.Errorf("after Lambda JSON %s\n got %v\nwant %v", wire, j2d, want)
			}
		})
	}
}

// assertNoJSONNull fails if an attribute value marshalled with a null inside:
// AWS sends [], {} and "" for empty lists, maps and binaries.
func assertNoJSONNull(tb testing.TB, b []byte) {
	tb.Helper()
	var walk func(v any) bool
	walk = func(v any) bool {
		switch v := v.(type) {
		case nil:
			return false
		case map[string]any:
			for _, e := range v {
				if !walk(e) {
					return false
				}
			}
		case []any:
			for _, e := range v {
				if !walk(e) {
					return false
				}
			}
		}
		return true
	}
	if !walk(decodeJSON(tb, b)) {
		tb.Errorf("JSON has a null: %s", b)
	}
}

func TestEmptyValuesMarshalLikeAWS(t *testing.T) {
	tests := []struct {
		name string
		in   streamtypes.AttributeValue
		want string
	}{
		{"nil list", &streamtypes.AttributeValueMemberL{}, `{"v":{"L":[]}}`},
		{"nil map", &streamtypes.AttributeValueMemberM{}, `{"v":{"M":{}}}`},
		{"nil binary", &streamtypes.AttributeValueMemberB{}, `{"v":{"B":""}}`},
		{"binary with zero bytes", &streamtypes.AttributeValueMemberB{Value: []byte{0, 0xff, 0}}, `{"v":{"B":"AP8A"}}`},
		{"empty string", &streamtypes.AttributeValueMemberS{}, `{"v":{"S":""}}`},
		{"null", &streamtypes.AttributeValueMemberNULL{Value: true}, `{"v":{"NULL":true}}`},
		{"number text kept", &streamtypes.AttributeValueMemberN{Value: "1.50E+3"}, `{"v":{"N":"1.50E+3"}}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			l, err := StreamToLambda(map[string]streamtypes.AttributeValue{"v": tt.in})
			if err != nil {
				t.Fatal(err)
			}
			assertJSONEqual(t, tt.name, mustMarshal(t, l), []byte(tt.want))
		})
	}
}

func TestNilImageStaysNil(t *testing.T) {
	if got, err := StreamToLambda(nil); got != nil || err != nil {
		t.Errorf("StreamToLambda(nil) = %v, %v, want nil, nil", got, err)
	}
	if got, err := LambdaToDynamo(nil); got != nil || err != nil {
		t.Errorf("LambdaToDynamo(nil) = %v, %v, want nil, nil", got, err)
	}
}

func TestConversionsCopy(t *testing.T) {
	b := []byte{1, 2, 3}
	l, err := StreamToLambda(map[string]streamtypes.AttributeValue{"b": &streamtypes.AttributeValueMemberB{Value: b}})
	if err != nil {
		t.Fatal(err)
	}
	b[0] = 9
	if got := l["b"].Binary()[0]; got != 1 {
		t.Errorf("Lambda value changed with its source: got %d, want 1", got)
	}

	ss, bs := []string{"x"}, [][]byte{{1}}
	image := map[string]events.DynamoDBAttributeValue{
		"b": events.NewBinaryAttribute(b), "ss": events.NewStringSetAttribute(ss), "bs": events.NewBinarySetAttribute(bs),
	}
	d, err := LambdaToDynamo(image)
	if err != nil {
		t.Fatal(err)
	}
	b[0], ss[0], bs[0][0] = 7, "y", 7
	if got := d["b"].(*dynamotypes.AttributeValueMemberB).Value[0]; got != 9 {
		t.Errorf("binary changed with its source: got %d, want 9", got)
	}
	if got := d["ss"].(*dynamotypes.AttributeValueMemberSS).Value[0]; got != "x" {
		t.Errorf("string set changed with its source: got %q, want x", got)
	}
	if got := d["bs"].(*dynamotypes.AttributeValueMemberBS).Value[0][0]; got != 1 {
		t.Errorf("binary set changed with its source: got %d, want 1", got)
	}
}

func TestStreamConversionErrors(t *testing.T) {
	tests := []struct {
		name string
		in   streamtypes.AttributeValue
		path string
		want error
	}{
		{"empty string set", &streamtypes.AttributeValueMemberSS{}, "v", ErrEmptySet},
		{"empty number set", &streamtypes.AttributeValueMemberNS{Value: []string{}}, "v", ErrEmptySet},
		{"empty binary set", &streamtypes.AttributeValueMemberBS{}, "v", ErrEmptySet},
		{"duplicate string", &streamtypes.AttributeValueMemberSS{Value: []string{"a", "a"}}, "v", ErrDuplicateInSet},
		{"numerically equal numbers", &streamtypes.AttributeValueMemberNS{Value: []string{"1.5", "15E-1"}}, "v", ErrDuplicateInSet},
		{"duplicate binary", &streamtypes.AttributeValueMemberBS{Value: [][]byte{{0}, {0}}}, "v", ErrDuplicateInSet},
		{"bad number", &streamtypes.AttributeValueMemberN{Value: "12a"}, "v", ErrInvalidNumber},
		{"bad number in set", &streamtypes.AttributeValueMemberNS{Value: []string{"1", "NaN"}}, "v", ErrInvalidNumber},
		{"NULL false", &streamtypes.AttributeValueMemberNULL{}, "v", ErrInvalidNull},
		{"string not UTF-8", &streamtypes.AttributeValueMemberS{Value: "a\xffb"}, "v", ErrInvalidString},
		{"string set member not UTF-8", &streamtypes.AttributeValueMemberSS{Value: []string{"a", "\xc3"}}, "v", ErrInvalidString},
		{"attribute name not UTF-8", &streamtypes.AttributeValueMemberM{Value: map[string]streamtypes.AttributeValue{
			"\xff": &streamtypes.AttributeValueMemberS{}}}, "v.\xff", ErrInvalidString},
		{"nil value", nil, "v", ErrUnsupportedType},
		{"unknown member", &streamtypes.UnknownUnionMember{Tag: "VECTOR"}, "v", ErrUnsupportedType},
		{"error deep in a map", &streamtypes.AttributeValueMemberM{Value: map[string]streamtypes.AttributeValue{
			"x": &streamtypes.AttributeValueMemberL{Value: []streamtypes.AttributeValue{
				&streamtypes.AttributeValueMemberS{}, &streamtypes.AttributeValueMemberSS{}}}}}, "v.x[1]", ErrEmptySet},
		{"nested 40 deep", nested(40)["a"], "v" + nestedPath(32), ErrTooDeep},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := StreamToLambda(map[string]streamtypes.AttributeValue{"v": tt.in})
			assertAttributeError(t, "StreamToLambda", err, tt.path, tt.want)
		})
	}
}

// nestedPath is the path, below nested(40)'s "a", of the container n levels
// inside the outermost one.
func nestedPath(n int) string {
	p := ""
	for i := 40 - 1; i >= 40-n; i-- {
		if i%2 == 0 {
			p += "[0]"
		} else {
			p += ".k"
		}
	}
	return p
}

func assertAttributeError(tb testing.TB, fn string, err error, path string, want error) {
	tb.Helper()
	if !errors.Is(err, want) {
		tb.Errorf("%s error = %v, want one wrapping %v", fn, err, want)
		return
	}
	var ae *AttributeError
	if !errors.As(err, &ae) {
		tb.Errorf("%s error %T, want *AttributeError", fn, err)
		return
	}
	if got := ae.Path; got != path {
		tb.Errorf("%s error path = %q, want %q", fn, got, path)
	}
}

func TestLambdaConversionErrors(t *testing.T) {
	tests := []struct {
		name string
		in   events.DynamoDBAttributeValue
		path string
		want error
	}{
		{"empty string set", events.NewStringSetAttribute(nil), "v", ErrEmptySet},
		{"empty number set", events.NewNumberSetAttribute([]string{}), "v", ErrEmptySet},
		{"empty binary set", events.NewBinarySetAttribute(nil), "v", ErrEmptySet},
		{"duplicate string", events.NewStringSetAttribute([]string{"x", "x"}), "v", ErrDuplicateInSet},
		{"duplicate binary", events.NewBinarySetAttribute([][]byte{{1}, {1}}), "v", ErrDuplicateInSet},
		{"bad number", events.NewNumberAttribute("1,5"), "v", ErrInvalidNumber},
		{"zero value", events.DynamoDBAttributeValue{}, "v", ErrUnsupportedType},
		{"zero value in a list", events.NewListAttribute([]events.DynamoDBAttributeValue{{}}), "v[0]", ErrUnsupportedType},
		{"numerically equal numbers", events.NewNumberSetAttribute([]string{"1.50", "+15E-1"}), "v", ErrDuplicateInSet},
		{"39 digits", events.NewNumberAttribute("123456789012345678901234567890123456789"), "v", ErrInvalidNumber},
		{"too large", events.NewNumberAttribute("1E126"), "v", ErrInvalidNumber},
		{"bad number in a set", events.NewNumberSetAttribute([]string{"1", "Infinity"}), "v", ErrInvalidNumber},
		{"string not UTF-8", events.NewStringAttribute("\xed\xa0\x80"), "v", ErrInvalidString},
		{"string set member not UTF-8", events.NewStringSetAttribute([]string{"\xff"}), "v", ErrInvalidString},
		{"attribute name not UTF-8", events.NewMapAttribute(map[string]events.DynamoDBAttributeValue{
			"ok": events.NewListAttribute([]events.DynamoDBAttributeValue{events.NewMapAttribute(map[string]events.DynamoDBAttributeValue{
				"\xfe": events.NewNullAttribute()})})}), "v.ok[0].\xfe", ErrInvalidString},
		{"nested 40 deep", lambdaNested(t, 40), "v" + nestedPath(32), ErrTooDeep},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := LambdaToDynamo(map[string]events.DynamoDBAttributeValue{"v": tt.in})
			assertAttributeError(t, "LambdaToDynamo", err, tt.path, tt.want)
		})
	}
}

// lambdaNested is nested(depth)'s "a" as Lambda's JSON delivers it.
func lambdaNested(tb testing.TB, depth int) events.DynamoDBAttributeValue {
	tb.Helper()
	j := `{"N":"12345678901234567890.123456789"}`
	for i := range depth {
		if i%2 == 0 {
			j = `{"L":[` + j + `,{"B":"AAA="}]}`
		} else {
			j = `{"M":{"k":` + j + `}}`
		}
	}
	var v events.DynamoDBAttributeValue
	if err := json.Unmarshal([]byte(j), &v); err != nil {
		tb.Fatal(err)
	}
	return v
}

func TestCanonicalNumber(t *testing.T) {
	tests := []struct {
		name string
		in   string
		want string // "" for invalid
	}{
		{"integer", "42", "4.2E1"},
		{"negative", "-42", "-4.2E1"},
		{"plus sign", "+42", "4.2E1"},
		{"trailing zeros", "42.000", "4.2E1"},
		{"leading zeros", "0042", "4.2E1"},
		{"exponent", "4.2e1", "4.2E1"},
		{"negative exponent", "420E-1", "4.2E1"},
		{"leading dot", ".5", "5.E-1"},
		{"trailing dot", "5.", "5.E0"},
		{"zero", "0", "0"},
		{"negative zero", "-0.000", "0"},
		{"zero with exponent", "0E999999", "0"},
		{"big", "12345678901234567890.123456789", "1.2345678901234567890123456789E19"},
		{"38 digits", "12345678901234567890123456789012345678", "1.2345678901234567890123456789012345678E37"},
		{"largest", "9.9999999999999999999999999999999999999E+125", "9.9999999999999999999999999999999999999E125"},
		{"smallest", "1E-130", "1.E-130"},
		{"39 digits", "123456789012345678901234567890123456789", ""},
		{"too large", "1E126", ""},
		{"too small", "1E-131", ""},
		{"empty", "", ""},
		{"sign only", "-", ""},
		{"dot only", ".", ""},
		{"two dots", "1.2.3", ""},
		{"two signs", "--1", ""},
		{"space", " 1", ""},
		{"hex", "0x10", ""},
		{"infinity", "Infinity", ""},
		{"NaN", "NaN", ""},
		{"empty exponent", "1e", ""},
		{"exponent sign twice", "1e+-2", ""},
		{"huge exponent", "1e9999999", ""},
		{"comma", "1,5", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := canonicalNumber(tt.in)
			if tt.want == "" {
				if err == nil || !errors.Is(err, ErrInvalidNumber) {
					t.Errorf("canonicalNumber(%q) = %q, %v, want ErrInvalidNumber", tt.in, got, err)
				}
				return
			}
			if err != nil || got != tt.want {
				t.Errorf("canonicalNumber(%q) = %q, %v, want %q", tt.in, got, err, tt.want)
			}
		})
	}
}
