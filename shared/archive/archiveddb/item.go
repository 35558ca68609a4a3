package archiveddb

import (
	"fmt"

	dynamotypes "github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/ddbpipe/ddbpipe/shared/archive"
)

// Plain converts an item read with the dynamodb SDK (a Scan's) into the
// archive's plain values (archive.Values), as the archiver reads the same
// item from the stream. A nil item stays nil.
func Plain(item map[string]dynamotypes.AttributeValue) (archive.Item, error) {
	if item == nil {
		return nil, nil
	}
	out := make(archive.Item, len(item))
	for k, v := range item {
		p, err := plainValue(v, k)
		if err != nil {
			return nil, err
		}
		out[k] = p
	}
	return out, nil
}

func plainValue(v dynamotypes.AttributeValue, path string) (any, error) {
	var to archive.Values
	switch v := v.(type) {
	case *dynamotypes.AttributeValueMemberS:
		return to.S(v.Value), nil
	case *dynamotypes.AttributeValueMemberN:
		return to.N(v.Value), nil
	case *dynamotypes.AttributeValueMemberB:
		return to.B(append([]byte{}, v.Value...)), nil
	case *dynamotypes.AttributeValueMemberBOOL:
		return to.BOOL(v.Value), nil
	case *dynamotypes.AttributeValueMemberNULL:
		return to.NULL(), nil
	case *dynamotypes.AttributeValueMemberSS:
		return to.SS(append([]string{}, v.Value...)), nil
	case *dynamotypes.AttributeValueMemberNS:
		return to.NS(v.Value), nil
	case *dynamotypes.AttributeValueMemberBS:
		bs := make([][]byte, len(v.Value))
		for i, b := range v.Value {
			bs[i] = append([]byte{}, b...)
		}
		return to.BS(bs), nil
	case *dynamotypes.AttributeValueMemberL:
		l := make([]any, len(v.Value))
		for i, x := range v.Value {
			p, err := plainValue(x, fmt.Sprintf("%s[%d]", path, i))
			if err != nil {
				return nil, err
			}
			l[i] = p
		}
		return to.L(l), nil
	case *dynamotypes.AttributeValueMemberM:
		m := make(map[string]any, len(v.Value))
		for k, x := range v.Value {
			p, err := plainValue(x, path+"."+k)
			if err != nil {
				return nil, err
			}
			m[k] = p
		}
		return to.M(m), nil
	default:
		return nil, fmt.Errorf("%w: attribute %q holds a %T", archive.ErrUnsupportedValue, path, v)
	}
}
