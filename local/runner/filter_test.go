package runner

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	streamtypes "github.com/aws/aws-sdk-go-v2/service/dynamodbstreams/types"

	"github.com/ddbpipe/ddbpipe/shared/platform/ddbstream"
)

// objectRecord is a stream record of the objects table's item (pk, sk).
func objectRecord(seq, pk, sk string, op streamtypes.OperationType) streamtypes.Record {
	rec := record(seq, time.Now())
	rec.EventName = op
	rec.Dynamodb.Keys = map[string]streamtypes.AttributeValue{
		"pk": &streamtypes.AttributeValueMemberS{Value: pk}, "sk": &streamtypes.AttributeValueMemberS{Value: sk},
	}
	rec.Dynamodb.NewImage = map[string]streamtypes.AttributeValue{
		"pk": &streamtypes.AttributeValueMemberS{Value: pk}, "sk": &streamtypes.AttributeValueMemberS{Value: sk},
		"size": &streamtypes.AttributeValueMemberN{Value: "42"},
		"tags": &streamtypes.AttributeValueMemberSS{Value: []string{"red", "blue"}},
	}
	return rec
}

func lambdaJSON(t *testing.T, rec streamtypes.Record) []byte {
	t.Helper()
	lr, err := ddbstream.LambdaRecord(rec, "arn:aws:dynamodb:us-east-1:0:table/t/stream/s", "us-east-1")
	if err != nil {
		t.Fatal(err)
	}
	b, err := json.Marshal(lr)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

type filterCase struct {
	name     string
	patterns []string
	rec      streamtypes.Record
	want     bool
}

// filterCases are records and the patterns Lambda passes them through
// (want) or drops.
func filterCases() []filterCase {
	latest := objectRecord("1", "docs/a", "v0", streamtypes.OperationTypeModify)
	history := objectRecord("2", "docs/a", "v0000000007", streamtypes.OperationTypeInsert)
	gone := objectRecord("3", "docs/a", "v0", streamtypes.OperationTypeRemove)
	return []filterCase{
		{"no filter passes all", nil, history, true},
		{"key value", []string{`{"dynamodb": {"Keys": {"sk": {"S": ["v0"]}}}}`}, latest, true},
		{"key value, other item", []string{`{"dynamodb": {"Keys": {"sk": {"S": ["v0"]}}}}`}, history, false},
		{"any of the values", []string{`{"dynamodb": {"Keys": {"sk": {"S": ["c", "v0"]}}}}`}, latest, true},
		{"patterns are ORed", []string{`{"eventName": ["REMOVE"]}`, `{"dynamodb": {"Keys": {"sk": {"S": ["v0"]}}}}`}, gone, true},
		{"every field of a pattern", []string{`{"eventName": ["INSERT"], "dynamodb": {"Keys": {"sk": {"S": ["v0"]}}}}`}, latest, false},
		{"prefix", []string{`{"dynamodb": {"Keys": {"sk": {"S": [{"prefix": "v00"}]}}}}`}, history, true},
		{"prefix, no", []string{`{"dynamodb": {"Keys": {"pk": {"S": [{"prefix": "img/"}]}}}}`}, history, false},
		{"suffix", []string{`{"dynamodb": {"Keys": {"pk": {"S": [{"suffix": "/a"}]}}}}`}, latest, true},
		{"equals-ignore-case", []string{`{"eventName": [{"equals-ignore-case": "modify"}]}`}, latest, true},
		{"anything-but", []string{`{"eventName": [{"anything-but": ["REMOVE"]}]}`}, gone, false},
		{"anything-but, passes", []string{`{"eventName": [{"anything-but": "REMOVE"}]}`}, latest, true},
		{"exists", []string{`{"dynamodb": {"NewImage": {"size": [{"exists": true}]}}}`}, latest, true},
		{"exists false", []string{`{"dynamodb": {"NewImage": {"owner": [{"exists": false}]}}}`}, latest, true},
		{"exists false, present", []string{`{"dynamodb": {"NewImage": {"size": [{"exists": false}]}}}`}, latest, false},
		{"missing field", []string{`{"dynamodb": {"NewImage": {"owner": {"S": ["me"]}}}}`}, latest, false},
		{"array in the record: any element", []string{`{"dynamodb": {"NewImage": {"tags": {"SS": ["blue"]}}}}`}, latest, true},
		{"a number is a string in a stream record", []string{`{"dynamodb": {"NewImage": {"size": {"N": [{"numeric": [">", 1]}]}}}}`}, latest, false},
		{"numeric on a number", []string{`{"dynamodb": {"SizeBytes": [{"numeric": [">=", 10, "<", 11]}]}}`}, latest, true},
		{"object where the record has a value", []string{`{"eventName": {"S": ["MODIFY"]}}`}, latest, false},
		{"a field that one pattern compares and another enters", []string{`{"eventName": {"S": ["MODIFY"]}}`, `{"eventName": ["MODIFY"]}`}, latest, true},
		{"a field one pattern enters twice as deep as another", []string{`{"dynamodb": {"Keys": {"sk": {"S": ["x"]}}}}`, `{"dynamodb": {"NewImage": {"size": {"N": ["42"]}}}}`}, latest, true},
	}
}

// Match passes and drops what Lambda does; the stream poller, which
// matches a record without the images no pattern reads, keeps and drops
// the same records, whole.
func TestFilterMatchesAsLambdaDoes(t *testing.T) {
	for _, tt := range filterCases() {
		t.Run(tt.name, func(t *testing.T) {
			f := mustFilter(t, tt.patterns...)
			got, err := f.Match(lambdaJSON(t, tt.rec))
			if err != nil || got != tt.want {
				t.Errorf("Match = %v, %v; want %v", got, err, tt.want)
			}
			kept := filterPoller(f).filter([]streamtypes.Record{tt.rec})
			if got := len(kept) == 1; got != tt.want {
				t.Fatalf("the poller kept %d records, want the record kept: %v", len(kept), tt.want)
			}
			if tt.want && (kept[0].err != nil || !strings.Contains(string(kept[0].lambda), `"NewImage"`)) {
				t.Errorf("the record kept lost its image or did not convert: %v %s", kept[0].err, kept[0].lambda)
			}
		})
	}
}

func TestFilterReadsTheFieldsItsPatternsName(t *testing.T) {
	reads := map[string]bool{
		`{"dynamodb": {"Keys": {"sk": {"S": ["v0"]}}}}`:       false,
		`{"dynamodb": {"NewImage": {"size": {"N": ["42"]}}}}`: true,
		`{"dynamodb": ["x"]}`:                                 true,
		`{"eventName": ["MODIFY"]}`:                           false,
	}
	for pattern, want := range reads {
		if got := mustFilter(t, pattern).Reads("dynamodb", "NewImage"); got != want {
			t.Errorf("%s: Reads(dynamodb.NewImage) = %v, want %v", pattern, got, want)
		}
	}
}

func TestFilterRefusesWhatLambdaRefuses(t *testing.T) {
	six := []string{`{"a":["1"]}`, `{"a":["2"]}`, `{"a":["3"]}`, `{"a":["4"]}`, `{"a":["5"]}`, `{"a":["6"]}`}
	tests := []struct {
		name     string
		patterns []string
		want     string
	}{
		{"too many", six, "at most 5"},
		{"too long", []string{`{"a": ["` + strings.Repeat("x", 4100) + `"]}`}, "at most 4096"},
		{"not JSON", []string{`{"a": [`}, "not a JSON object"},
		{"not an object", []string{`["a"]`}, "not a JSON object"},
		{"null", []string{`null`}, "not a JSON object"},
		{"empty object", []string{`{}`}, "empty object"},
		{"bare value", []string{`{"eventName": "INSERT"}`}, "must be an array"},
		{"empty array", []string{`{"eventName": []}`}, "matches nothing"},
		{"unknown operator", []string{`{"eventName": [{"regex": ".*"}]}`}, "operator"},
		{"two operators", []string{`{"eventName": [{"prefix": "I", "suffix": "T"}]}`}, "operator"},
		{"prefix of a number", []string{`{"eventName": [{"prefix": 1}]}`}, "takes a string"},
		{"numeric, odd", []string{`{"n": [{"numeric": [">"]}]}`}, "pairs"},
		{"numeric, bad operator", []string{`{"n": [{"numeric": ["~", 1]}]}`}, "not a comparison"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := ParseFilter(tt.patterns)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("ParseFilter = %v, want an error with %q", err, tt.want)
			}
		})
	}
}

// A mapping with a filter delivers only the records it passes, in order,
// and counts the rest as filtered.
func TestStreamDeliversOnlyFilteredRecords(t *testing.T) {
	fs := &fakeStream{
		shards: []streamtypes.Shard{{ShardId: aws.String("s1"), SequenceNumberRange: &streamtypes.SequenceNumberRange{StartingSequenceNumber: aws.String("1")}}},
		records: map[string][]streamtypes.Record{"s1": {
			objectRecord("1", "a", "v0", streamtypes.OperationTypeInsert),
			objectRecord("2", "a", "v0000000001", streamtypes.OperationTypeInsert),
			objectRecord("3", "b", "c", streamtypes.OperationTypeInsert),
			objectRecord("4", "a", "v0", streamtypes.OperationTypeModify),
			objectRecord("5", "a", "v0000000002", streamtypes.OperationTypeInsert),
			objectRecord("6", "a", "v0", streamtypes.OperationTypeRemove),
		}},
	}
	r, got := deliver(t, fs, StreamMapping{BatchSize: 2, Filter: mustFilter(t, `{"dynamodb": {"Keys": {"sk": {"S": ["v0"]}}}}`)}, 3)
	if want := "[1 4 6]"; fmt.Sprint(got) != want {
		t.Errorf("delivered %v, want %s", got, want)
	}
	for _, s := range r.Stats() {
		if s.Function == "F" && (s.Filtered != 3 || s.Records != 3) {
			t.Errorf("stats: %d filtered, %d delivered; want 3 and 3", s.Filtered, s.Records)
		}
	}
}

// The objects indexer's filter on records with a 2 KiB image, half of
// them dropped (the history items) and half kept (v0), as the runner
// reads the objects table's stream.
func BenchmarkStreamFilter(b *testing.B) {
	var recs []streamtypes.Record
	for i, sk := range []string{"v0", "v0000000007"} {
		rec := objectRecord(fmt.Sprint(i), "docs/a", sk, streamtypes.OperationTypeInsert)
		rec.Dynamodb.NewImage["body"] = &streamtypes.AttributeValueMemberS{Value: strings.Repeat("lorem ipsum ", 170)}
		recs = append(recs, rec)
	}
	p := filterPoller(mustFilter(b, `{"dynamodb": {"Keys": {"sk": {"S": ["v0"]}}}}`))
	for b.Loop() {
		if kept := p.filter(recs); len(kept) != 1 {
			b.Fatal(len(kept))
		}
	}
}

// filterPoller is a stream poller of function F with filter f.
func filterPoller(f Filter) *streamPoller {
	r := New()
	r.stats["F"] = &Stats{Function: "F"}
	return r.newStreamPoller(nil, nil, StreamMapping{Function: "F", StreamARN: "arn:aws:dynamodb:us-east-1:0:table/t/stream/s", Filter: f})
}

// mustFilter is ParseFilter's filter of patterns, which must parse.
func mustFilter(tb testing.TB, patterns ...string) Filter {
	tb.Helper()
	f, err := ParseFilter(patterns)
	if err != nil {
		tb.Fatal(err)
	}
	return f
}
