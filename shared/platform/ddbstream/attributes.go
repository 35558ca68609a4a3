package ddbstream

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/aws/aws-lambda-go/events"
	dynamotypes "github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	streamtypes "github.com/aws/aws-sdk-go-v2/service/dynamodbstreams/types"
)

// maxDepth is DynamoDB's limit on nested lists and maps.
const maxDepth = 32

// Two readers check every value as DynamoDB would and refuse, with an
// *AttributeError, what DynamoDB never stores: empty or duplicate sets,
// malformed numbers, strings and attribute names that are not UTF-8, NULL
// false, nesting deeper than 32, and values of no DynamoDB type. Numbers
// keep their exact strings; binaries and sets are copied.
//
//	StreamToLambda  an image read with the dynamodbstreams SDK → Lambda's values (LambdaRecord)
//	FromLambda      an image of a Lambda event → any family's values, through a Builder:
//	                the dynamodb SDK's (LambdaToDynamo), the archive's plain values

// StreamToLambda converts an item image read with the dynamodbstreams SDK
// (Keys, NewImage or OldImage) into aws-lambda-go's attribute values, whose
// JSON is the image Lambda receives. A nil map gives nil (an absent image);
// nested empty lists and maps stay empty, never nil, so they marshal as []
// and {} rather than null.
func StreamToLambda(m map[string]streamtypes.AttributeValue) (map[string]events.DynamoDBAttributeValue, error) {
	return convertMap(m, "", 0, streamToLambda)
}

// A Builder makes one family's attribute values, one method per DynamoDB
// type, from the parts FromLambda has checked and copied: it may keep the
// slices and maps it is given, none of which is nil.
type Builder[V any] interface {
	S(s string) V
	N(text string) V // the number as DynamoDB wrote it
	B(b []byte) V
	BOOL(b bool) V
	NULL() V
	SS(ss []string) V
	NS(texts []string) V
	BS(bs [][]byte) V
	L(l []V) V
	M(m map[string]V) V
}

// FromLambda converts an image from a Lambda DynamoDB event (Keys, NewImage
// or OldImage) into the values to builds, checking it as DynamoDB would. A
// nil image gives nil (an absent image). The zero
// events.DynamoDBAttributeValue, which holds no value, is refused.
func FromLambda[V any](image map[string]events.DynamoDBAttributeValue, to Builder[V]) (map[string]V, error) {
	return convertMap(image, "", 0, lambdaReader[V]{to}.value)
}

// LambdaToDynamo converts an image from a Lambda DynamoDB event into the
// dynamodb SDK's attribute values, to write it back with PutItem or read it
// with a table's item decoder (aws-lambda-go issue #58).
func LambdaToDynamo(image map[string]events.DynamoDBAttributeValue) (map[string]dynamotypes.AttributeValue, error) {
	return FromLambda[dynamotypes.AttributeValue](image, dynamoValues{})
}

// convertMap converts every value of m. At the top level (depth 0) a nil map
// stays nil; nested maps are never nil.
func convertMap[In, Out any](m map[string]In, path string, depth int, conv func(In, string, int) (Out, error)) (map[string]Out, error) {
	if m == nil && depth == 0 {
		return nil, nil
	}
	if depth > maxDepth {
		return nil, attrErr(path, ErrTooDeep, "")
	}
	out := make(map[string]Out, len(m))
	for k, v := range m {
		child := k
		if path != "" {
			child = path + "." + k
		}
		if !utf8.ValidString(k) {
			return nil, attrErr(child, ErrInvalidString, "attribute name")
		}
		c, err := conv(v, child, depth+1)
		if err != nil {
			return nil, err
		}
		out[k] = c
	}
	return out, nil
}

func convertList[In, Out any](l []In, path string, depth int, conv func(In, string, int) (Out, error)) ([]Out, error) {
	if depth > maxDepth {
		return nil, attrErr(path, ErrTooDeep, "")
	}
	out := make([]Out, len(l))
	for i, v := range l {
		c, err := conv(v, path+"["+strconv.Itoa(i)+"]", depth+1)
		if err != nil {
			return nil, err
		}
		out[i] = c
	}
	return out, nil
}

func streamToLambda(v streamtypes.AttributeValue, path string, depth int) (events.DynamoDBAttributeValue, error) {
	var none events.DynamoDBAttributeValue
	switch v := v.(type) {
	case *streamtypes.AttributeValueMemberS:
		return events.NewStringAttribute(v.Value), checkString(v.Value, path)
	case *streamtypes.AttributeValueMemberN:
		return events.NewNumberAttribute(v.Value), checkNumber(v.Value, path)
	case *streamtypes.AttributeValueMemberB:
		return events.NewBinaryAttribute(cloneBytes(v.Value)), nil
	case *streamtypes.AttributeValueMemberBOOL:
		return events.NewBooleanAttribute(v.Value), nil
	case *streamtypes.AttributeValueMemberNULL:
		if !v.Value {
			return none, attrErr(path, ErrInvalidNull, "")
		}
		return events.NewNullAttribute(), nil
	case *streamtypes.AttributeValueMemberSS:
		ss, err := stringSet(v.Value, path)
		return events.NewStringSetAttribute(ss), err
	case *streamtypes.AttributeValueMemberNS:
		ns, err := numberSet(v.Value, path)
		return events.NewNumberSetAttribute(ns), err
	case *streamtypes.AttributeValueMemberBS:
		bs, err := binarySet(v.Value, path)
		return events.NewBinarySetAttribute(bs), err
	case *streamtypes.AttributeValueMemberL:
		l, err := convertList(v.Value, path, depth, streamToLambda)
		return events.NewListAttribute(l), err
	case *streamtypes.AttributeValueMemberM:
		m, err := convertMap(v.Value, path, depth, streamToLambda)
		return events.NewMapAttribute(m), err
	case *streamtypes.UnknownUnionMember:
		return none, attrErr(path, ErrUnsupportedType, "unknown member "+v.Tag)
	default:
		return none, attrErr(path, ErrUnsupportedType, fmt.Sprintf("%T", v))
	}
}

// lambdaReader reads a Lambda image's values into its Builder's.
type lambdaReader[V any] struct{ to Builder[V] }

func (r lambdaReader[V]) value(v events.DynamoDBAttributeValue, path string, depth int) (V, error) {
	var none V
	// The zero DynamoDBAttributeValue claims to be Binary but holds nothing;
	// its accessors panic, so catch it before calling them.
	if v.IsNull() && v.DataType() != events.DataTypeNull {
		return none, attrErr(path, ErrUnsupportedType, "zero events.DynamoDBAttributeValue")
	}
	switch v.DataType() {
	case events.DataTypeString:
		return build(r.to.S, v.String(), checkString(v.String(), path))
	case events.DataTypeNumber:
		return build(r.to.N, v.Number(), checkNumber(v.Number(), path))
	case events.DataTypeBinary:
		return r.to.B(cloneBytes(v.Binary())), nil
	case events.DataTypeBoolean:
		return r.to.BOOL(v.Boolean()), nil
	case events.DataTypeNull:
		return r.to.NULL(), nil
	case events.DataTypeStringSet:
		ss, err := stringSet(v.StringSet(), path)
		return build(r.to.SS, ss, err)
	case events.DataTypeNumberSet:
		ns, err := numberSet(v.NumberSet(), path)
		return build(r.to.NS, ns, err)
	case events.DataTypeBinarySet:
		bs, err := binarySet(v.BinarySet(), path)
		return build(r.to.BS, bs, err)
	case events.DataTypeList:
		l, err := convertList(v.List(), path, depth, r.value)
		return build(r.to.L, l, err)
	case events.DataTypeMap:
		m, err := convertMap(v.Map(), path, depth, r.value)
		return build(r.to.M, m, err)
	default:
		return none, attrErr(path, ErrUnsupportedType, fmt.Sprintf("data type %d", v.DataType()))
	}
}

// build is to(parts), or err when the parts did not pass their checks.
func build[P, V any](to func(P) V, parts P, err error) (V, error) {
	if err != nil {
		var none V
		return none, err
	}
	return to(parts), nil
}

// dynamoValues builds the dynamodb SDK's attribute values.
type dynamoValues struct{}

func (dynamoValues) S(s string) dynamotypes.AttributeValue {
	return &dynamotypes.AttributeValueMemberS{Value: s}
}
func (dynamoValues) N(text string) dynamotypes.AttributeValue {
	return &dynamotypes.AttributeValueMemberN{Value: text}
}
func (dynamoValues) B(b []byte) dynamotypes.AttributeValue {
	return &dynamotypes.AttributeValueMemberB{Value: b}
}
func (dynamoValues) BOOL(b bool) dynamotypes.AttributeValue {
	return &dynamotypes.AttributeValueMemberBOOL{Value: b}
}
func (dynamoValues) NULL() dynamotypes.AttributeValue {
	return &dynamotypes.AttributeValueMemberNULL{Value: true}
}
func (dynamoValues) SS(ss []string) dynamotypes.AttributeValue {
	return &dynamotypes.AttributeValueMemberSS{Value: ss}
}
func (dynamoValues) NS(texts []string) dynamotypes.AttributeValue {
	return &dynamotypes.AttributeValueMemberNS{Value: texts}
}
func (dynamoValues) BS(bs [][]byte) dynamotypes.AttributeValue {
	return &dynamotypes.AttributeValueMemberBS{Value: bs}
}
func (dynamoValues) L(l []dynamotypes.AttributeValue) dynamotypes.AttributeValue {
	return &dynamotypes.AttributeValueMemberL{Value: l}
}
func (dynamoValues) M(m map[string]dynamotypes.AttributeValue) dynamotypes.AttributeValue {
	return &dynamotypes.AttributeValueMemberM{Value: m}
}

func checkString(s, path string) error {
	if !utf8.ValidString(s) {
		return attrErr(path, ErrInvalidString, "")
	}
	return nil
}

func checkNumber(s, path string) error {
	if _, err := canonicalNumber(s); err != nil {
		return attrErr(path, err, "")
	}
	return nil
}

// stringSet checks a string set and copies it (never nil).
func stringSet(ss []string, path string) ([]string, error) {
	if len(ss) == 0 {
		return nil, attrErr(path, ErrEmptySet, "string set")
	}
	seen := make(map[string]struct{}, len(ss))
	for _, s := range ss {
		if err := checkString(s, path); err != nil {
			return nil, err
		}
		if _, dup := seen[s]; dup {
			return nil, attrErr(path, ErrDuplicateInSet, fmt.Sprintf("string %q", s))
		}
		seen[s] = struct{}{}
	}
	return append([]string{}, ss...), nil
}

// numberSet checks a number set (numerically equal members are duplicates)
// and copies it, keeping each number's string.
func numberSet(ns []string, path string) ([]string, error) {
	if len(ns) == 0 {
		return nil, attrErr(path, ErrEmptySet, "number set")
	}
	seen := make(map[string]struct{}, len(ns))
	for _, n := range ns {
		c, err := canonicalNumber(n)
		if err != nil {
			return nil, attrErr(path, err, "")
		}
		if _, dup := seen[c]; dup {
			return nil, attrErr(path, ErrDuplicateInSet, fmt.Sprintf("number %q", n))
		}
		seen[c] = struct{}{}
	}
	return append([]string{}, ns...), nil
}

// binarySet checks a binary set and deep-copies it.
func binarySet(bs [][]byte, path string) ([][]byte, error) {
	if len(bs) == 0 {
		return nil, attrErr(path, ErrEmptySet, "binary set")
	}
	seen := make(map[string]struct{}, len(bs))
	out := make([][]byte, len(bs))
	for i, b := range bs {
		if _, dup := seen[string(b)]; dup {
			return nil, attrErr(path, ErrDuplicateInSet, fmt.Sprintf("binary value %d", i))
		}
		seen[string(b)] = struct{}{}
		out[i] = cloneBytes(b)
	}
	return out, nil
}

// cloneBytes copies b, giving an empty non-nil slice for nil so that an
// empty binary marshals as "" rather than null.
func cloneBytes(b []byte) []byte { return append([]byte{}, b...) }

// AttributeError reports the attribute, as a path like "a.b[2]", whose value
// could not be converted. Err is one of the package's sentinel errors,
// possibly wrapped with detail.
type AttributeError struct {
	Path string
	Err  error
}

func (e *AttributeError) Error() string {
	return fmt.Sprintf("ddbstream: attribute %q: %s", e.Path, strings.TrimPrefix(e.Err.Error(), "ddbstream: "))
}

func (e *AttributeError) Unwrap() error { return e.Err }

func attrErr(path string, err error, detail string) error {
	var ae *AttributeError
	if errors.As(err, &ae) {
		return err
	}
	if detail != "" {
		err = fmt.Errorf("%w: %s", err, detail)
	}
	return &AttributeError{Path: path, Err: err}
}
