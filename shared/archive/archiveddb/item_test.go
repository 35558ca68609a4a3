package archiveddb_test

import (
	"errors"
	"reflect"
	"testing"

	dynamotypes "github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/ddbpipe/ddbpipe/shared/archive"
	"github.com/ddbpipe/ddbpipe/shared/archive/archiveddb"
)

func TestPlain(t *testing.T) {
	tests := []struct {
		name string
		in   map[string]dynamotypes.AttributeValue
		want archive.Item
		bad  bool
	}{
		{name: "nil", in: nil, want: nil},
		{name: "empty", in: map[string]dynamotypes.AttributeValue{}, want: archive.Item{}},
		{name: "every type", in: map[string]dynamotypes.AttributeValue{
			"s": &dynamotypes.AttributeValueMemberS{Value: "x"}, "n": &dynamotypes.AttributeValueMemberN{Value: "-0.5"},
			"b": &dynamotypes.AttributeValueMemberB{Value: []byte{1}}, "t": &dynamotypes.AttributeValueMemberBOOL{Value: true},
			"z": &dynamotypes.AttributeValueMemberNULL{Value: true}, "ss": &dynamotypes.AttributeValueMemberSS{Value: []string{"a"}},
			"ns": &dynamotypes.AttributeValueMemberNS{Value: []string{"1"}}, "bs": &dynamotypes.AttributeValueMemberBS{Value: [][]byte{{2}}},
			"l": &dynamotypes.AttributeValueMemberL{Value: []dynamotypes.AttributeValue{&dynamotypes.AttributeValueMemberS{Value: "y"}}},
			"m": &dynamotypes.AttributeValueMemberM{Value: map[string]dynamotypes.AttributeValue{"k": &dynamotypes.AttributeValueMemberN{Value: "3"}}},
		}, want: archive.Item{
			"s": "x", "n": archive.Number("-0.5"), "b": []byte{1}, "t": true, "z": nil, "ss": []string{"a"},
			"ns": []archive.Number{"1"}, "bs": [][]byte{{2}}, "l": []any{"y"}, "m": map[string]any{"k": archive.Number("3")},
		}},
		{name: "unknown member", in: map[string]dynamotypes.AttributeValue{
			"m": &dynamotypes.AttributeValueMemberM{Value: map[string]dynamotypes.AttributeValue{"u": &dynamotypes.UnknownUnionMember{Tag: "X"}}},
		}, bad: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := archiveddb.Plain(tt.in)
			if tt.bad {
				if !errors.Is(err, archive.ErrUnsupportedValue) {
					t.Fatalf("Plain err = %v, want ErrUnsupportedValue", err)
				}
				return
			}
			if err != nil || !reflect.DeepEqual(got, tt.want) {
				t.Errorf("Plain = %#v, %v; want %#v", got, err, tt.want)
			}
		})
	}
}
