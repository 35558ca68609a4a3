package archiveddb

import (
	"fmt"

	dynamotypes "github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/ddbpipe/ddbpipe/shared/archive"
)

// Plain converts an item of the dynamodb SDK (from a Scan, or converted
// from a stream image by ddbstream) into the archive's plain values (see
// archive.Item). A nil item stays nil.
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
	switch v := v.(type) {
	case *dynamotypes.AttributeValueMemberS:
		return v.Value, nil
	case *dynamotypes.AttributeValueMemberN:
		return archive.Number(v.Value), nil
	case *dynamotypes.AttributeValueMemberB:
		return append([]byte{}, v.Value...), nil
	case *dynamotypes.AttributeValueMemberBOOL:
		return v.Value, nil
	case *dynamotypes.AttributeValueMemberNULL:
		return nil, nil
	case *dynamotypes.AttributeValueMemberSS:
		return append([]string{}, v.Value...), nil
	case *dynamotypes.AttributeValueMemberNS:
		ns := make([]archive.Number, len(v.Value))
		for i, n := range v.Value {
			ns[i] = archive.Number(n)
		}
		return ns, nil
	case *dynamotypes.AttributeValueMemberBS:
		bs := make([][]byte, len(v.Value))
		for i, b := range v.Value {
			bs[i] = append([]byte{}, b...)
		}
		return bs, nil
	case *dynamotypes.AttributeValueMemberL:
		l := make([]any, len(v.Value))
		for i, x := range v.Value {
			p, err := plainValue(x, fmt.Sprintf("%s[%d]", path, i))
			if err != nil {
				return nil, err
			}
			l[i] = p
		}
		return l, nil
	case *dynamotypes.AttributeValueMemberM:
		m := make(map[string]any, len(v.Value))
		for k, x := range v.Value {
			p, err := plainValue(x, path+"."+k)
			if err != nil {
				return nil, err
			}
			m[k] = p
		}
		return m, nil
	default:
		return nil, fmt.Errorf("%w: attribute %q holds a %T", archive.ErrUnsupportedValue, path, v)
	}
}
