package ddbstream

import (
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/aws/aws-lambda-go/events"
	dynamotypes "github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	streamtypes "github.com/aws/aws-sdk-go-v2/service/dynamodbstreams/types"
)

// maxDepth is DynamoDB's limit on nested lists and maps.
const maxDepth = 32

// StreamToLambda converts an item image read with the dynamodbstreams SDK
// (Keys, NewImage or OldImage) into aws-lambda-go's attribute values, whose
// JSON is the image Lambda receives. Numbers keep their exact strings. A nil
// map gives nil (an absent image); nested empty lists and maps stay empty,
// never nil, so they marshal as [] and {} rather than null.
//
// It fails, with an *AttributeError, on values DynamoDB never stores: empty or
// duplicate sets, malformed numbers, NULL false, nesting deeper than 32, nil
// values and union members the SDK does not know.
func StreamToLambda(m map[string]streamtypes.AttributeValue) (map[string]events.DynamoDBAttributeValue, error) {
	return convertMap(m, "", 0, streamToLambda)
}

// LambdaToDynamo converts an image from a Lambda DynamoDB event into the
// dynamodb SDK's attribute values, to write it back with PutItem and friends
// (aws-lambda-go issue #58). It fails as StreamToLambda does, and also on the
// zero events.DynamoDBAttributeValue, which holds no value.
func LambdaToDynamo(m map[string]events.DynamoDBAttributeValue) (map[string]dynamotypes.AttributeValue, error) {
	return convertMap(m, "", 0, lambdaToDynamo)
}

// DynamoToLambda converts an item read with the dynamodb SDK into
// aws-lambda-go's attribute values: the reverse of LambdaToDynamo.
func DynamoToLambda(m map[string]dynamotypes.AttributeValue) (map[string]events.DynamoDBAttributeValue, error) {
	return convertMap(m, "", 0, dynamoToLambda)
}

// StreamToDynamo converts an image read with the dynamodbstreams SDK into
// the dynamodb SDK's attribute values: the two packages declare identical but
// distinct types.
func StreamToDynamo(m map[string]streamtypes.AttributeValue) (map[string]dynamotypes.AttributeValue, error) {
	return convertMap(m, "", 0, streamToDynamo)
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
		return events.NewStringAttribute(v.Value), nil
	case *streamtypes.AttributeValueMemberN:
		if err := checkNumber(v.Value, path); err != nil {
			return none, err
		}
		return events.NewNumberAttribute(v.Value), nil
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

func streamToDynamo(v streamtypes.AttributeValue, path string, depth int) (dynamotypes.AttributeValue, error) {
	switch v := v.(type) {
	case *streamtypes.AttributeValueMemberS:
		return &dynamotypes.AttributeValueMemberS{Value: v.Value}, nil
	case *streamtypes.AttributeValueMemberN:
		if err := checkNumber(v.Value, path); err != nil {
			return nil, err
		}
		return &dynamotypes.AttributeValueMemberN{Value: v.Value}, nil
	case *streamtypes.AttributeValueMemberB:
		return &dynamotypes.AttributeValueMemberB{Value: cloneBytes(v.Value)}, nil
	case *streamtypes.AttributeValueMemberBOOL:
		return &dynamotypes.AttributeValueMemberBOOL{Value: v.Value}, nil
	case *streamtypes.AttributeValueMemberNULL:
		if !v.Value {
			return nil, attrErr(path, ErrInvalidNull, "")
		}
		return &dynamotypes.AttributeValueMemberNULL{Value: true}, nil
	case *streamtypes.AttributeValueMemberSS:
		ss, err := stringSet(v.Value, path)
		return &dynamotypes.AttributeValueMemberSS{Value: ss}, err
	case *streamtypes.AttributeValueMemberNS:
		ns, err := numberSet(v.Value, path)
		return &dynamotypes.AttributeValueMemberNS{Value: ns}, err
	case *streamtypes.AttributeValueMemberBS:
		bs, err := binarySet(v.Value, path)
		return &dynamotypes.AttributeValueMemberBS{Value: bs}, err
	case *streamtypes.AttributeValueMemberL:
		l, err := convertList(v.Value, path, depth, streamToDynamo)
		return &dynamotypes.AttributeValueMemberL{Value: l}, err
	case *streamtypes.AttributeValueMemberM:
		m, err := convertMap(v.Value, path, depth, streamToDynamo)
		return &dynamotypes.AttributeValueMemberM{Value: m}, err
	case *streamtypes.UnknownUnionMember:
		return nil, attrErr(path, ErrUnsupportedType, "unknown member "+v.Tag)
	default:
		return nil, attrErr(path, ErrUnsupportedType, fmt.Sprintf("%T", v))
	}
}

func dynamoToLambda(v dynamotypes.AttributeValue, path string, depth int) (events.DynamoDBAttributeValue, error) {
	var none events.DynamoDBAttributeValue
	switch v := v.(type) {
	case *dynamotypes.AttributeValueMemberS:
		return events.NewStringAttribute(v.Value), nil
	case *dynamotypes.AttributeValueMemberN:
		if err := checkNumber(v.Value, path); err != nil {
			return none, err
		}
		return events.NewNumberAttribute(v.Value), nil
	case *dynamotypes.AttributeValueMemberB:
		return events.NewBinaryAttribute(cloneBytes(v.Value)), nil
	case *dynamotypes.AttributeValueMemberBOOL:
		return events.NewBooleanAttribute(v.Value), nil
	case *dynamotypes.AttributeValueMemberNULL:
		if !v.Value {
			return none, attrErr(path, ErrInvalidNull, "")
		}
		return events.NewNullAttribute(), nil
	case *dynamotypes.AttributeValueMemberSS:
		ss, err := stringSet(v.Value, path)
		return events.NewStringSetAttribute(ss), err
	case *dynamotypes.AttributeValueMemberNS:
		ns, err := numberSet(v.Value, path)
		return events.NewNumberSetAttribute(ns), err
	case *dynamotypes.AttributeValueMemberBS:
		bs, err := binarySet(v.Value, path)
		return events.NewBinarySetAttribute(bs), err
	case *dynamotypes.AttributeValueMemberL:
		l, err := convertList(v.Value, path, depth, dynamoToLambda)
		return events.NewListAttribute(l), err
	case *dynamotypes.AttributeValueMemberM:
		m, err := convertMap(v.Value, path, depth, dynamoToLambda)
		return events.NewMapAttribute(m), err
	case *dynamotypes.UnknownUnionMember:
		return none, attrErr(path, ErrUnsupportedType, "unknown member "+v.Tag)
	default:
		return none, attrErr(path, ErrUnsupportedType, fmt.Sprintf("%T", v))
	}
}

func lambdaToDynamo(v events.DynamoDBAttributeValue, path string, depth int) (dynamotypes.AttributeValue, error) {
	// The zero DynamoDBAttributeValue claims to be Binary but holds nothing;
	// its accessors panic, so catch it before calling them.
	if v.IsNull() && v.DataType() != events.DataTypeNull {
		return nil, attrErr(path, ErrUnsupportedType, "zero events.DynamoDBAttributeValue")
	}
	switch v.DataType() {
	case events.DataTypeString:
		return &dynamotypes.AttributeValueMemberS{Value: v.String()}, nil
	case events.DataTypeNumber:
		if err := checkNumber(v.Number(), path); err != nil {
			return nil, err
		}
		return &dynamotypes.AttributeValueMemberN{Value: v.Number()}, nil
	case events.DataTypeBinary:
		return &dynamotypes.AttributeValueMemberB{Value: cloneBytes(v.Binary())}, nil
	case events.DataTypeBoolean:
		return &dynamotypes.AttributeValueMemberBOOL{Value: v.Boolean()}, nil
	case events.DataTypeNull:
		return &dynamotypes.AttributeValueMemberNULL{Value: true}, nil
	case events.DataTypeStringSet:
		ss, err := stringSet(v.StringSet(), path)
		return &dynamotypes.AttributeValueMemberSS{Value: ss}, err
	case events.DataTypeNumberSet:
		ns, err := numberSet(v.NumberSet(), path)
		return &dynamotypes.AttributeValueMemberNS{Value: ns}, err
	case events.DataTypeBinarySet:
		bs, err := binarySet(v.BinarySet(), path)
		return &dynamotypes.AttributeValueMemberBS{Value: bs}, err
	case events.DataTypeList:
		l, err := convertList(v.List(), path, depth, lambdaToDynamo)
		return &dynamotypes.AttributeValueMemberL{Value: l}, err
	case events.DataTypeMap:
		m, err := convertMap(v.Map(), path, depth, lambdaToDynamo)
		return &dynamotypes.AttributeValueMemberM{Value: m}, err
	default:
		return nil, attrErr(path, ErrUnsupportedType, fmt.Sprintf("data type %d", v.DataType()))
	}
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
